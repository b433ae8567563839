"""Target-only and speculative generation, both counting what they pay: target passes and draft calls.

Target-only: the prompt's prefill gives the first character's distribution and is its pass; every later
character costs one single-position pass. N characters, N passes.

Speculative: each round the draft proposes k characters and the target scores the pending tokens plus the k
drafts in one pass. The first round's pass is the prompt's prefill with the drafts appended, so even the first
generated character goes through the draft and the rule, and target passes = rounds. After the rule, the
target's position moves back to just before the emitted character (the rejected drafts' cache entries are
overwritten later, never read), and the draft is told how much of the sequence is still valid. The last round
drafts at most the characters still needed minus one, so exactly `chars` characters come out with no waste.

A batch (`prompt=[...]`, or `batch=B` copies of one prompt) runs the same loops over B sequences: one target
pass per round verifies every sequence's pending tokens and drafts at its own position, and each sequence
keeps its own accepted length, position, rollback, k and random generator (`batch`; positions: `model.rows`).
B = 1 is the loop's one-sequence case and runs each backend's single-sequence kernels, so its output is as it
always was. docs/batch.md has the API and the guarantees.

A draft that reads the target's features (`Draft.take_features`) is handed, after every verify pass, the
target's final hidden states at the positions the rule confirmed (the pending tokens and the accepted drafts;
`model.protocol.FeatureTarget`). Its first round drafts nothing: that round's pass is the prefill, which emits
the target's own first token and hands the prompt's features. Nothing else changes -- the rule, the counts, the
passes -- and a draft without `take_features` is handed nothing, its target forming no features.

Adaptive k (`adaptive=True`) is the schedule Hugging Face transformers calls "heuristic": after a round in which
every draft was accepted, k grows by 2 (up to `k_max`); after any rejection it shrinks by 1 (down to 1). Only
the number of drafts changes, never the rule, so the output is still exactly the target's.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator

import numpy as np
import torch

from specdec.decoding import batch as bt
from specdec.decoding import trees
from specdec.decoding import tree_draft
from specdec.decoding.drafts import Draft, TableDraft
from specdec.decoding.rounds import PLAIN, Hooks, accept_round, settle_round, settle_tree_round, step
from specdec.decoding.outputs import BatchGeneration, Generation, GenerationStats  # noqa: F401 (re-exported)
from specdec.model import sampling
from specdec.model.protocol import Target, feature_request, feature_support, tree_support
from specdec.util.errors import InputError


def check_request(target: Target, prompt: str, chars: int, k: int = 0, temperature: float = 1.0) -> list[int]:
    """Validate a generation request; return the prompt's ids. Raises ValueError with a one-line message."""
    if not prompt:
        raise InputError("the prompt is empty; give at least one character (e.g. '\\n')")
    ids = target.tokenize(prompt)  # characters for the shipped model, the tokenizer's tokens otherwise
    if not ids:
        raise InputError(f"the prompt {prompt!r} tokenizes to no tokens; give some text")
    if chars < 1:
        raise InputError(f"chars must be at least 1, got {chars}")
    context = target.config.context
    if len(ids) + k + 1 > context:  # one round (prompt + k drafts + bonus) must fit in the context
        raise InputError(
            f"k={k} overflows the context of {context} after a {len(ids)}-character prompt; "
            f"allowed: 1 <= k <= {context - len(ids) - 1}"
        )
    if len(ids) + chars > context:
        raise InputError(
            f"prompt ({len(ids)} chars) + chars ({chars}) = {len(ids) + chars} exceeds the context of "
            f"{context}; allowed: chars <= {context - len(ids)}"
        )
    sampling.check_temperature(temperature)
    return ids


@torch.inference_mode()
def generate(target: Target, prompt: str | list[str], chars: int, seed: int | list[int] = 0,
             temperature: float = 1.0, batch: int | None = None) -> Generation | BatchGeneration:
    """Generate `chars` characters with the target alone: one target pass per character.

    A list of prompts (or `batch=B`) is a batch: one pass per character for all of them, a `BatchGeneration`
    (a list of `Generation`, in order) back; sequence i is seeded seed + i (or seed[i])."""
    prompts, seeds = bt.requests(prompt, batch, seed)
    if len(prompts) > 1 and (why := bt.target_support(target)):
        raise InputError(why)
    seqs = [_seq(target, p, chars, 0, s, temperature, GenerationStats()) for p, s in zip(prompts, seeds)]
    target.setup_cache(len(seqs))
    passes = target_rows(target, seqs, temperature)
    return _outputs(target, seqs, prompts, passes, isinstance(prompt, str) and batch is None)


def _seq(target: Target, prompt: str, chars: int, k: int, seed: int, temperature: float,
         stats: GenerationStats) -> bt.Seq:
    tokens = check_request(target, prompt, chars, k=k, temperature=temperature)
    return bt.Seq(tokens, 0, len(tokens) + chars, k, np.random.default_rng(seed), stats, start=len(tokens))


