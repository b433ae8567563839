"""What one drafted character costs, in reference-kernel times and as c (in single target passes), per backend
of the target it is made from, and how big drafts are."""

from . import harness
from .common import BACKENDS, DRAFTS, THREADS, draft, skip_unless


class DraftCharacter:
    """One drafted character's time in reference-kernel times, the draft made from that backend's target (a
    DRAFT_K-character proposal / DRAFT_K, from the harness's round-robin, `harness.costs`)."""

    params = ([THREADS], BACKENDS, DRAFTS)
    param_names = ["threads", "backend", "draft"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180 * len(BACKENDS)

    def setup(self, cache, threads, backend, name):
        skip_unless(cache, backend, f"backend {backend!r}")
        skip_unless(cache[backend]["draft_char_time"], name, f"draft {name!r}")

    def track_relative_time(self, cache, threads, backend, name):
        return harness.sampled(cache[backend]["draft_char_time"][name])

    track_relative_time.unit = "reference-kernel times (lower is better)"


class DraftCost:
    """c = one drafted character / one single-position target pass, the draft made from that backend's target,
    from the harness's round-robin samples (`harness.costs`, shared with TargetPass and VerifyGrowth): per-sample
    ratios. A faster pass raises every draft's c, the table drafts' too."""

    params = ([THREADS], BACKENDS, DRAFTS)
    param_names = ["threads", "backend", "draft"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180 * len(BACKENDS)

    def setup(self, cache, threads, backend, name):
        skip_unless(cache, backend, f"backend {backend!r}")
        skip_unless(cache[backend]["c"], name, f"draft {name!r}")

    def track_c(self, cache, threads, backend, name):
        return harness.sampled(cache[backend]["c"][name])

    track_c.unit = "target passes per drafted character (lower is better)"


class DraftSize:
    params = DRAFTS
    param_names = ["draft"]

    def setup(self, name):
        self.draft = draft(name)

    def track_weight_bytes(self, name):
        return self.draft.weight_bytes()

    track_weight_bytes.unit = "bytes (lower is better)"
