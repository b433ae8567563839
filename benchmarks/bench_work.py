"""Work: instructions per call, counted (callgrind where the machine has no hardware counter), not timed.

A count of the same code is the same on a loaded machine as on a quiet one, to a few parts per million
(docs/work.md), so these lines stay flat where the code they measure did not change and step where it did:
a 0.5 % change that time cannot tell from noise is a step here. Every figure comes from one counting process
per commit (`harness.work_counts`: `specdec ab`'s work rows, the method the running checkout's), on the onnx
backend, at k = 4; every benchmark skips where no counter runs."""

from . import harness
from .common import THREADS


def _skip_unless(cache: dict, row: str) -> None:
    if not cache:
        raise NotImplementedError("no work counter here (no hardware counter, no valgrind): see docs/work.md")
    if row not in cache:
        raise NotImplementedError(f"row {row!r} cannot be built at this commit")


def _counts():
    return harness.work_counts()


class WorkPass:
    """The target's forward over one position (a step) and over k + 1 = 5 (a verify pass)."""

    params = ([THREADS], ["pass 1", "verify 5"])
    param_names = ["threads", "row"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, row):
        _skip_unless(cache, row)

    def track_instructions(self, cache, threads, row):
        return cache[row]

    track_instructions.unit = "instructions (lower is better)"


class WorkDraft:
    """A draft's proposal per drafted token (its k = 4 proposal, stepping back one token first, over 4)."""

    params = ([THREADS], ["bigram", "ngram"])
    param_names = ["threads", "draft"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, draft):
        _skip_unless(cache, f"draft {draft}")

    def track_instructions_per_token(self, cache, threads, draft):
        return cache[f"draft {draft}"] / 4

    track_instructions_per_token.unit = "instructions (lower is better)"


class WorkRound:
    """A speculative round without its draft's work (the draft's proposals replayed), per round, at k = 4."""

    params = ([THREADS], ["bigram", "ngram"])
    param_names = ["threads", "draft"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, draft):
        _skip_unless(cache, f"round {draft} k=4")

    def track_instructions_per_round(self, cache, threads, draft):
        return cache[f"round {draft} k=4"]

    track_instructions_per_round.unit = "instructions (lower is better)"


class WorkGeneration:
    """200 characters: target-only, and speculative with each draft at k = 4."""

    params = ([THREADS], ["target-only", "spec bigram k=4", "spec ngram k=4"])
    param_names = ["threads", "row"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, row):
        _skip_unless(cache, row)

    def track_instructions(self, cache, threads, row):
        return cache[row]

    track_instructions.unit = "instructions (lower is better)"