def _outputs(target: Target, seqs: list[bt.Seq], prompts: list[str], passes: int,
             single: bool) -> Generation | BatchGeneration:
    outs = []
    for s, prompt in zip(seqs, prompts):
        new = s.tokens[s.start :]
        s.stats.chars = len(new)
        outs.append(Generation(target.detokenize(new), s.stats, prompt, tuple(new)))
    if single:
        return outs[0]
    return BatchGeneration(outs, passes, sum(s.stats.target_passes for s in seqs))


def target_loop(target: Target, tokens: list[int], pos: int, chars: int, temperature: float,
                rng: np.random.Generator, stats: GenerationStats, hooks: Hooks = PLAIN) -> None:
    """`generate`'s loop for one sequence: `chars` steps appended to `tokens` (in place), the cache holding
    tokens[:pos]."""
    target_rows(target, [bt.Seq(tokens, pos, len(tokens) + chars, 0, rng, stats)], temperature, hooks)


def target_rows(target: Target, seqs: list[bt.Seq], temperature: float, hooks: Hooks = PLAIN) -> int:
    """`generate`'s loop: one step per pass for every sequence until each has its characters; returns the
    passes. One sequence steps through `step` (the backend's fused pass-and-sample where it has one)."""
    active, passes = list(seqs), 0
    while active:
        if len(seqs) == 1:
            s = active[0]
            nxt = [step(target, s.tokens[s.pos :], s.pos, temperature, s.rng, hooks)]
        else:
            nxt = bt.step_rows(target, active, temperature)
        for s, x in zip(active, nxt):
            s.pos = len(s.tokens)
            s.tokens.append(x)
            s.stats.target_passes += 1
        passes += 1
        active = bt.leave(target, None, active)
    return passes


@torch.inference_mode()
def speculative_generate(
    target: Target,
    draft: Draft,
    prompt: str | list[str],
    chars: int,
    k: int,
    seed: int | list[int] = 0,
    temperature: float = 1.0,
    adaptive: bool = False,
    k_max: int = 16,
    tree: trees.TreeSpec | None = None,
    batch: int | None = None,
) -> Generation | BatchGeneration:
    """Generate `chars` characters by speculative decoding with `draft` proposing k per round.

    The output distribution is exactly the target's, whatever the draft (see `rule.accept_reject`).
    adaptive: start at k and follow the +2 / -1 schedule (see the module docstring), never above k_max.
    tree: draft a token tree of this shape each round instead of a chain (table drafts only; k is then
    ignored); the target verifies every node in one pass and `tree_walk.accept_tree` walks it, exactly.
    A list of prompts (or `batch=B`) is a batch: one target pass per round verifies every sequence, each with
    its own accepted length and generator (seed + i, or seed[i]); a `BatchGeneration` comes back (chains only).
    """
    prompts, seeds = bt.requests(prompt, batch, seed)
    if tree is not None:
        if adaptive:
            raise InputError("adaptive k does not apply to trees; give a tree shape or a chain")
        if not (isinstance(prompt, str) and batch is None):
            raise InputError("unavailable: batched only for chains (tree=None); trees run one sequence")
        return _tree_generate(target, draft, prompt, chars, tree, seed, temperature)
    if k < 1:
        raise InputError(f"k must be at least 1, got {k}")
    if adaptive and k_max < k:
        raise InputError(f"k_max must be at least k={k}, got {k_max}")
    if len(prompts) > 1 and (why := bt.target_support(target) or bt.draft_support(draft)):
        raise InputError(why)
    hist = (k_max if adaptive else k) + 1
    seqs = [_seq(target, p, chars, k, s, temperature, GenerationStats(k=k, adaptive=adaptive,
                                                                     accepted_per_position=[0] * hist))
            for p, s in zip(prompts, seeds)]
    if draft.cpu_only and target.device.type != "cpu":
        raise InputError(f"draft {draft.name!r} runs on the CPU only, the target is on {target.device.type}")
    target.setup_cache(len(seqs))
    draft.reset()
    if len(seqs) > 1:
        draft.reset_rows(len(seqs))
    with features_for(target, draft):
        passes = chain_rows(target, draft, seqs, temperature, k_max if adaptive else None)
    return _outputs(target, seqs, prompts, passes, isinstance(prompt, str) and batch is None)


@contextmanager
def features_for(target: Target, draft: Draft) -> Iterator[None]:
    """While a draft that reads features (`take_features`) generates, its target forms them; after, it goes
    back to what it did before. Any other draft: nothing happens. A target that cannot is refused in one line."""
    if getattr(draft, "take_features", None) is None:
        yield
        return
    if why := feature_support(target, getattr(draft, "feature_layers", None)):
        raise InputError(f"draft {draft.name!r} reads the target's features: {why}")
    before = target.want_features
    target.want_features = feature_request(draft)
    try:
        yield
    finally:
        target.want_features = before
        target.features = None  # no stale states kept alive past the generation


