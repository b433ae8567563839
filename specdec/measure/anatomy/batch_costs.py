"""What a pass costs at batch B, and the seed's cost model extended to B.

At B = 1 the seed's model prices a round at 1 + k·c target passes (the verify pass taken as one pass: T(k+1) ≈
T(1)). At batch B a round is one verify pass over B rows × (k + 1) positions and k draft steps over B rows,
against B rows of target-only steps, so both terms move:

    r_B = T_B(k+1) / T_B(1)          the verify pass against a target-only step, both over B rows
    c_B = D_B / T_B(1)               a draft step over B rows (its Python and sampling included) against it
    speedup_B = chars per pass / (r_B + k · c_B)

The speedup's prediction at each B is made from r_B and c_B measured at that B before any pair runs.

r_B itself is predicted before it is measured, from B = 1 alone: a pass costs a fixed part and a part per
position it computes, T(positions) = a + b · positions, fitted to one sequence's passes of 1, k + 1 and
FIT_WIDTH positions; a batch of B rows of n is taken to cost as B·n positions of one row. So r_B predicted =
(a + b·B·(k+1)) / (a + b·B): near 1 where the fixed part dominates (small models, small B), towards k + 1 where
the arithmetic does. Where the measured r_B departs from it, batching costs something the position count does
not (the per-row mask, the scatter, a different kernel for B > 1).
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from specdec.decoding.drafts import Draft
from specdec.measure import clock, timing
from specdec.model import rows as model_rows
from specdec.model.gpt import GPT

FIT_WIDTH = 32  # the widest single-sequence pass the B = 1 fit reads (the most positions a B = 32 step computes)


def pass_fn(target: GPT, batch: int, n: int, position: int) -> Callable[[], object]:
    """One batched pass of `batch` rows × n new positions at `position`: what a round's verify pass (n = k + 1)
    or a target-only step (n = 1) runs at that batch. B = 1 runs the single-sequence forward (the loop's path)."""
    ids = [list(range(1, n + 1)) for _ in range(batch)]
    if batch == 1:
        x = target.ids(ids[0])
        return lambda: target(x, position)
    pos = [position] * batch
    return lambda: model_rows.forward_rows(target, ids, pos)


def draft_fn(draft: Draft, batch: int, k: int, context: list[int], temperature: float) -> Callable[[], object]:
    """k draft steps for `batch` rows after `context` (the rows' caches rolled back each call): a round's
    proposal at that batch, as the loop calls it."""
    rngs = [np.random.default_rng(i) for i in range(batch)]
    rows = [list(context) for _ in range(batch)]
    n = len(context) - 1

    def run():
        if batch == 1:
            draft.rollback(n)
            return draft.propose(rows[0], k, rngs[0], temperature)
        for b in range(batch):
            draft.rollback_row(b, n)
        return draft.propose_rows(rows, [k] * batch, rngs, temperature)

    return run


@torch.inference_mode()
def measure(target: GPT, drafts: dict[str, Draft], ks: dict[str, int], batches: list[int], context: list[int],
            temperature: float, samples: int, seconds: float, device: str = "cpu") -> dict:
    """Round-robin samples of T_B(1), T_B(k+1) for every k in `ks` and each draft's k steps, per B; the single-
    sequence passes for the fit. Returns report.json's `load.costs` (µs medians) and the per-B terms."""
    position = len(context)
    target.setup_cache(max(batches))
    for d in drafts.values():  # round-robin's discarded first round feeds each row the context once
        d.reset()
        d.reset_rows(max(batches))
    widths = sorted({1, FIT_WIDTH} | {k + 1 for k in ks.values()})
    fns = {f"fit {n}": pass_fn(target, 1, n, position) for n in widths}
    for B in batches:
        for n in sorted({1} | {k + 1 for k in ks.values()}):
            fns[f"T {B} {n}"] = pass_fn(target, B, n, position)
        for name, d in drafts.items():
            fns[f"D {B} {name}"] = draft_fn(d, B, ks[name], context, temperature)
    deadline = clock.now() + seconds  # a decision: the seam's clock (measure/clock.py)
    s = timing.round_robin(fns, samples, 1, device, rotate=True, deadline=deadline, min_samples=3)
    us = {key: float(np.median(v)) * 1e6 for key, v in s.items()}
    a, b = fit(widths, [us[f"fit {n}"] for n in widths])
    out = {"fit": {"fixed_us": a, "per_position_us": b, "widths": widths}, "batches": {}}
    for B in batches:
        step = us[f"T {B} 1"]
        row = {"step_us": step, "drafts": {}}
        for name, d in drafts.items():
            k = ks[name]
            row["drafts"][name] = {
                "k": k, "verify_us": us[f"T {B} {k + 1}"], "draft_us": us[f"D {B} {name}"],
                "r_measured": us[f"T {B} {k + 1}"] / step,
                "r_predicted": (a + b * B * (k + 1)) / (a + b * B),
                "c_measured": us[f"D {B} {name}"] / k / step,
            }
        out["batches"][str(B)] = row
    out["samples"] = int(min(len(v) for v in s.values()))
    return out


def fit(widths: list[int], us: list[float]) -> tuple[float, float]:
    """Least squares a + b·n through (n, T(n)): the fixed part (µs, at least 0) and the part per position."""
    b, a = np.polyfit(np.asarray(widths, dtype=float), np.asarray(us, dtype=float), 1)
    return max(float(a), 0.0), max(float(b), 0.0)


def predicted_speedup(chars_per_pass: float, k: int, r: float, c: float) -> float:
    """The seed's formula at batch B: chars per pass / (r_B + k · c_B) (at r = 1 it is the seed's own)."""
    return chars_per_pass / (r + k * c)
