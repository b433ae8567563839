"""End-to-end generation of 200 characters: target-only and speculative per draft x k."""

import specdec

from .common import THREADS, CHARS, DRAFTS, KS, PROMPT, SEED, draft, fix_threads, target


class TargetOnlyGeneration:
    params = [THREADS]
    param_names = ["threads"]
    timeout = 120

    def setup(self, threads):
        fix_threads()
        self.target = target()

    def time_generate(self, threads):
        specdec.generate(self.target, PROMPT, CHARS, seed=SEED)

    def peakmem_generate(self, threads):
        specdec.generate(self.target, PROMPT, CHARS, seed=SEED)


class SpeculativeGeneration:
    params = ([THREADS], DRAFTS, KS)
    param_names = ["threads", "draft", "k"]
    timeout = 120

    def setup(self, threads, name, k):
        fix_threads()
        self.target, self.draft = target(), draft(name)

    def time_speculative_generate(self, threads, name, k):
        specdec.speculative_generate(self.target, self.draft, PROMPT, CHARS, k=k, seed=SEED)

    def peakmem_speculative_generate(self, threads, name, k):
        specdec.speculative_generate(self.target, self.draft, PROMPT, CHARS, k=k, seed=SEED)
