"""B sequences at once: the request (prompts, seeds, lengths), each sequence's own state, and the batched
target pass that the generation loop (`generate.chain_rows`, `generate.target_rows`) runs over them.

Each sequence keeps its own tokens, cache position, k (adaptive k adapts per sequence), counts and random
generator: sequence i of a batch seeded `seed` draws from `numpy.random.default_rng(seed + i)` (or the i-th of
a list of seeds) in exactly the order a B = 1 generation with that seed draws, so a sequence's output is the
one it would have had alone (tests/decoding/test_batch.py holds them to it). Positions are per row: see `model.rows`.
A sequence that reaches its length leaves the batch (`leave`): the target's and the draft's caches move the
rows still generating down to rows 0..A-1, so the next pass runs A rows, not B.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from specdec.decoding.outputs import GenerationStats
from specdec.model import rows as model_rows
from specdec.model import sampling
from specdec.model.gpt import GPT
from specdec.util.errors import InputError

BATCHED_TARGETS = "the shipped GPT (backends eager, fused, numpy, onnx)"


@dataclass
class Seq:
    """One sequence of a batch while it generates."""

    tokens: list[int]  # prompt + generated so far
    pos: int  # the cache holds tokens[:pos]
    end: int  # len(tokens) once it is done
    k: int  # drafts per round (0: target-only); adaptive k moves it
    rng: np.random.Generator
    stats: GenerationStats
    start: int = 0  # where the generated tokens begin (the prompt's length)

    @property
    def left(self) -> int:
        return self.end - len(self.tokens)


def requests(prompt: str | list[str], batch: int | None, seed: int | list[int]) -> tuple[list[str], list[int]]:
    """The batch's prompts and seeds. A list of prompts is a batch of them (batch, if given, must be its
    length); one prompt with batch=B is B sequences of it. Seed i is seed + i, or the i-th of a list."""
    if isinstance(prompt, str):
        prompts = [prompt] * (1 if batch is None else batch)
    else:
        prompts = list(prompt)
        if batch is not None and batch != len(prompts):
            raise InputError(f"batch={batch} but {len(prompts)} prompts were given; allowed: batch=None or "
                             f"batch={len(prompts)}")
    if batch is not None and batch < 1 or not prompts:
        raise InputError(f"a batch needs at least 1 sequence, got {batch if batch is not None else 0}")
    if isinstance(seed, (list, tuple)):
        if len(seed) != len(prompts):
            raise InputError(f"{len(seed)} seeds for {len(prompts)} sequences; allowed: one seed (sequence i "
                             f"gets seed + i) or {len(prompts)} seeds")
        return prompts, [int(s) for s in seed]
    return prompts, [seed + i for i in range(len(prompts))]


def target_support(target) -> str | None:
    """None when `target` runs B > 1 sequences in one pass; else the one-line reason."""
    if isinstance(target, GPT):
        return None
    why = getattr(target, "batch_unsupported", None) or f"{type(target).__name__} has no per-row forward"
    return f"unavailable: batched only for {BATCHED_TARGETS}: {why}"


def draft_support(draft) -> str | None:
    """None when `draft` proposes for B > 1 sequences (`Draft.batch_unsupported`); else the reason."""
    why = getattr(draft, "batch_unsupported", "it declares no batched proposal")
    return None if why is None else f"unavailable: draft {draft.name!r} batched only for table, prompt-lookup " \
                                    f"and shipped-model drafts: {why}"


def verify_rows(target: GPT, seqs: list[Seq], drafted: list[list[int]], temperature: float) -> list[np.ndarray]:
    """One target pass over every sequence's pending tokens and drafts; per sequence the distributions
    (kr + 1, V) float64 at its last kr + 1 positions (what the rule reads), as `rounds.verify` for one."""
    ids = [s.tokens[s.pos :] + d for s, d in zip(seqs, drafted)]
    logits = model_rows.forward_rows(target, ids, [s.pos for s in seqs])  # (A, T, V), row b valid to len(ids[b])
    return [sampling.probs(logits[b, len(i) - len(d) - 1 : len(i)], temperature)
            for b, (i, d) in enumerate(zip(ids, drafted))]


def step_rows(target: GPT, seqs: list[Seq], temperature: float) -> list[int]:
    """One target-only character for every sequence from one pass: row b's last position sampled with its own
    generator (one uniform, as `rounds.step` draws)."""
    ids = [s.tokens[s.pos :] for s in seqs]
    logits = model_rows.forward_rows(target, ids, [s.pos for s in seqs])
    return [sampling.sample(sampling.probs(logits[b, len(i) - 1], temperature), s.rng)
            for b, (s, i) in enumerate(zip(seqs, ids))]


def leave(target: GPT, draft, seqs: list[Seq]) -> list[Seq]:
    """The sequences still generating; the finished ones leave the batch (their cache rows are dropped)."""
    keep = [i for i, s in enumerate(seqs) if s.left > 0]
    if len(keep) == len(seqs) or not keep:
        return [seqs[i] for i in keep]
    model_rows.keep_rows(target, keep)
    if draft is not None:
        draft.keep_rows(keep)
    return [seqs[i] for i in keep]
