"""The target's forward pass: one position (a decoding step) and the widest verify pass per backend, in
reference-kernel times; T(k+1)/T(1); and the overhead share of a single pass (1 - roofline floor / measured)
per backend. All from the harness's round-robin samples, handed to asv as samples (`harness.sampled`)."""

from . import harness
from .common import BACKENDS, POSITIONS, THREADS, skip_unless


class TargetPass:
    """A pass's time in reference-kernel times (`harness.costs`: the pass and the reference kernel take turns in
    one round-robin; per-sample ratios), backend x {1, widest verify} positions (T(n)/T(1) at every width is
    VerifyGrowth's): a small grid. A slower forward moves it; load that slows the machine cancels."""

    params = ([THREADS], BACKENDS, [1, POSITIONS[-1]])
    param_names = ["threads", "backend", "positions"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180 * len(BACKENDS)

    def setup(self, cache, threads, backend, positions):
        skip_unless(cache, backend, f"backend {backend!r}")

    def track_relative_time(self, cache, threads, backend, positions):
        return harness.sampled(cache[backend]["pass_time"][positions])

    track_relative_time.unit = "reference-kernel times (lower is better)"


class VerifyGrowth:
    """T(k+1) / T(1): what a verify pass costs in single passes (it divides every speedup), per backend.

    From the harness's round-robin (`harness.costs`, shared with TargetPass and the draft benchmarks):
    per-sample ratios.
    """

    params = ([THREADS], BACKENDS, POSITIONS)
    param_names = ["threads", "backend", "positions"]
    setup_cache = staticmethod(harness.costs)
    timeout = 180 * len(BACKENDS)

    def setup(self, cache, threads, backend, positions):
        skip_unless(cache, backend, f"backend {backend!r}")

    def track_verify_over_single(self, cache, threads, backend, positions):
        return harness.sampled(cache[backend]["verify_over_single"][positions])

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
        return harness.sampled(cache[backend])

    track_overhead_share.unit = "share of a single-position pass above its roofline floor (lower is better)"
