"""What one drafted character costs, absolutely and as c (in single target passes), per backend of the target
it is made from, and how big drafts are."""

import numpy as np

from . import harness
from .common import BACKENDS, CLOCK, DRAFTS, TEMPERATURE, THREADS, cost_context, draft, fix_threads, skip_unless


class DraftCharacter:
    timer = CLOCK  # see common.CLOCK
    params = ([THREADS], BACKENDS, DRAFTS)
    param_names = ["threads", "backend", "draft"]

    def setup(self, threads, backend, name):
        fix_threads()
        d = draft(name, backend)
        ctx = list(cost_context())
        rng = np.random.default_rng(0)
        d.reset()
        d.propose(ctx, 1, rng, TEMPERATURE)  # the draft's own cache (if any) holds the context
        n = len(ctx) - 1
        self.call = lambda: (d.rollback(n), d.propose(ctx, 1, rng, TEMPERATURE))  # what a round pays per char

    def time_draft_character(self, threads, backend, name):
        self.call()


class DraftCost:
    """c = one drafted character / one single-position target pass, the draft made from that backend's target,
    from the harness's round-robin samples (`harness.costs`, shared with VerifyGrowth): median of per-sample
    ratios. A faster pass raises every draft's c, the table drafts' too."""

    params = ([THREADS], BACKENDS, DRAFTS)
    param_names = ["threads", "backend", "draft"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180 * len(BACKENDS)

    def setup(self, cache, threads, backend, name):
        skip_unless(cache, backend, f"backend {backend!r}")
        skip_unless(cache[backend]["c"], name, f"draft {name!r}")

    def track_c(self, cache, threads, backend, name):
        return cache[backend]["c"][name]

    track_c.unit = "target passes per drafted character (lower is better)"


class DraftSize:
    params = DRAFTS
    param_names = ["draft"]

    def setup(self, name):
        self.draft = draft(name)

    def track_weight_bytes(self, name):
        return self.draft.weight_bytes()

    track_weight_bytes.unit = "bytes (lower is better)"
