"""When each request of a load window is sent: the load levels, open-loop arrival times, and the dispatcher that
keeps to them on an injected clock.

Two kinds of load level:
- **concurrency C** (closed loop): C clients, each sending its next request when its last one finished, so that
  C requests are in flight all the time; levels 1, 2, 4, ... N by default;
- **rate R** (open loop): requests arrive at R per second whatever the server does, with gaps drawn from a
  gamma distribution of shape `burstiness` (1: Poisson arrivals; below 1 burstier, above 1 more regular) and
  mean 1/R, as `vllm bench serve --burstiness` draws them.

Open loop is where coordinated omission hides queueing: a client that sends late because it was busy (or
whose server was slow to accept) and times from its actual send reports the latency it caused away (vLLM issue
54101: p99 E2EL 507 ms reported against 3330 ms from the scheduled send). So every request keeps its
*scheduled* time, and its latencies are measured from it: `dispatch` sleeps until each scheduled time, calls
`launch(i, scheduled)` (which must return at once: the request runs elsewhere), and never shifts a later
schedule because an earlier launch ran late. A launch that returns False ends the dispatch (the window needs
no more requests: its cool-down is over, or a request failed).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from specdec.util.errors import InputError


@dataclass(frozen=True)
class Level:
    """One load level: `kind` concurrency (clients) or rate (requests per second), and its value."""

    kind: str
    value: float

    @property
    def name(self) -> str:
        return f"c={int(self.value)}" if self.kind == "concurrency" else f"{self.value:g}/s"


def doubling(n: int) -> list[int]:
    """1, 2, 4, ... up to n, and n itself when it is not a power of two."""
    if n < 1:
        raise InputError(f"the largest concurrency must be at least 1, got {n}")
    out = [1]
    while out[-1] * 2 <= n:
        out.append(out[-1] * 2)
    return out if out[-1] == n else out + [n]


def parse_levels(option: str, text: str, kind: str) -> list[Level]:
    """'1,2,4' (concurrency: whole numbers >= 1) or '0.5,1,2' (rates: positive requests per second), sorted;
    InputError naming the bad value and what is allowed."""
    allowed = ("whole numbers of clients >= 1, comma-separated, e.g. 1,2,4,8" if kind == "concurrency"
               else "positive requests per second, comma-separated, e.g. 0.5,1,2")
    values = []
    for part in (text or "").split(","):
        try:
            v = float(part)
        except ValueError:
            raise InputError(f"{option} {text!r}: {part.strip()!r} is not a number (allowed: {allowed})") from None
        if not math.isfinite(v) or v <= 0 or (kind == "concurrency" and v != int(v)):
            raise InputError(f"{option} {text!r}: {part.strip()} is not allowed (allowed: {allowed})")
        values.append(v)
    return [Level(kind, v) for v in sorted(set(values))]


def arrival_offsets(n: int, rate: float, burstiness: float = 1.0, seed: int = 0) -> np.ndarray:
    """n send times in seconds from the window's start (the first at 0): gaps gamma(shape=burstiness,
    scale=1/(rate*burstiness)), mean 1/rate whatever the burstiness."""
    if not (rate > 0 and math.isfinite(rate)):
        raise InputError(f"a request rate must be a positive number per second, got {rate}")
    if not (burstiness > 0 and math.isfinite(burstiness)):
        raise InputError(f"--burstiness must be a positive number (1 is Poisson), got {burstiness}")
    gaps = np.random.default_rng(seed).gamma(burstiness, 1.0 / (rate * burstiness), size=max(n - 1, 0))
    return np.concatenate([[0.0], np.cumsum(gaps)])


def dispatch(offsets, start: float, now: Callable[[], float], sleep: Callable[[float], None],
             launch: Callable[[int, float], None], deadline: float = math.inf) -> int:
    """Launch request i at start + offsets[i] (or as soon after as the clock allows), in order; stop before a
    request scheduled after `deadline`, or when `launch` returns False (it sent nothing). Returns how many were
    launched. The scheduled time handed to `launch` is the plan's, never the late actual one: the latency
    counts the lateness."""
    launched = 0
    for i, off in enumerate(offsets):
        scheduled = start + float(off)
        if scheduled > deadline:
            break
        wait = scheduled - now()
        if wait > 0:
            sleep(wait)
        if launch(i, scheduled) is False:
            break
        launched += 1
    return launched
