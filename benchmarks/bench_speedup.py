"""Acceptance, passes and the speedup per draft x k, each tracked in its lower-is-better form.

asv reads every tracked figure as lower-is-better (it has no other direction), so the suite tracks
rejected ÷ drafted instead of acceptance, target passes per character instead of characters per pass, and
speculative ÷ target-only time instead of the speedup: a regression then shows as `+` (worse).
Rejection and passes are exact given the seed: any change is a change in behaviour, not noise. The time ratio
comes from alternated target-only / speculative pairs (`pairs.generations`): asv gets the per-pair ratios as
samples (`harness.sampled`) and tracks their median.
Both generations of a pair run on the same backend's target (`backend`). Rejection and passes are the eager
target's: they measure the draft and the rule, not how the target's pass runs.
"""

from . import harness, pairs
from .common import BACKENDS, DRAFTS, KS, THREADS, skip_unless


class Acceptance:
    params = (DRAFTS, KS)
    param_names = ["draft", "k"]
    setup_cache = staticmethod(pairs.generations)
    timeout = 300 * len(BACKENDS)

    def setup(self, cache, name, k):
        skip_unless(cache["eager"], f"{name}/{k}", f"draft {name!r}")
        self.row = cache["eager"][f"{name}/{k}"]

    def track_rejection(self, cache, name, k):
        return 1.0 - self.row["accepted"] / self.row["drafted"]

    track_rejection.unit = "rejected / drafted characters (lower is better)"

    def track_passes_per_char(self, cache, name, k):
        return self.row["target_passes"] / self.row["chars"]

    track_passes_per_char.unit = "target passes per character (lower is better)"


class Speedup:
    params = ([THREADS], BACKENDS, DRAFTS, KS)
    param_names = ["threads", "backend", "draft", "k"]
    setup_cache = staticmethod(pairs.generations)
    timeout = 300 * len(BACKENDS)

    def setup(self, cache, threads, backend, name, k):
        skip_unless(cache, backend, f"backend {backend!r}")
        skip_unless(cache[backend], f"{name}/{k}", f"draft {name!r}")
        self.row = cache[backend][f"{name}/{k}"]

    def track_time_ratio(self, cache, threads, backend, name, k):
        return harness.sampled(self.row["ratios"])

    track_time_ratio.unit = "speculative / target-only time (lower is better)"  # 1 / speedup
