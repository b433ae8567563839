"""Acceptance, passes and speedup per draft x k: the figures the report's tables hold, tracked over commits.

Acceptance, chars per pass and target passes are deterministic given the seed: a change in them is a change
in behaviour, not noise. The speedups come from alternated target-only / speculative pairs (median ratio).
"""

import specdec
from specdec import stats, timing

from .common import CHARS, DRAFTS, KS, PROMPT, SEED, THREADS, costs, draft, generation_stats, target


def _skip_missing(cache, name, k):
    if f"{name}/{k}" not in cache["stats"]:
        raise NotImplementedError(f"draft {name!r} does not exist at this commit")


class Acceptance:
    params = (DRAFTS, KS)
    param_names = ["draft", "k"]

    def setup_cache(self):
        return {"stats": generation_stats()}

    def setup(self, cache, name, k):
        _skip_missing(cache, name, k)
        self.stats = cache["stats"][f"{name}/{k}"]

    def track_acceptance(self, cache, name, k):
        return self.stats["acceptance"]

    track_acceptance.unit = "accepted/drafted"

    def track_chars_per_pass(self, cache, name, k):
        return self.stats["chars_per_pass"]

    track_chars_per_pass.unit = "chars/pass"

    def track_target_passes(self, cache, name, k):
        return self.stats["target_passes"]

    track_target_passes.unit = "passes"


class Speedup:
    params = ([THREADS], DRAFTS, KS)
    param_names = ["threads", "draft", "k"]
    timeout = 300

    def setup_cache(self):
        return {"stats": generation_stats(), "costs": costs()}

    def setup(self, cache, threads, name, k):
        _skip_missing(cache, name, k)
        self.stats = cache["stats"][f"{name}/{k}"]
        self.costs = cache["costs"]

    def track_paired_speedup(self, cache, threads, name, k):
        with timing.threads(THREADS):
            pr = timing.paired_speedup(target(), draft(name), k, PROMPT, CHARS, SEED, pairs=7)
        return stats.summarize(pr.ratios).median

    track_paired_speedup.unit = "x target-only"

    def track_predicted_speedup(self, cache, threads, name, k):
        return stats.predicted_speedup(self.stats["chars_per_pass"], k, self.costs["c"][name])

    track_predicted_speedup.unit = "x target-only"

    def track_predicted_refined(self, cache, threads, name, k):
        c, st = self.costs, self.stats
        return specdec.refined_speedup(st["chars"], st["target_passes"], st["drafted"], c["step_us"],
                                       c["loop_round_us"][name][k], c["loop_char_us"][name][k])

    track_predicted_refined.unit = "x target-only"


class Exactness:
    params = DRAFTS
    param_names = ["draft"]
    timeout = 120

    def setup(self, name):
        draft(name)

    def track_total_variation(self, name):
        return specdec.verify(target(), {name: draft(name)}, k=4, samples=20_000, seed=SEED)[0]["tv"]

    track_total_variation.unit = "TV"
