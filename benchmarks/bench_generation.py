"""End-to-end generation: target-only generation per backend in reference-kernel times, and peak memory.

Speculative generation's time is tracked relative to target-only generation, in bench_speedup (Speedup), where
both run in alternated pairs."""

from . import harness
from .common import BACKENDS, DRAFT_K, DRAFTS, THREADS, fix_threads, skip_unless, speculative, target, target_only


class TargetOnlyGeneration:
    """200 characters of target-only generation in reference-kernel times (`harness.generation_times`: every
    backend's generation and the reference kernel take turns; per-sample ratios)."""

    params = ([THREADS], BACKENDS)
    param_names = ["threads", "backend"]
    setup_cache = staticmethod(harness.generation_times)
    timeout = 120 * len(BACKENDS)

    def setup(self, cache, threads, backend):
        skip_unless(cache, backend, f"backend {backend!r}")

    def track_relative_time(self, cache, threads, backend):
        return harness.sampled(cache[backend])

    track_relative_time.unit = "reference-kernel times (lower is better)"


class TargetOnlyMemory:
    params = [THREADS]
    param_names = ["threads"]
    timeout = 120

    def setup(self, threads):
        fix_threads()
        target()

    def peakmem_generate(self, threads):
        target_only()


class SpeculativeMemory:
    """Peak memory of a speculative generation per draft (at the k c is measured at; k barely moves it)."""

    params = ([THREADS], DRAFTS)
    param_names = ["threads", "draft"]
    timeout = 120

    def setup(self, threads, name):
        fix_threads()
        self.run = speculative(name, DRAFT_K)

    def peakmem_speculative_generate(self, threads, name):
        self.run()
