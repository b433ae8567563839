"""Acceptance, measured by running the decoding layer: over a workload (`acceptance_over`, chains and trees
alike: the report's deterministic counts), and how often a tree draft's i-th child is the accepted one
(`measure_child_acceptance`: the vector Sequoia's dynamic program sizes a tree from, `sequoia.optimal_tree`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch

from specdec.decoding.drafts import Draft
from specdec.decoding.generate import GenerationStats, generate, speculative_generate
from specdec.decoding.tree_draft import draft_tree
from specdec.decoding.tree_walk import accept_tree
from specdec.decoding.trees import TreeSpec
from specdec.measure.workload import CHARS, Workload, WorkloadItem, describe
from specdec.model import sampling
from specdec.model.gpt import GPT


@torch.inference_mode()
def measure_child_acceptance(target, draft, prompt: str = "ROMEO:", chars: int = 200, width: int = 8,
                             seed: int = 0, temperature: float = 1.0) -> np.ndarray:
    """(width,) how often the i-th child tried at a node is the accepted one, along a target generation.

    The target generates `chars` characters; one uncached forward gives p after every prefix; at each
    position the draft samples `width` children without replacement and the rule walks that one level.
    Deterministic given the seed. The ids are the prompt's and the generated ones as generated: a subword text
    need not tokenize back to them (a byte-level model's stray bytes come back as more tokens than were drawn).
    """
    n0 = len(prompt_ids := target.tokenize(prompt))
    ids = prompt_ids + list(generate(target, prompt, chars, seed=seed, temperature=temperature).ids)
    p_all = sampling.probs(target(target.ids(ids))[0], temperature)  # (len, V)
    rng = np.random.default_rng(seed + 1)
    spec = TreeSpec.from_widths((width,))
    counts = np.zeros(width)
    for t in range(n0, len(ids)):
        tree = draft_tree(spec, draft, ids[:t], rng, temperature)
        p = np.repeat(p_all[t - 1][None], len(tree.tokens) + 1, axis=0)  # only row 0 is read at one level
        path, _ = accept_tree(tree, p, rng)
        if path:
            counts[tree.children[0].index(path[0])] += 1
    return counts / (len(ids) - n0)


class _RoundLog(Draft):
    """A draft that delegates and records every round as (drafted, accepted).

    The loop calls rollback(n) after each round with n = the sequence's length before the round plus the
    accepted drafts. The summed histogram cannot give per-position acceptance exactly: a final round cut short
    (it drafts only what is still needed) and fully accepted would count as a rejection after its last draft.
    """

    def __init__(self, draft: Draft):
        self.draft, self.name, self.rounds, self._pending = draft, draft.name, [], None
        if getattr(draft, "take_features", None) is not None:  # a draft that reads the target: hand them on
            self.take_features = draft.take_features

    def reset(self) -> None:
        self.draft.reset()
        self._pending = None

    def propose(self, tokens, k, rng, temperature):
        out = self.draft.propose(tokens, k, rng, temperature)
        self._pending = (len(tokens), len(out[0]))  # what it drafted: prompt lookup may propose fewer than k
        return out

    def rollback(self, n_valid: int) -> None:
        self.draft.rollback(n_valid)
        if self._pending is not None:
            self.rounds.append((self._pending[1], n_valid - self._pending[0]))
            self._pending = None

    def weight_bytes(self) -> int:
        return self.draft.weight_bytes()


def acceptance_over(target: GPT, draft: Draft, k: int, workload: Workload | None, chars: int = CHARS,
                    temperature: float = 1.0, runs: Sequence[tuple[WorkloadItem, int]] | None = None,
                    tree: TreeSpec | None = None) -> dict:
    """Speculative generation of `chars` characters for every (item, seed) of the workload, summarised.

    per_item: one entry per run, {prompt_id, seed, acceptance, chars_per_pass, target_passes}, exactly the
    stats `speculative_generate` gives. acceptance and chars_per_pass: `describe` over those runs (each seed
    of an item is one run). accepted_per_position: the runs' histograms summed (rounds by accepted count,
    0..k). totals: pooled counts, and acceptance and chars per pass from them. runs: the (item, seed) pairs to
    run, workload.runs() by default (the report passes cycled()).
    A chain (tree None) adds k and position_acceptance[i - 1]: P(draft i accepted | drafts 1..i-1 accepted),
    pooled over every round that drafted at least i (None if none did), with position_reached, those rounds.
    A tree (every run generated with `tree=`; k is ignored) adds per depth the rounds whose walk tried it,
    accepted a node there, and their ratio (depth_acceptance, None where none tried), and draft_calls to totals.
    """
    log = _RoundLog(draft) if tree is None else None  # tree rounds never roll a draft back: nothing to log
    per_item, sts = [], []
    for item, seed in workload.runs() if runs is None else runs:
        st = speculative_generate(target, log or draft, item.prompt, chars, k, seed, temperature, tree=tree).stats
        sts.append(st)
        per_item.append({"prompt_id": item.id, "seed": seed, "acceptance": st.acceptance,
                         "chars_per_pass": st.chars_per_pass, "target_passes": st.target_passes,
                         "histogram": list(st.accepted_per_position), "drafted": st.drafted,
                         "category": getattr(item, "category", None)})
    keys = ("accepted", "drafted", "target_passes", "chars") + (("draft_calls",) if tree is not None else ())
    totals = {key: int(sum(getattr(s, key) for s in sts)) for key in keys}
    out = {"runs": len(per_item), "per_item": per_item,
           "acceptance": describe([r["acceptance"] for r in per_item]),
           "chars_per_pass": describe([r["chars_per_pass"] for r in per_item]),
           "accepted_per_position": _summed(sts, "accepted_per_position")}
    out.update(_per_depth(sts) if tree is not None else _per_position(log, k, totals))
    out["totals"] = {**totals, "acceptance": totals["accepted"] / totals["drafted"] if totals["drafted"] else 0.0,
                     "chars_per_pass": totals["chars"] / totals["target_passes"]}
    return {"k": k, **out} if tree is None else out


def _summed(sts: list[GenerationStats], key: str) -> list[int]:
    """The runs' `key` vectors (histograms, per-depth counts), summed element by element."""
    return np.sum([getattr(s, key) for s in sts], axis=0).astype(int).tolist()


def _per_position(log: _RoundLog, k: int, totals: dict) -> dict:
    """position_reached and position_acceptance of a chain's rounds, from the round log."""
    drafted, accepted = np.array(log.rounds).reshape(-1, 2).T
    if accepted.sum() != totals["accepted"] or drafted.sum() != totals["drafted"]:
        raise RuntimeError("the generation loop no longer calls rollback after every round as the draft "
                           "interface documents; per-position acceptance cannot be counted")
    reached = [int(((drafted >= i) & (accepted >= i - 1)).sum()) for i in range(1, k + 1)]
    kept = [int((accepted >= i).sum()) for i in range(1, k + 1)]
    return {"position_reached": reached, "position_acceptance": [a / n if n else None for a, n in zip(kept, reached)]}


def _per_depth(sts: list[GenerationStats]) -> dict:
    """tried_per_depth, accepted_per_depth and depth_acceptance of a tree's rounds, pooled over the runs."""
    tried, accepted = _summed(sts, "tried_per_depth"), _summed(sts, "accepted_per_depth")
    return {"tried_per_depth": tried, "accepted_per_depth": accepted,
            "depth_acceptance": [a / n if n else None for a, n in zip(accepted, tried)]}
