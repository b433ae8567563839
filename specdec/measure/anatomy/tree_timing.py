"""What a tree round costs: the verify pass by node count, and the refined model's terms for a tree shape.

A tree round is: draft the tree (`tree_draft.draft_tree`, one q per inner node), build its attention, one target
pass over the pending token and every node, the rule's walk (`tree_walk.accept_tree`), and moving the accepted
path's keys and values (`GPT.keep_path`). The refined model prices it exactly as a chain round -- passes ·
round + drafted nodes · node cost against chars · step (`stats.refined_speedup`) -- so its terms are: the
target-only step, drafting per node, the round without the draft, and a generation's first step and first
round (the prompt's prefill). `tree_loop_sampler` measures them now (the twin of `round_samplers.loop_sampler`), and
the report runs it in the cost table's round-robin (before the pairs: predicted_before) and after each pair
(predicted_refined).

`verify_fns` gives the tree-masked passes over N positions (one pending token and N - 1 nodes) that the cost
table times in the same round-robin as the single pass, so T(N)/T(1) is a per-sample ratio.
"""

from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from specdec.decoding import generate as decode
from specdec.decoding import rounds, tree_draft, trees
from specdec.decoding.drafts import Draft
from specdec.measure.round_samplers import Round, _first_sampler, _terms_sampler, _texts, round_sampler
from specdec.measure.timing import COST_PROMPT
from specdec.model.gpt import GPT

TREE_POSITIONS = (2, 5, 9, 17, 33, 65)  # N: the pending token and N - 1 nodes (1..64)


def _binary_tree(tokens: list[int], n: int) -> trees.Tree:
    """A drafted tree of n nodes, two children per node, breadth-first: only the count and the mask's shape
    matter to the clock (the mask is dense whatever the shape), so any shape of n nodes will do."""
    parents = [(i - 1) // 2 if i else -1 for i in range(n)]
    spec = trees.TreeSpec(tuple(parents))
    children: list[list[int]] = [[] for _ in range(n + 1)]
    for i, a in enumerate(parents):
        children[a + 1].append(i)
    return trees.Tree([tokens[i % len(tokens)] for i in range(n)], parents, list(spec.depths), children,
                      [None] * (n + 1))


def verify_fns(target: GPT, positions=TREE_POSITIONS, device: str = "cpu") -> dict[str, Callable[[], object]]:
    """name -> a tree-masked target pass over N positions at the cost prompt's last position (the target's
    cache must hold the cost prompt, as `cost_table.measure_costs` leaves it). Names: tree_verify{N}, and
    tree_verify1, the single-position pass of the same rounds: T(N)/T(1) is taken per sample."""
    tokens = target.tokenize(COST_PROMPT)
    pos = len(tokens) - 1
    dev = torch.device(device)
    one = target.ids(tokens[pos:])
    out: dict[str, Callable[[], object]] = {"tree_verify1": lambda: target(one, pos)}
    for n in positions:
        tree = _binary_tree(tokens, n - 1)
        attn = tree.attention(pos, 1, dev)
        x = target.ids(tokens[pos:] + tree.tokens)
        out[f"tree_verify{n}"] = lambda x=x, attn=attn: target(x, pos, attn)
    return out


def tree_loop_sampler(target: GPT, draft: Draft, spec: trees.TreeSpec, temperature: float = 1.0,
                      device: str = "cpu", number: int = 10, position: int | None = None,
                      prompt_chars: int | None = None) -> Callable[[], tuple[float, ...]]:
    """A call returning the refined model's five terms (`round_samplers.TERMS`, µs; the drafted character is a drafted
    node here) for one table draft and tree shape, measured now: `round_samplers.loop_sampler`'s twin.

    position: where the rounds run (attention grows with it); pass the generation's mean position.
    prompt_chars: the prompt length of a generation's first step and first round; pass the workload's mean.
    number: rounds per sample; target-only steps: 4·number per sample (as the chain sampler's).
    """
    n_steps = 4 * number
    text, position, prompt = _texts(target, position, n_steps, prompt_chars)
    context = text[: position + 1]
    shape = spec.limit(target.config.context - len(context), spec.depth)  # a round must fit the context
    rng = np.random.default_rng(1)
    round_run = round_sampler(target, tree_round(target, draft, context, shape, rng, temperature), device)
    first_shape = spec.limit(target.config.context - len(prompt), spec.depth)
    stats = _tree_stats(spec.depth)

    def first_round(tokens: list[int]) -> None:  # the whole prompt pending
        tree = tree_draft.draft_tree(first_shape, draft, tokens, rng, temperature)
        rounds.settle_tree_round(target, tokens, 0, tree, rng, temperature, stats)

    firsts = _first_sampler(target, prompt, first_round, rng, temperature, device)
    return _terms_sampler(target, text, position, n_steps, round_run, number, firsts, temperature, rng, device)


def _tree_stats(depth: int) -> decode.GenerationStats:
    return decode.GenerationStats(k=depth, accepted_per_position=[0] * (depth + 1), tried_per_depth=[0] * depth,
                                  accepted_per_depth=[0] * depth)


def tree_round(target: GPT, draft: Draft, context: list[int], spec: trees.TreeSpec, rng: np.random.Generator,
               temperature: float) -> Round:
    """A steady-state tree round at `context` (`round_samplers.chain_round`'s twin, for `round_samplers.round_sampler`): drafting
    the tree, then `rounds.settle_tree_round` (mask, verify pass over the pending token + nodes, p, the walk,
    keep_path, the bookkeeping). The draft is a table draft: no state to set back, nothing on the device; the
    slots keep_path moved are overwritten by the next round's pass, so cutting the tokens back is enough."""
    pos = len(context) - 1
    stats = _tree_stats(spec.depth)

    def propose(tokens: list[int]) -> tuple[trees.Tree, int]:
        tree = tree_draft.draft_tree(spec, draft, tokens, rng, temperature)
        return tree, len(tree.tokens)

    def rest(tokens: list[int], tree: trees.Tree) -> None:
        rounds.settle_tree_round(target, tokens, pos, tree, rng, temperature, stats)

    return Round(list(context), propose, rest, draft_on_device=False)