def chain_loop(target: Target, draft: Draft, tokens: list[int], pos: int, chars: int, k: int,
               rng: np.random.Generator, temperature: float, stats: GenerationStats, k_max: int | None = None,
               hooks: Hooks = PLAIN) -> None:
    """`speculative_generate`'s loop for one sequence: rounds until `chars` more characters are appended to
    `tokens` (in place), the cache holding tokens[:pos]. k_max: adapt k up to it (None: k stays)."""
    chain_rows(target, draft, [bt.Seq(tokens, pos, len(tokens) + chars, k, rng, stats)], temperature, k_max, hooks)


def chain_rows(target: Target, draft: Draft, seqs: list[bt.Seq], temperature: float, k_max: int | None = None,
               hooks: Hooks = PLAIN) -> int:
    """`speculative_generate`'s loop: rounds until every sequence has its characters; returns the rounds
    (batched target passes). Each round every sequence drafts min(its k, what it still needs - 1), one pass
    verifies them all, the rule settles each, and the finished ones leave. One sequence proposes and settles
    through `settle_round` (the single-sequence kernels: what the cost terms time)."""
    propose = hooks.draft(draft.propose)
    take = getattr(draft, "take_features", None)
    fresh = take is not None  # a feature draft's first round drafts nothing: its pass hands the first features
    active, passes = list(seqs), 0
    while active:
        # never draft past the end: a round emits up to kr + 1
        ks = [0 if fresh else min(s.k, s.left - 1) for s in active]
        fresh = False
        if len(seqs) == 1:
            s, kr = active[0], ks[0]
            drafted, q = propose(s.tokens, kr, s.rng, temperature) if kr > 0 else ([], None)
            s.pos, n_acc = settle_round(target, draft, s.tokens, s.pos, drafted, q, s.rng, temperature, s.stats, hooks)
            accepted = [n_acc]
        else:
            proposals = draft.propose_rows([s.tokens for s in active], ks, [s.rng for s in active], temperature)
            if take is not None:
                target.want_features = feature_request(draft)
            ps = bt.verify_rows(target, active, [d for d, _ in proposals], temperature)
            accepted = []
            for b, (s, (drafted, q), p) in enumerate(zip(active, proposals, ps)):
                start = s.pos
                s.pos, n_acc = accept_round(s.tokens, p, drafted, q, s.rng, s.stats, hooks)
                draft.rollback_row(b, s.pos)
                if take is not None:  # row b's states at its confirmed positions start..s.pos-1
                    take(target.features[b, : s.pos - start], start, b)
                accepted.append(n_acc)
        passes += 1
        for s, kr, n_acc in zip(active, ks, accepted):
            if k_max is not None and kr == s.k:  # a round cut short by the end says nothing about k
                s.k = min(s.k + 2, k_max) if n_acc == s.k else max(s.k - 1, 1)
        active = bt.leave(target, draft, active)
    return passes


# Why a feature draft drafts no trees: one line, as `tree_unsupported` and `batch_unsupported` give theirs.
TREE_FEATURES = ("unavailable: token trees for draft {name!r}: it reads the target's features, and a tree's nodes "
                 "past the first level have none (the target forms them only in the verify pass); trees take table "
                 "drafts (bigram, ngram)")


def _tree_generate(target: Target, draft: Draft, prompt: str, chars: int, spec: trees.TreeSpec, seed: int,
                   temperature: float) -> Generation:
    """Tree rounds: draft a tree, one verify pass over pending tokens + nodes, walk, move the path's K/V."""
    reason = tree_support(target)
    if reason:
        raise InputError(reason)
    if getattr(draft, "take_features", None) is not None:
        raise InputError(TREE_FEATURES.format(name=draft.name))
    if not isinstance(draft, TableDraft):
        raise InputError(f"tree drafting needs a table draft (bigram, ngram), not {draft.name!r}")
    if spec.budget < 1:
        raise InputError("the tree has no nodes")
    tokens = check_request(target, prompt, chars, temperature=temperature)
    target.setup_cache(1)
    rng = np.random.default_rng(seed)
    n_prompt, context = len(tokens), target.config.context
    depth = spec.depth
    stats = GenerationStats(k=depth, accepted_per_position=[0] * (depth + 1), tree=str(spec),
                            tried_per_depth=[0] * depth, accepted_per_depth=[0] * depth)
    pos = 0
    while (left := chars - (len(tokens) - n_prompt)) > 0:
        # never draft past the end (a round emits up to depth + 1) nor past the cache's last slot
        shape = spec.limit(context - len(tokens), left - 1)
        t = tree_draft.draft_tree(shape, draft, tokens, rng, temperature) if shape.budget else None
        pos = settle_tree_round(target, tokens, pos, t, rng, temperature, stats)
    stats.chars = chars
    return Generation(target.detokenize(tokens[n_prompt:]), stats, prompt, tuple(tokens[n_prompt:]))
