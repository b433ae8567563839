"""Where generation's time goes: a target-only step and a speculative round, split into categories.

`attribution` runs generation's own loops (`decode.target_loop`, `decode.chain_loop`) with hooks
(`rounds.Hooks`) that put the sampling code, the rule and the draft under `profiler_split.label`, and splits
their time with `profiler_split.attribute`; generation itself runs without the hooks and pays nothing for them.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import torch

from specdec.model import sampling
from specdec.decoding import generate as decode
from specdec.decoding import rounds
from specdec.decoding import rule
from specdec.decoding.drafts import Draft
from specdec.measure.anatomy import ort_profile
from specdec.measure import timing
from specdec.measure.anatomy.profiler_split import SESSION, attribute, label, profiler_cost_us
from specdec.model.gpt import GPT

SCOPES = ("step", "round")  # `attribution`'s scopes, in the order the tables and the figure show them


def attribution(target: GPT, draft: Draft, k: int, chars: int = 40, seed: int = 0, repeats: int = 9) -> dict:
    """Where a target-only step and a speculative round spend their time: {"step": ..., "round": ...}.

    Each scope is `attribute` of a block generating `chars` characters after timing.COST_PROMPT (mid-context,
    as the cost measurements run) by generation's own loops -- `decode.target_loop` and `decode.chain_loop`
    -- the prompt's prefill done before the clock starts; µs are per step (one character) and per round.
    Every block starts from the same state and seed, so profiled and unprofiled blocks run the same rounds.
    The labels go in through generation's hooks (`_hooks`), so generation itself, which runs `rounds.PLAIN`,
    pays nothing for them.
    """
    prompt = decode.check_request(target, timing.COST_PROMPT, chars, k=k)
    per_event = profiler_cost_us()
    inside = functools.partial(ort_profile.kernel_profile, target)  # onnx: ONNX Runtime's profiler splits its runs
    return {"step": attribute(_steps(target, prompt, chars, seed), repeats, per_event, inside),
            "round": attribute(_rounds(target, draft, prompt, chars, k, seed), repeats, per_event, inside)}


def _prefill(target: GPT, prompt: list[int]) -> int:
    """The cache holds the prompt but its last character, which every loop below feeds first."""
    target.setup_cache(1)
    target(target.ids(prompt[:-1]), 0)
    return len(prompt) - 1


def _steps(target: GPT, prompt: list[int], chars: int, seed: int) -> Callable[[object], int]:
    @torch.inference_mode()
    def run(mode) -> int:
        tokens, pos = list(prompt), _prefill(target, prompt)
        stats = decode.GenerationStats()
        hooks = _hooks(mode, sample="logits to sample")
        decode.target_loop(_session(target, mode), tokens, pos, chars, 1.0, np.random.default_rng(seed), stats, hooks)
        return chars

    return run


def _rounds(target: GPT, draft: Draft, prompt: list[int], chars: int, k: int, seed: int) -> Callable[[object], int]:
    @torch.inference_mode()
    def run(mode) -> int:
        tokens, pos = list(prompt), _prefill(target, prompt)
        draft.reset()
        draft.propose(tokens[:-1], 1, np.random.default_rng(seed), 1.0)  # the draft holds the prompt too
        draft.rollback(pos)
        stats = decode.GenerationStats(k=k, accepted_per_position=[0] * (k + 1))
        # in a round, `sampling.sample` runs only when nothing was drafted: it emits what the rule would have
        hooks = _hooks(mode, sample="the rule")
        decode.chain_loop(_session(target, mode), draft, tokens, pos, chars, k, np.random.default_rng(seed), 1.0,
                          stats, hooks=hooks)
        return stats.target_passes  # a pass a round

    return run


def _hooks(mode, sample: str) -> rounds.Hooks:
    """Generation's hooks with its calls into `sampling` and `rule` under labels -- `probs` "logits to sample",
    `sample` under `sample`, `accept_reject` "the rule" -- and the draft's propose under "draft". Mode False:
    `rounds.PLAIN`, exactly what generation runs."""
    if not mode:
        return rounds.PLAIN
    return rounds.Hooks(sampling=_Labels(sampling, mode, probs="logits to sample", sample=sample),
                        rule=_Labels(rule, mode, accept_reject="the rule"),
                        draft=lambda propose: _labelled_call(propose, mode, "draft"))


def _session(target: GPT, mode):
    """The target, its fused session calls (onnx: `sample_step`, `pass_probs`) run as SESSION spans."""
    fused = [name for name in ("sample_step", "pass_probs") if getattr(target, name, None) is not None]
    return _Labels(target, mode, **dict.fromkeys(fused, SESSION)) if mode and fused else target


class _Labels:
    """`inner` as its callers see it, the functions named in `labels` (those it has) run under their label."""

    def __init__(self, inner, mode, **labels: str):
        self._inner = inner
        for name, what in labels.items():
            fn = getattr(inner, name, None)
            if fn is not None:
                setattr(self, name, _labelled_call(fn, mode, what))

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def __call__(self, *args, **kwargs):
        return self._inner(*args, **kwargs)


def _labelled_call(fn: Callable, mode, what: str) -> Callable:
    def call(*args, **kwargs):
        with label(mode, what):
            return fn(*args, **kwargs)

    return call
