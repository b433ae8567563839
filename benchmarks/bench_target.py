"""The target's forward pass: one position (a decoding step) and k+1 positions (a verify pass)."""

import torch

from .common import COST_CONTEXT, THREADS, costs, fix_threads, target


class TargetPass:
    params = ([THREADS], [1, 2, 3, 5, 9])
    param_names = ["threads", "positions"]

    def setup(self, threads, positions):
        fix_threads()
        self.model = target()
        self.pos = len(COST_CONTEXT) - 1
        with torch.inference_mode():
            self.model(torch.tensor([COST_CONTEXT]), 0)
        self.x = torch.tensor([COST_CONTEXT[-1:] * positions])

    def time_forward(self, threads, positions):
        with torch.inference_mode():
            self.model(self.x, self.pos)


class VerifyGrowth:
    """T(k+1) / T(1): how much a verify pass costs over a single step (it divides every speedup)."""

    params = ([THREADS], [2, 3, 5, 9])
    param_names = ["threads", "positions"]

    def setup_cache(self):
        return costs()

    def track_verify_over_single(self, cache, threads, positions):
        return cache["verify_pass_us"][positions] / cache["target_pass_us"]

    track_verify_over_single.unit = "single passes"
