"""Work: instructions per call, counted (callgrind where the machine has no hardware counter), not timed.

A count of the same code does not depend on the machine's load: one commit counted against itself agrees
within the work threshold (docs/work.md), so these lines stay flat where the code they measure did not change
and step where it did, by changes far below what a time can tell from noise. Every figure is counted as
`specdec ab` counts a revision (`counted.work_counts`: the running checkout's `work_pool`, loaded by path, with
the commit's installed package as the tree): the instructions outside the allocators and the type cache's
misses, the mean over three layouts, on the onnx backend, at k = 4, at one thread. Every benchmark skips where
no counter runs, with the reason (`work.probe`: valgrind or pytest-codspeed's hooks missing)."""

from . import counted

# Counted at one thread whatever SPECDEC_BENCH_THREADS says (callgrind adds every thread's instructions, the
# hardware counter counts the calling thread's); the `threads` parameter records it.
COUNTED_THREADS = [1]


def _skip_unless(cache: dict, row: str) -> None:
    if cache.get("counter") is None:
        raise NotImplementedError(f"no work counter here: {cache.get('reason')} (docs/work.md)")
    if row not in cache["rows"]:
        raise NotImplementedError(f"row {row!r} not counted: {cache['reasons'].get(row, 'not built')}")


def _counts():
    return counted.work_counts()


class WorkPass:
    """The target's forward over one position (a step) and over k + 1 = 5 (a verify pass)."""

    params = (COUNTED_THREADS, ["pass 1", "verify 5"])
    param_names = ["threads", "row"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, row):
        _skip_unless(cache, row)

    def track_instructions(self, cache, threads, row):
        return cache["rows"][row]

    track_instructions.unit = "instructions (lower is better)"


class WorkDraft:
    """A draft's proposal per drafted token (its k = 4 proposal, stepping back one token first, over 4)."""

    params = (COUNTED_THREADS, ["bigram", "ngram"])
    param_names = ["threads", "draft"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, draft):
        _skip_unless(cache, f"draft {draft}")

    def track_instructions_per_token(self, cache, threads, draft):
        return cache["rows"][f"draft {draft}"] / 4

    track_instructions_per_token.unit = "instructions (lower is better)"


class WorkRound:
    """A speculative round without its draft's work (the draft's proposals replayed), per round, at k = 4."""

    params = (COUNTED_THREADS, ["bigram", "ngram"])
    param_names = ["threads", "draft"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, draft):
        _skip_unless(cache, f"round {draft} k=4")

    def track_instructions_per_round(self, cache, threads, draft):
        return cache["rows"][f"round {draft} k=4"]

    track_instructions_per_round.unit = "instructions (lower is better)"


class WorkGeneration:
    """A generation of `counted.WORK_CHARS` (12) characters, as `specdec ab` counts one: target-only, and
    speculative with each draft at k = 4."""

    params = (COUNTED_THREADS, ["target-only", "spec bigram k=4", "spec ngram k=4"])
    param_names = ["threads", "row"]
    setup_cache = staticmethod(_counts)
    timeout = 1800

    def setup(self, cache, threads, row):
        _skip_unless(cache, row)

    def track_instructions(self, cache, threads, row):
        return cache["rows"][row]

    track_instructions.unit = "instructions (lower is better)"
