"""Batched speculative decoding: B = 8 sequences at once, speculative ÷ target-only time (lower is better).

Both sides generate the same 8 sequences (the benchmark's prompt, seeds SEED..SEED+7) through the public API's
`batch=8`, in alternated pairs (`pairs.batch_generations`); a commit without batched generation skips. The
batch's target passes per character are exact given the seeds: a change is a change in behaviour.
"""

from . import harness, pairs
from .common import DRAFT_K, THREADS, skip_unless

BATCH_DRAFTS = ("bigram", "int8", "ngram")  # a table draft, a model draft, the best-accepted table draft


class BatchedSpeedup:
    params = ([THREADS], list(BATCH_DRAFTS), [pairs.BATCH])
    param_names = ["threads", "draft", "batch"]
    timeout = 600

    @staticmethod
    def setup_cache():
        return pairs.batch_generations(BATCH_DRAFTS, DRAFT_K)

    def setup(self, cache, threads, name, batch):
        skip_unless(cache, name, f"batched generation with draft {name!r}")
        self.row = cache[name]

    def track_time_ratio(self, cache, threads, name, batch):
        return harness.sampled(self.row["ratios"])

    track_time_ratio.unit = "speculative / target-only time at B = 8 (lower is better)"

    def track_passes_per_char(self, cache, threads, name, batch):
        return self.row["passes_per_char"]

    track_passes_per_char.unit = "batched target passes per character at B = 8 (lower is better)"
