"""One step and one round, as generation runs them and as everything that times or counts them calls them: a
target-only step (a pass and a draw), a verify pass's distributions, and the settlement of a speculative round
once the draft has proposed -- a chain's (`settle_round`: the pass, the rule, the rollbacks, a feature draft's
hand-off) and a tree's (`settle_tree_round`: the pass over the nodes, the walk, the path's K/V moved into
place). `Hooks` is the seam through which the attribution labels the sampling code, the rule and the draft
without a copy of these functions. `generate`'s loops are built from them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from specdec.decoding import rule, trees
from specdec.decoding import tree_walk
from specdec.decoding.drafts import Draft
from specdec.decoding.outputs import GenerationStats
from specdec.model import sampling
from specdec.model.protocol import Target, feature_request


def _unchanged(propose: Callable) -> Callable:
    return propose


@dataclass(frozen=True)
class Hooks:
    """What generation's loops call through: `sampling`'s probs and sample, `rule`'s accept_reject, and a
    wrapper around the draft's propose (applied once per generation). Generation runs `PLAIN`, the modules
    themselves, looked up at call time; the attribution (`measure.attribution`) passes objects that run the same
    functions under labels, so it attributes this module's own loops without a copy of them."""

    sampling: Any = sampling
    rule: Any = rule
    draft: Callable[[Callable], Callable] = _unchanged


PLAIN = Hooks()


def step(target: Target, ids: list[int], pos: int, temperature: float, rng: np.random.Generator,
         hooks: Hooks = PLAIN) -> int:
    """One character of target-only generation: a pass over `ids` (the tokens from `pos` on, the cache holding
    those before) and a character drawn from the last position's distribution with one uniform from `rng`.

    A backend that can sample inside its pass (`sample_step`: onnx) does both in one call -- the logits-to-
    sample overhead taken back -- with the same uniform, so the text is the same. Everything that times a
    target-only step (timing, overhead, the benchmarks) calls this, so it times what `generate` runs.
    """
    fused = getattr(target, "sample_step", None)
    if fused is not None:
        return fused(ids, pos, temperature, rng)
    logits = target(target.ids(ids), pos)[0, -1]  # (V,)
    return hooks.sampling.sample(hooks.sampling.probs(logits, temperature), rng)


def verify(target: Target, ids: list[int], pos: int, n: int, temperature: float,
           hooks: Hooks = PLAIN) -> np.ndarray:
    """The target's distributions (n, V) float64 at the last n positions of one pass over `ids` (the tokens
    from `pos` on: pending ones, then the drafts): what the rule reads in a speculative round.

    A backend that computes them inside its pass (`pass_probs`: onnx) returns them directly; everything that
    times a round (timing, overhead) calls this too.
    """
    fused = getattr(target, "pass_probs", None)
    if fused is not None:
        return fused(ids, pos, n, temperature)
    return hooks.sampling.probs(target(target.ids(ids), pos)[0, -n:], temperature)  # (n, V)


def settle_round(target: Target, draft: Draft, tokens: list[int], pos: int, drafted: list[int], q: np.ndarray | None,
                 rng: np.random.Generator, temperature: float, stats: GenerationStats,
                 hooks: Hooks = PLAIN) -> tuple[int, int]:
    """The rest of a speculative round once the draft has proposed `drafted` (q: (len, V), None if nothing was
    drafted): the target's pass over the pending tokens and the drafts, the rule (`accept_round`), the target
    and the draft told what is still valid, and a draft that reads features handed those of the confirmed
    positions (pos.. the new position - 1).

    Returns (the new position, drafts accepted): the position moves back to just before the emitted
    character. The cost samplers (`round_samplers.loop_sampler`) time this same function, so a round's term is what
    generation runs, bookkeeping included.
    """
    take = getattr(draft, "take_features", None)
    # on here too (the cost samplers call this function without `features_for`), and off again after, as found:
    # a target left forming features would hand its states to whatever copies it next
    turned_on = take is not None and not target.want_features
    if take is not None:
        target.want_features = feature_request(draft)
    try:
        p = verify(target, tokens[pos:] + drafted, pos, len(drafted) + 1, temperature, hooks)  # (kr + 1, V)
        start = pos
        pos, n_acc = accept_round(tokens, p, drafted, q, rng, stats, hooks)
        target.rollback(pos)  # a no-op for the shipped GPT (its cache is overwritten in place); a crop elsewhere
        draft.rollback(pos)
        if take is not None:
            take(target.features[0, : pos - start], start)
    finally:
        if turned_on:
            target.want_features, target.features = False, None
    return pos, n_acc


