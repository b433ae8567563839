"""`specdec bisect GOOD BAD`: the first commit that made the code slower, found with the running specdec as the
fixed harness at every step (never a step's own specdec).

The search is git bisect's over the commits after GOOD up to BAD (first-parent history), each commit judged
against GOOD by the caller's `judge(i) -> bool` (True: worse than GOOD). A commit the caller cannot measure
(`skip(i)`: the user's module does not exist there yet, or a specdec revision without the package) is skipped
as `git bisect skip` skips it: never judged, never taken as bad; where skipped commits border the answer, every
one of them is named with it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field


@dataclass
class Found:
    """The search's answer: `first` the index of the first bad commit (None where BAD was not worse than GOOD),
    `candidates` the indices it could be (more than one only where skipped commits come just before it),
    `judged` every index judged with its verdict, `skipped` the indices skipped."""

    first: int | None
    candidates: list[int]
    judged: dict[int, bool] = field(default_factory=dict)
    skipped: list[int] = field(default_factory=list)


def search(n: int, judge: Callable[[int], bool | None], skip: Callable[[int], bool]) -> Found:
    """Commits 0..n-1 after GOOD (n - 1 is BAD): BAD is judged first; then halving over the commits between the
    last good one and the first bad one, a skipped midpoint replaced by its nearest measurable neighbour. A
    judge answering None (nothing it could measure there) skips that commit too."""
    found = Found(None, [])
    skipped: set[int] = set()

    def measurable(i: int) -> bool:
        if i in skipped:
            return False
        if skip(i):
            skipped.add(i)
            return False
        return True

    if n <= 0 or not measurable(n - 1):
        found.skipped = sorted(skipped)
        return found
    verdict = judge(n - 1)
    if verdict is not None:
        found.judged[n - 1] = verdict
    if not verdict:
        found.skipped = sorted(skipped)
        return found
    lo, hi = -1, n - 1  # lo: the last commit known good (-1 is GOOD), hi: the first known bad
    while hi - lo > 1:
        mid = (lo + hi) // 2
        order = sorted(range(lo + 1, hi), key=lambda i: (abs(i - mid), i))
        pick = next((i for i in order if measurable(i)), None)
        if pick is None:  # every commit between them skipped: any of them, or hi, is the first bad one
            break
        verdict = judge(pick)
        if verdict is None:
            skipped.add(pick)
            continue
        found.judged[pick] = verdict
        if verdict:
            hi = pick
        else:
            lo = pick
    found.first = hi
    found.candidates = list(range(lo + 1, hi + 1))
    found.skipped = sorted(skipped)
    return found
