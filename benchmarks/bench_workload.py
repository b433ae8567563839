"""The workload's figures and tree configurations, each in its lower-is-better form.

Workload: the shipped `shakespeare24` as the report cycles it (every fourth prompt, seeds taken in turn:
six runs), pooled counts (rejected ÷ drafted, target passes per character) and the speculative ÷ target-only
time of each run's alternated pair (asv's samples; it tracks their median). Trees: the table drafts with fixed tree shapes on the
benchmark prompt, the same forms. Both APIs are newer than the first trained target: on a commit without
`specdec.load_workload` or `specdec.TreeSpec` every benchmark here skips.
"""

from . import harness, pairs
from .common import THREADS, skip_unless

WORKLOAD_DRAFTS = ["bigram", "ngram", "int8"]
WORKLOAD_KS = [1, 4, 8]
TREE_DRAFTS = ["bigram", "ngram"]  # fixed here, not read from specdec: asv's parameters stay the same on every commit
TREE_SHAPES = ["4x2x2x1", "2x2x2x1x1x1"]


class _PooledFigures:
    """The three lower-is-better figures of a row of pooled counts and summed times (`self.row`)."""

    def track_rejection(self, cache, threads, name, config):
        return 1.0 - self.row["accepted"] / self.row["drafted"]

    track_rejection.unit = "rejected / drafted characters or tree nodes (lower is better)"

    def track_passes_per_char(self, cache, threads, name, config):
        return self.row["target_passes"] / self.row["chars"]

    track_passes_per_char.unit = "target passes per character (lower is better)"

    def track_time_ratio(self, cache, threads, name, config):
        return harness.sampled(self.row["ratios"])

    track_time_ratio.unit = "speculative / target-only time per pair (lower is better)"


class Workload(_PooledFigures):
    params = ([THREADS], WORKLOAD_DRAFTS, WORKLOAD_KS)
    param_names = ["threads", "draft", "k"]
    timeout = 300

    def setup_cache(self):
        return pairs.workload_generations(WORKLOAD_DRAFTS, WORKLOAD_KS)

    def setup(self, cache, threads, name, k):
        skip_unless(cache, f"{name}/{k}", f"the workload API or draft {name!r}")
        self.row = cache[f"{name}/{k}"]


class Tree(_PooledFigures):
    params = ([THREADS], TREE_DRAFTS, TREE_SHAPES)
    param_names = ["threads", "draft", "shape"]
    timeout = 300

    def setup_cache(self):
        return pairs.tree_generations(TREE_DRAFTS, TREE_SHAPES)

    def setup(self, cache, threads, name, shape):
        skip_unless(cache, f"{name}/{shape}", f"trees or draft {name!r}")
        self.row = cache[f"{name}/{shape}"]