def accept_round(tokens: list[int], p: np.ndarray, drafted: list[int], q: np.ndarray | None,
                 rng: np.random.Generator, stats: GenerationStats, hooks: Hooks = PLAIN) -> tuple[int, int]:
    """One sequence's round once the target's distributions p (kr + 1, V) are in: the rule, the emitted
    characters appended to `tokens` (in place), the counts. Returns (the new position, drafts accepted)."""
    kr = len(drafted)
    stats.target_passes += 1
    if kr:
        n_acc, nxt = hooks.rule.accept_reject(p, q, drafted, rng)
        stats.draft_calls += 1
        stats.accepted_per_position[n_acc] += 1
    else:
        n_acc, nxt = 0, hooks.sampling.sample(p[0], rng)
    tokens.extend(drafted[:n_acc])
    tokens.append(nxt)
    stats.drafted += kr
    stats.accepted += n_acc
    return len(tokens) - 1, n_acc  # move back: only the emitted character is not yet in the cache


def settle_tree_round(target: Target, tokens: list[int], pos: int, t: trees.Tree | None, rng: np.random.Generator,
                      temperature: float, stats: GenerationStats) -> int:
    """The rest of a tree round once the tree `t` is drafted (None: nothing drafted): one verify pass over the
    pending tokens and the nodes, the walk, the accepted nodes' K/V moved into place, the emitted characters
    appended to `tokens` (in place), the counts. Returns the new position. `tree_timing` times this same
    function.

    The mask and positions come from the shape's cached arrays (`Tree.attention_lean`), the pass runs without
    torch where the target offers it (`tree_logits`: onnx), and the path's K/V move by the target's
    `keep_path_lean` where it has one, else its `keep_path`.
    """
    n_pend = len(tokens) - pos
    ids = tokens[pos:] + (t.tokens if t else [])
    if t is None:
        logits = target(target.ids(ids), pos)[0, n_pend - 1 :]
    else:
        logits = _tree_logits_lean(target, ids, pos, t, n_pend)
    stats.target_passes += 1
    p = sampling.probs(logits, temperature)  # (1 + N, V)
    if t is None:
        path, nxt = [], sampling.sample(p[0], rng)
    else:
        stats.draft_calls += 1
        stats.drafted += len(t.tokens)
        path, nxt = tree_walk.accept_tree(t, p, rng)
        stats.accepted_per_position[len(path)] += 1
        tried = len(path) + bool(t.children[path[-1] + 1 if path else 0])  # a leaf tries nothing more
        for d in range(tried):
            stats.tried_per_depth[d] += 1
        for d in range(len(path)):
            stats.accepted_per_depth[d] += 1
    # the accepted nodes' K/V (slots pos + n_pend + node id) move to follow the prefix in order
    keep = getattr(target, "keep_path_lean", target.keep_path)
    keep(len(tokens), [pos + n_pend + j for j in path])
    tokens.extend(t.tokens[j] for j in path)
    tokens.append(nxt)
    stats.accepted += len(path)
    return len(tokens) - 1


def _tree_logits_lean(target: Target, ids: list[int], pos: int, t: trees.Tree, n_pend: int):
    """The tree pass's logits at the last pending token and every node, (1 + N, V): through the target's
    `tree_logits` (numpy in and out, the additive mask it binds) where it has one, else its forward given the
    cached mask and positions as tensors (no copy on the CPU)."""
    fused = getattr(target, "tree_logits", None)
    if fused is not None:
        positions, bias = t.attention_lean(pos, n_pend, additive=True)
        return fused(ids, pos, positions, bias)[n_pend - 1 :]
    positions, mask = t.attention_lean(pos, n_pend)
    dev = target.device
    attn = (torch.from_numpy(positions), torch.from_numpy(mask))
    if dev.type != "cpu":
        attn = (attn[0].to(dev), attn[1].to(dev))
    return target(target.ids(ids), pos, attn)[0, n_pend - 1 :]
