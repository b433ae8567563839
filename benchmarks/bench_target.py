"""The target's forward pass: one position (a decoding step) and the widest verify pass per backend,
T(k+1)/T(1), and the overhead share of a single pass (1 - roofline floor / measured) per backend."""

import torch

from . import harness
from .common import BACKENDS, CLOCK, POSITIONS, THREADS, cost_context, fix_threads, skip_unless, target


class TargetPass:
    """Backend x {1, widest verify} positions (T(n)/T(1) at every width is VerifyGrowth's): a small grid."""

    timer = CLOCK  # see common.CLOCK
    params = ([THREADS], BACKENDS, [1, POSITIONS[-1]])
    param_names = ["threads", "backend", "positions"]

    def setup(self, threads, backend, positions):
        fix_threads()
        model = target(backend)
        ctx = list(cost_context())
        pos = len(ctx) - 1
        with torch.inference_mode():
            model(torch.tensor([ctx]), 0)  # the cache holds the context; every pass runs at its last position
        x = torch.tensor([ctx[-1:] * positions])
        self.forward = torch.inference_mode()(lambda: model(x, pos))

    def time_forward(self, threads, backend, positions):
        self.forward()


class VerifyGrowth:
    """T(k+1) / T(1): what a verify pass costs in single passes (it divides every speedup), per backend.

    From the harness's round-robin (`harness.costs`, shared with DraftCost): median of per-sample ratios.
    """

    params = ([THREADS], BACKENDS, POSITIONS)
    param_names = ["threads", "backend", "positions"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180 * len(BACKENDS)

    def setup(self, cache, threads, backend, positions):
        skip_unless(cache, backend, f"backend {backend!r}")

    def track_verify_over_single(self, cache, threads, backend, positions):
        return cache[backend]["verify_over_single"][positions]

    track_verify_over_single.unit = "single-position passes (lower is better)"


class OverheadShare:
    """1 - floor / measured of a single-position pass per backend (`harness.overhead_shares`): the share of
    the pass that is not the arithmetic and the weight reads it needs. Taking overhead back lowers it."""

    params = ([THREADS], BACKENDS)
    param_names = ["threads", "backend"]
    setup_cache = staticmethod(harness.overhead_shares)
    timeout = 120

    def setup(self, cache, threads, backend):
        if not cache:
            raise NotImplementedError("no pass_flops, pass_bytes and measure_machine at this commit")
        skip_unless(cache, backend, f"backend {backend!r}")

    def track_overhead_share(self, cache, threads, backend):
        return cache[backend]

    track_overhead_share.unit = "share of a single-position pass above its roofline floor (lower is better)"
