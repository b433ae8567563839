"""Acceptance as the engines define it, from the histogram of accepted drafts per round, with bootstrap intervals
over the workload's prompts.

Engines disagree on names and denominators (docs/definitions.md maps each figure to vLLM's, SGLang's and
llama.cpp's). All of them follow from one histogram per run, h[j] = the rounds that accepted exactly j of their
drafts (j = 0..k: `GenerationStats.accepted_per_position`):

- **acceptance** (specdec's, vLLM's `num_accepted_tokens / num_draft_tokens`, llama.cpp's `draft_n_accepted /
  draft_n`) = Σ j·h[j] / drafted;
- **acceptance length** (vLLM's "mean acceptance length", SGLang's `accept_length`, Spec-Bench's τ) = 1 + Σ j·h[j]
  / rounds: the characters (tokens) a round emits, the accepted ones and the one the target adds;
- **per-position rate** (vLLM's `num_accepted_tokens_per_pos[i] / num_drafts`: unconditional) = the share of
  rounds whose i-th draft was accepted, Σ_{j≥i} h[j] / rounds; the rates sum to acceptance length − 1;
- **conditional rate** = Σ_{j≥i} h[j] / Σ_{j≥i-1} h[j]: of the rounds that reached draft i (accepted all before
  it), the share that accepted it too (Leviathan's α where the geometric model holds).

The intervals resample the prompts, not the rounds: rounds of one prompt share its text, so a prompt is the unit
that varies from workload to workload. A run is one (prompt, seed); the bootstrap draws prompts with replacement,
each with all its runs, and pools their histograms (a percentile interval, `BOOT` draws, seeded).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

BOOT = 1000  # bootstrap draws
LEVEL = 0.95


def figures(hist: Sequence[int] | np.ndarray, drafted: int | None = None) -> dict:
    """The engines' figures from one pooled histogram (rounds by accepted count, 0..k); `drafted` the drafts
    proposed (default rounds · k: every round drafted k)."""
    h = np.asarray(hist, dtype=float)
    k = len(h) - 1
    rounds = h.sum()
    accepted = float((np.arange(k + 1) * h).sum())
    drafted = rounds * k if drafted is None else drafted
    reached = np.cumsum(h[::-1])[::-1]  # reached[i] = rounds that accepted at least i drafts
    per_pos = (reached[1:] / rounds).tolist() if rounds else [None] * k
    cond = [float(reached[i] / reached[i - 1]) if reached[i - 1] else None for i in range(1, k + 1)]
    return {"rounds": int(rounds), "accepted": int(accepted), "drafted": int(drafted),
            "acceptance": accepted / drafted if drafted else None,
            "acceptance_length": 1 + accepted / rounds if rounds else None,
            "per_position": per_pos, "conditional": cond, "histogram": h.astype(int).tolist()}


def with_intervals(runs: Sequence[dict], seed: int = 0, boot: int = BOOT) -> dict:
    """`figures` of the runs pooled, each with its bootstrap interval over prompts. runs: dicts with "prompt_id",
    "histogram" (rounds by accepted count) and "drafted"."""
    prompts = sorted({r["prompt_id"] for r in runs})
    hist = {p: np.sum([r["histogram"] for r in runs if r["prompt_id"] == p], axis=0) for p in prompts}
    drafted = {p: sum(r["drafted"] for r in runs if r["prompt_id"] == p) for p in prompts}
    out = figures(np.sum(list(hist.values()), axis=0), sum(drafted.values()))
    rng = np.random.default_rng(seed)
    draws = [figures(np.sum([hist[prompts[i]] for i in pick], axis=0), sum(drafted[prompts[i]] for i in pick))
             for pick in rng.integers(0, len(prompts), size=(boot, len(prompts)))]
    lo, hi = (1 - LEVEL) / 2 * 100, (1 + LEVEL) / 2 * 100
    out["intervals"] = {"prompts": len(prompts), "draws": boot, "level": LEVEL}
    for key in ("acceptance", "acceptance_length"):
        xs = [d[key] for d in draws if d[key] is not None]
        out["intervals"][key] = [float(np.percentile(xs, lo)), float(np.percentile(xs, hi))] if xs else None
    for key in ("per_position", "conditional"):
        cols = []
        for i in range(len(out[key])):
            xs = [d[key][i] for d in draws if d[key][i] is not None]
            cols.append([float(np.percentile(xs, lo)), float(np.percentile(xs, hi))] if xs else None)
        out["intervals"][key] = cols
    return out


def by_category(runs: Sequence[dict], categories: dict[str, str], seed: int = 0, boot: int = BOOT) -> dict:
    """`with_intervals` for all runs ("all") and for each content category (categories: prompt id -> category;
    a prompt without one is "other")."""
    out = {"all": with_intervals(runs, seed, boot)}
    for cat in sorted({categories.get(r["prompt_id"], "other") for r in runs}):
        out[cat] = with_intervals([r for r in runs if categories.get(r["prompt_id"], "other") == cat], seed, boot)
    return out
