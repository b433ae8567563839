"""The one clock every budget, deadline and warm-up decision reads: `now()`.

A report, a calibration or `specdec ab` decides how much to do from how long things took: a section's share of
the time left, a cost table's last round before its deadline, a warm-up of 30 ms, the sizing probe's per-token
cost. Every such decision reads `now()`, and nothing else, so that

- a test fixes what is decided by handing a fake clock to the call that decides (`report.measure(clock=...)`, or
  `using(fake)` around it), instead of patching a module's `time`;
- the guard `SPECDEC_TIME_SCALE=N` (read once, at import, so that subprocesses inherit it through the
  environment; a value that is not a positive number raises nothing there -- an import is no place for an
  error -- but an InputError from `check_scale`, which the command line calls first, and from every
  `now()`) multiplies every duration the real clock returns by N: the process decides as if the machine
  were N times slower (N = 3) or faster (N = 0.33), while the work itself runs at the machine's own speed.
  `tools/time_scale.py` runs the test suite so; a test outcome that changes under it depended on the machine.

What the timers *measure* (a pair's two generations, a cost sample, a worker's samples in `specdec ab`) is not a
decision: those read the measurement clocks of `timing` and of the worker, which the guard leaves alone, since
a ratio of two timings is the same on any machine. The sizing probe is the exception that proves the rule: its
per-token cost decides the plan, so it times through `now()` (`timing.timed(..., clock=now)`).
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Callable, Iterator

from specdec.util.errors import InputError

ENV = "SPECDEC_TIME_SCALE"


def read_scale(text: str | None) -> float:
    """The guard's factor from the variable's text (1 when unset or blank); InputError naming a value that is
    not a positive number and the allowed ones."""
    text = (text or "").strip()
    if not text:
        return 1.0
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise InputError(f"{ENV}={text!r} is not a positive number of times (allowed: e.g. 3 for a machine 3x "
                         f"slower, 0.33 for 3x faster, 1 or unset for this machine)")
    return value


try:
    SCALE, _BAD = read_scale(os.environ.get(ENV)), None
except InputError as exc:  # kept for `check_scale` and `now`: raising here would break every import
    SCALE, _BAD = float("nan"), str(exc)
# The decision clock's reading as this module loads (the package's import begins with it: `specdec._IMPORTED`);
# None under a bad guard, whose first `now()` raises.
IMPORTED: float | None = None if _BAD else time.perf_counter() * SCALE
# The measurement clock: what a timer measures (a pair's generations, a cost sample, a profiled span). Not a
# decision, so neither the guard nor a test's fake clock touches it; named here so that every read of time in
# the package goes through this module (tests/measure/test_clock.py checks it).
measured: Callable[[], float] = time.perf_counter
_source: Callable[[], float] | None = None  # a clock handed in by `using` (a test's fake one); None: the real one


def check_scale() -> None:
    """InputError (one line) when SPECDEC_TIME_SCALE is not a positive number: the command line's first check,
    so that a bad guard is exit 2 before any work."""
    if _BAD is not None:
        raise InputError(_BAD)


def now() -> float:
    """Seconds on the decision clock: the real monotonic clock times SCALE, or the clock `using` installed
    (a fake clock is taken as it is: the guard scales the machine's time, not a test's hand-set one).
    InputError under a bad guard: no decision reads a NaN."""
    if _source is not None:
        return _source()
    if _BAD is not None:
        raise InputError(_BAD)
    return time.perf_counter() * SCALE


@contextlib.contextmanager
def using(source: Callable[[], float] | None) -> Iterator[None]:
    """Within the block every decision reads `source` (None: the clock as it was)."""
    global _source
    if source is None:
        yield
        return
    old, _source = _source, source
    try:
        yield
    finally:
        _source = old
