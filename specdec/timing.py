"""Timers, paired alternating A/B runs, and the cost measurements the speedup models need.

Shared machines drift by tens of percent between runs, so nothing here reports a lone absolute time as a
result: speedups are per-pair ratios of runs made back to back (A B, then B A, ...), and costs are medians of
samples taken round-robin across every quantity, so that drift touches all of them alike and their ratios
(c, T(k+1)/T(1)) stay sound. Warm-up calls are discarded. The thread count is set explicitly by the caller
(`threads`) and recorded beside every result. On CUDA every timer synchronises the device.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from . import corpus, sampling
from .drafts import Draft
from .model import GPT

COST_PROMPT = "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up"


@contextlib.contextmanager
def threads(n: int):
    """Run the block with torch using exactly n threads (restored afterwards)."""
    if n < 1:
        raise ValueError(f"threads must be at least 1, got {n}")
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield n
    finally:
        torch.set_num_threads(before)


def sync(device: str | torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str = "cpu", number: int = 1) -> float:
    """Seconds per call of fn over `number` back-to-back calls (device synchronised at both ends)."""
    sync(device)
    t0 = time.perf_counter()
    for _ in range(number):
        fn()
    sync(device)
    return (time.perf_counter() - t0) / number


@dataclass
class Paired:
    """Times of A and B from alternated runs and their per-pair ratios A/B (B's speedup over A)."""

    a: list[float] = field(default_factory=list)
    b: list[float] = field(default_factory=list)

    @property
    def ratios(self) -> list[float]:
        return [ta / tb for ta, tb in zip(self.a, self.b)]


def paired(
    fn_a: Callable[[], object],
    fn_b: Callable[[], object],
    pairs: int = 5,
    warmup: int = 1,
    device: str = "cpu",
) -> Paired:
    """Run A and B alternately, `pairs` times each after `warmup` discarded pairs.

    The order within a pair alternates too (A B, B A, A B, ...) so that neither side always runs second,
    into caches the other just warmed.
    """
    if pairs < 1:
        raise ValueError(f"pairs must be at least 1, got {pairs}")
    out = Paired()
    for i in range(warmup + pairs):
        if i % 2 == 0:
            ta = timed(fn_a, device)
            tb = timed(fn_b, device)
        else:
            tb = timed(fn_b, device)
            ta = timed(fn_a, device)
        if i >= warmup:
            out.a.append(ta)
            out.b.append(tb)
    return out


def round_robin(
    fns: dict[str, Callable[[], object]], samples: int, number: int, device: str = "cpu"
) -> dict[str, np.ndarray]:
    """Seconds per call of each fn, `samples` samples each, taken in turn (after one discarded warm-up round).

    Sample i of every fn comes from the same moment, so per-sample ratios of two fns cancel drift.
    """
    times: dict[str, list[float]] = {name: [] for name in fns}
    for i in range(samples + 1):
        for name, fn in fns.items():
            t = timed(fn, device, number)
            if i:
                times[name].append(t)
    return {name: np.asarray(ts) for name, ts in times.items()}


@dataclass
class Costs:
    """What the generation loops pay, in microseconds (medians of round-robin samples)."""

    target_pass_us: float  # one single-position target forward
    verify_pass_us: dict[int, float]  # positions -> one forward over that many new positions
    step_us: float  # one character of target-only generation: single pass + p + sampling
    round_us: dict[int, float]  # k -> one speculative round without the draft: (k+1) pass + p + rule
    draft_char_us: dict[str, float]  # draft -> one drafted character as `propose` pays it
    c_range: dict[str, tuple[float, float]]  # draft -> min, max of per-sample c (drift cancels within one)
    char_range: dict[str, tuple[float, float]]  # draft -> min, max of the per-character samples (µs)
    threads: int
    device: str

    def c(self, draft: str) -> float:
        return self.draft_char_us[draft] / self.target_pass_us


@torch.inference_mode()
def measure_costs(
    target: GPT,
    drafts: dict[str, Draft],
    ks: list[int],
    samples: int = 15,
    number: int = 20,
    draft_k: int = 4,
    temperature: float = 1.0,
    device: str = "cpu",
    threads_used: int | None = None,
) -> Costs:
    """Time each piece the loops pay at a mid-context position (the cost prompt, ~80 characters in).

    Drafts are timed through `propose(draft_k)` after rolling back one token, the steady state of a round
    that ended in a rejection: their call, sampling and cache step, divided by draft_k.
    """
    tokens = corpus.encode(COST_PROMPT)
    pos = len(tokens) - 1
    dev = torch.device(device)
    target.setup_cache(1)
    target(torch.tensor([tokens], device=dev), 0)  # fill the cache up to pos
    rng = np.random.default_rng(0)
    V = target.config.vocab_size
    one = torch.tensor([[tokens[-1]]], device=dev)
    fns: dict[str, Callable[[], object]] = {"target": lambda: target(one, pos)}

    def step():
        logits = target(torch.tensor([tokens[pos:]], device=dev), pos)[0, -1]
        return sampling.sample(sampling.probs(logits.cpu(), temperature), rng)

    fns["step"] = step
    q_uniform = np.full((max(ks), V), 1.0 / V)
    for k in sorted(set(ks)):
        x = torch.tensor([tokens[-1:] + tokens[:k]], device=dev)
        fns[f"verify{k + 1}"] = lambda x=x: target(x, pos)

        def round_(k=k):
            drafted = tokens[:k]
            logits = target(torch.tensor([tokens[pos:] + drafted], device=dev), pos)[0, -(k + 1):]
            p = sampling.probs(logits.cpu(), temperature)
            n_acc, nxt = sampling.accept_reject(p, q_uniform[:k], drafted, rng)
            return tokens[: pos + 1] + drafted[:n_acc] + [nxt]

        fns[f"round{k}"] = round_
    context = tokens[: pos + 1]
    for name, draft in drafts.items():
        draft.reset()
        draft.propose(context, draft_k, rng, temperature)

        def char(draft=draft):
            draft.rollback(pos)
            draft.propose(context, draft_k, rng, temperature)

        fns[f"draft:{name}"] = char
    raw = round_robin(fns, samples, number, device)
    us = {name: float(np.median(t)) * 1e6 for name, t in raw.items()}
    per_char = {name: raw[f"draft:{name}"] * 1e6 / draft_k for name in drafts}
    c_samples = {name: per_char[name] / (raw["target"] * 1e6) for name in drafts}
    return Costs(
        target_pass_us=us["target"],
        verify_pass_us={k + 1: us[f"verify{k + 1}"] for k in sorted(set(ks))},
        step_us=us["step"],
        round_us={k: us[f"round{k}"] for k in sorted(set(ks))},
        draft_char_us={name: us[f"draft:{name}"] / draft_k for name in drafts},
        c_range={name: (float(v.min()), float(v.max())) for name, v in c_samples.items()},
        char_range={name: (float(v.min()), float(v.max())) for name, v in per_char.items()},
        threads=threads_used or torch.get_num_threads(),
        device=str(device),
    )


def paired_speedup(
    target: GPT,
    draft: Draft,
    k: int,
    prompt: str,
    chars: int = 200,
    seed: int = 0,
    temperature: float = 1.0,
    pairs: int = 5,
    device: str = "cpu",
) -> Paired:
    """Target-only (A) against speculative (B) generation of the same characters, alternated.

    Ratios are A/B: above 1 means speculative decoding was faster. Both sides use the same seed, so every
    pair repeats exactly the same work and only the clock varies.
    """
    from .decode import generate, speculative_generate

    return paired(
        lambda: generate(target, prompt, chars, seed, temperature),
        lambda: speculative_generate(target, draft, prompt, chars, k, seed, temperature),
        pairs=pairs,
        device=device,
    )
