"""Turns: things compared are timed side by side, never in separate runs -- the one way every method here does it.

  * `round_robin`: every named turn runs once per round, the rounds' order rotating (A B C, then B C A, ...), so
    that sample i of every turn spans the same moments and per-sample ratios cancel drift and load.
  * `pair`: two calls back to back, their order alternated from pair to pair by the caller (A B, then B A), a
    pair's figure the ratio B / A.
  * `sampled`: a figure as its samples, the form asv's runner reads as a sampled result.

The report's timers (`timing.round_robin`) and a user's asv suite (`yours/user_bench`) import this module; the
repository's asv harness (benchmarks/harness.py) loads it by path through `method.load`, as it loads the counting
method, so the running checkout's copy times every commit and an old commit's package never lends it one. So it
imports only the standard library.
"""

from __future__ import annotations

import contextlib
import gc
from typing import Callable, Iterator


@contextlib.contextmanager
def gc_paused(collect: bool = True) -> Iterator[None]:
    """Keep the collector out of the block (a collection inside a timed call is noise), after collecting now unless
    `collect` is False (a block timed many times in a row: one collection before the series, not one each)."""
    enabled = gc.isenabled()
    if collect:
        gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def timed(fn: Callable[[], object], clock: Callable[[], float]) -> float:
    """Seconds of one call of fn on `clock`."""
    t0 = clock()
    fn()
    return clock() - t0


def pair(fn_a: Callable[[], object], fn_b: Callable[[], object], timer: Callable[[Callable[[], object]], float],
         b_first: bool = False) -> float:
    """One pair's time ratio B / A, the two run back to back with the collector held off, each timed by
    `timer(fn)` (seconds: `timed` on a clock, or a worker's own timer); alternate `b_first` from pair to pair
    (A B, then B A, ...) so that neither side always runs second, into caches the other just warmed."""
    with gc_paused():
        if b_first:
            tb, ta = timer(fn_b), timer(fn_a)
        else:
            ta, tb = timer(fn_a), timer(fn_b)
    return tb / ta


def round_robin(turns: dict[str, Callable[[], object]], samples: int, number: int = 1, warmup: int = 1,
                rotate: bool = True, paused: bool = False,
                stop: Callable[[int], bool] | None = None) -> dict[str, list]:
    """Each named turn's values, `samples` samples each, after `warmup` discarded samples.

    A turn measures itself: it returns its own value (seconds, or whatever a sampler measures). A sample is
    `number` rounds; in a round every turn runs once, and with `rotate` each round starts one turn later than the
    one before (A B C, B C A, C A B, ... counted over every round, warm-up included) so that no turn always
    follows the same one, whose data it would find in the CPU caches, or not. A sample's value is a turn's
    smallest over its rounds -- on a shared machine a turn that was descheduled or ran beside another process's
    burst is slower, never faster, so the smallest of a few is the least disturbed -- and with one round its value
    as is. paused: the collector held off over each sample (collected before it). stop(i): asked before
    sample i (0 is the first warm-up sample); True ends the sampling there, with the samples kept so far.
    """
    names = list(turns)
    kept: dict[str, list] = {name: [] for name in names}
    rounds = 0
    for i in range(warmup + samples):
        if stop is not None and stop(i):
            break
        best: dict[str, object] = {}
        with gc_paused() if paused else contextlib.nullcontext():
            for _ in range(number):
                shift = rounds % len(names) if rotate else 0
                rounds += 1
                for name in names[shift:] + names[:shift]:
                    value = turns[name]()
                    best[name] = value if name not in best else min(best[name], value)
        if i >= warmup:
            for name in names:
                kept[name].append(best[name])
    return kept


def sampled(values) -> dict:
    """A tracked figure as its samples, in the form asv's runner reads as a sampled result (what a `time_*`
    benchmark hands it): asv stores the samples, appends those of later rounds, takes their median as the
    figure with a 99 % interval, and `asv continuous`/`compare` test the two commits' samples (Mann-Whitney,
    p < 0.002) before flagging a change beyond the factor. `values`: any array-like of numbers, flattened."""
    import numpy as np  # here, not at import: this file's import stays the standard library's

    flat = [float(v) for v in np.asarray(values, dtype=float).ravel()]
    if not flat:
        raise ValueError("a sampled figure needs at least one sample")
    return {"samples": flat, "number": 1}
