"""The target's forward pass: one position (a decoding step), k+1 positions (a verify pass), and T(k+1)/T(1)."""

import torch

from . import harness
from .common import CLOCK, POSITIONS, THREADS, cost_context, fix_threads, target


class TargetPass:
    timer = CLOCK  # see common.CLOCK
    params = ([THREADS], [1] + POSITIONS)
    param_names = ["threads", "positions"]

    def setup(self, threads, positions):
        fix_threads()
        model = target()
        ctx = list(cost_context())
        pos = len(ctx) - 1
        with torch.inference_mode():
            model(torch.tensor([ctx]), 0)  # the cache holds the context; every pass runs at its last position
        x = torch.tensor([ctx[-1:] * positions])
        self.forward = torch.inference_mode()(lambda: model(x, pos))

    def time_forward(self, threads, positions):
        self.forward()


class VerifyGrowth:
    """T(k+1) / T(1): what a verify pass costs in single passes (it divides every speedup).

    From the harness's round-robin (`harness.costs`, shared with DraftCost): median of per-sample ratios.
    """

    params = ([THREADS], POSITIONS)
    param_names = ["threads", "positions"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180

    def track_verify_over_single(self, cache, threads, positions):
        return cache["verify_over_single"][positions]

    track_verify_over_single.unit = "single-position passes (lower is better)"
