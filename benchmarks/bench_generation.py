"""End-to-end generation: target-only and speculative per draft x k (time), and peak memory."""

from .common import CLOCK, DRAFT_K, DRAFTS, KS, THREADS, fix_threads, speculative, target, target_only


class TargetOnlyGeneration:
    timer = CLOCK  # see common.CLOCK
    params = [THREADS]
    param_names = ["threads"]
    timeout = 120

    def setup(self, threads):
        fix_threads()
        target()

    def time_generate(self, threads):
        target_only()

    def peakmem_generate(self, threads):
        target_only()


class SpeculativeGeneration:
    timer = CLOCK
    params = ([THREADS], DRAFTS, KS)
    param_names = ["threads", "draft", "k"]
    timeout = 120

    def setup(self, threads, name, k):
        fix_threads()
        self.run = speculative(name, k)

    def time_speculative_generate(self, threads, name, k):
        self.run()


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
