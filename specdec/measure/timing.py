"""Timers, round-robin samples, and the cost measurements the speedup models need.

Shared machines drift by tens of percent between runs, so nothing here reports a lone absolute time as a
result: costs are medians of samples taken round-robin across every quantity, so that drift touches all of
them alike and their per-sample ratios (c, T(k+1)/T(1)) stay sound. (Speedups come from alternated runs, in
`schedule`.) Warm-up calls are discarded, and sized by time. The garbage collector is off inside every timed
region. The thread count is set explicitly by the caller (`hygiene.set_threads`) and recorded beside every
result. On CUDA every timer synchronises the device.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from specdec.model import corpus
from specdec.measure import hygiene
from specdec.measure import turns as _turns
from specdec.measure.clock import measured, now
from specdec.decoding.drafts import corpus_ids

# The text cost samples run at: the A/B worker's, which cannot import the package (it is the method, run as a script
# at every revision), so the package reads it from there and the two can never disagree.
from specdec.measure.ab_rows import COST_TEXT as COST_PROMPT  # noqa: F401  (timing.COST_PROMPT)


def corpus_tokens(target, split: str = "val") -> np.ndarray:
    """The shipped corpus's `split` in the target's ids: the text every cost sampler and the overhead table run
    over (the corpus's own character ids for the shipped model, the tokenizer's tokens otherwise)."""
    ids = corpus_ids(target, split)
    return corpus.split_ids(split) if ids is None else ids


def sync(device: str | torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str = "cpu", number: int = 1,
          clock: Callable[[], float] = measured) -> float:
    """Seconds per call of fn over `number` back-to-back calls (device synchronised at both ends), on the
    measurement clock; `clock=clock.now` where the time is a decision's input (the sizing probe)."""
    with hygiene.no_gc():
        sync(device)
        t0 = clock()
        for _ in range(number):
            fn()
        sync(device)
        return (clock() - t0) / number


def warm_up(fn: Callable[[], object], seconds: float = 0.05, device: str = "cpu", min_calls: int = 1) -> int:
    """Call fn until `seconds` have passed (at least `min_calls` times): warm-up sized by time, not by count,
    so a slow machine warms as long as a fast one (by the decision clock: a fake one in a test, so the calls
    made never depend on the machine). Returns the number of calls made."""
    end = now() + seconds
    n = 0
    while n < min_calls or now() < end:
        fn()
        n += 1
    sync(device)
    return n


def round_robin(
    fns: dict[str, Callable[[], object]],
    samples: int,
    number: int,
    device: str = "cpu",
    samplers: dict[str, Callable[[], object]] | None = None,
    rotate: bool = False,
    deadline: float | None = None,
    min_samples: int = 1,
) -> dict[str, np.ndarray]:
    """Seconds per call of each fn, `samples` samples each, taken in turn (after one discarded warm-up round).

    Sample i of every fn comes from the same moment, so per-sample ratios of two fns cancel drift.
    `samplers` take their turns in the same rounds but measure themselves: what each returns is kept as is.
    rotate: start round i at the i-th turn (A B C, B C A, C A B, ...) so no fn always follows the same one.
    deadline (a `clock.now()` value): stop after `min_samples` once another round would end past it, so
    a slow or loaded machine takes fewer samples instead of more time.
    """
    turns = {name: (lambda fn=fn: timed(fn, device, number)) for name, fn in fns.items()}
    turns.update({name: (lambda s=s: _quiet(s)) for name, s in (samplers or {}).items()})
    starts: list[float] = []

    def stop(i: int) -> bool:  # before round i: would another round, as long as the last, end past the deadline?
        starts.append(now())
        last = starts[-1] - starts[-2] if len(starts) > 1 else 0.0
        return deadline is not None and i > min_samples and starts[-1] + last > deadline

    kept = _turns.round_robin(turns, samples, number=1, warmup=1, rotate=rotate, stop=stop)
    return {name: np.asarray(values) for name, values in kept.items()}


def _quiet(sampler: Callable[[], object]) -> object:
    with hygiene.no_gc():
        return sampler()
