"""A round's cost, sampled: the samplers behind the refined model's terms (a target-only step, a drafted character,
a round without its draft, a generation's first step and first round), a speculative round replayed without its
draft, and the cache filled as generation leaves it. `cost_table.measure_costs` and the report's tree sections take
their samples round-robin (`timing.round_robin`).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from specdec.decoding import generate as decode
from specdec.decoding import rounds
from specdec.measure.clock import measured
from specdec.decoding.drafts import Draft
from specdec.model.gpt import GPT



from specdec.measure.timing import COST_PROMPT, timed, warm_up, sync, corpus_tokens


def _steps(target, text, start, n, temperature, rng, device):
    """n consecutive target-only steps at positions start..start+n-1, the cache advancing as in `generate`
    (the target's cache must hold text[:start]); the next input is the text's, so every call is alike."""
    def run():
        for pos in range(start, start + n):
            rounds.step(target, text[pos : pos + 1], pos, temperature, rng)

    return run


# The refined model's terms, in the order a loop sampler returns them (µs): a target-only step, a drafted
# character, a round without the draft; and a generation's first step and first round (draft included), which
# run over the whole prompt (the prefill) instead of one pending token.
TERMS = ("step", "draft_char", "round", "first_step", "first_round")


def term_medians(samples) -> dict[str, float]:
    """Each of `TERMS` -> its median over samples (rows of what a loop sampler returned), µs."""
    a = np.asarray(samples, dtype=float)
    return {key: float(np.median(a[:, i])) for i, key in enumerate(TERMS)}


def loop_sampler(target: GPT, draft: Draft, k: int, temperature: float = 1.0, device: str = "cpu",
                 number: int = 10, all_accepted: float = 0.0, position: int | None = None,
                 prompt_chars: int | None = None) -> Callable[[], tuple[float, ...]]:
    """A call returning the refined model's five terms (`TERMS`, µs) for one draft and k, measured now: taken
    in the cost table before any pair, and beside each speedup pair.

    all_accepted: the fraction of rounds in which the generation accepted every draft; after those the
    draft has two tokens to catch up on (the last draft and the bonus), which the rounds here reproduce.
    position: where the rounds run (attention grows with it); pass the generation's mean position.
    prompt_chars: the prompt length of a generation's first step and first round; pass the workload's mean.
    number: rounds per sample at k >= 4; smaller k runs proportionally more rounds (4·number/k), so every
    sample drafts about as many characters and lasts long enough for a burst of load to average out.
    Target-only steps: 4·number per sample; one first step and one first round.
    """
    n_steps = 4 * number
    text, position, prompt = _texts(target, position, n_steps, prompt_chars)
    rng = np.random.default_rng(1)
    round_run = round_sampler(target, chain_round(target, draft, text[: position + 1], k, rng, temperature, all_accepted),
                              device)
    stats = _scratch_stats(k)

    def first_round(tokens: list[int]) -> None:  # a reset draft proposes k after the whole prompt
        draft.reset()
        # a draft that reads the target drafts nothing in its first round: that pass is the prefill (the loop's)
        ids, q = (([], None) if getattr(draft, "take_features", None) is not None
                  else draft.propose(tokens, k, rng, temperature))
        rounds.settle_round(target, draft, tokens, 0, ids, q, rng, temperature, stats)

    firsts = _first_sampler(target, prompt, first_round, rng, temperature, device)
    return _terms_sampler(target, text, position, n_steps, round_run, max(number, -(-4 * number // k)), firsts,
                          temperature, rng, device)


def _texts(target, position: int | None, n_steps: int, prompt_chars: int | None) -> tuple[list[int], int, list[int]]:
    """(text, position, prompt) for a loop sampler: validation text in the target's ids long enough for
    `n_steps` steps around `position` (default: the cost prompt's last) and for the prompt -- only its length
    matters to the clock -- and the first step's and round's prompt (`prompt_chars` tokens long; default: the
    text up to `position`)."""
    if position is None:
        position = len(target.tokenize(COST_PROMPT)) - 1
    text = corpus_tokens(target)[: max(position + n_steps // 2 + 1, (prompt_chars or 0) + 1)].tolist()
    return text, position, text[: prompt_chars or position + 1]


def _terms_sampler(target, text, position, n_steps, rounds, n_rounds, firsts, temperature, rng, device):
    """The call both loop samplers return: `rounds(n_rounds)` (seconds per drafted character or node, seconds
    per round without the draft), `firsts(1)` (a first step, a first round), then `n_steps` target-only steps
    around `position` once the target has settled: the five `TERMS`, µs."""
    start = max(0, position - n_steps // 2)  # the steps' mean position is the rounds' one
    steps = _steps(target, text, start, n_steps, temperature, rng, device)
    settle = _steps(target, text, start, min(10, n_steps), temperature, rng, device)

    def sample() -> tuple[float, ...]:
        char_s, round_s = rounds(n_rounds)  # primes both caches with the context first
        first_step_s, first_round_s = firsts(1)
        if not isinstance(target, GPT):  # a cache that has a length (an HF DynamicCache) holds the prompt only
            fill_cache(target, text[:start])  # now; the shipped GPT's holds this same text already, in place
        # Right after the draft's rounds a target step runs up to ~1.5x slower and settles over ~10 calls
        # (measured); target-only generation runs its steps back to back, so time them once settled.
        settle()
        return (timed(steps, device) / n_steps * 1e6, char_s * 1e6, round_s * 1e6, first_step_s * 1e6,
                first_round_s * 1e6)

    return torch.inference_mode()(sample)


def _scratch_stats(k: int) -> decode.GenerationStats:
    return decode.GenerationStats(k=k, accepted_per_position=[0] * (k + 1))


def _nothing(*_) -> None:
    pass


@dataclass(frozen=True)
class Round:
    """One steady-state speculative round at a fixed context, in the parts where a chain round (`chain_round`)
    and a tree round (`tree_timing.tree_round`) differ; `round_sampler` is the frame both are timed in.

    draft(tokens) -> (the proposal, characters or nodes drafted) and rest(tokens, proposal) -- the verify pass,
    the rule, the bookkeeping -- are timed. prime(), at the start of each sample once the target's cache holds
    the context, and before(i), before round i of the sample (from 0), are not: they set the draft's own state.
    """

    context: list[int]  # the tokens before the round, the last one pending (as after a rejection)
    draft: Callable[[list[int]], tuple[object, int]]
    rest: Callable[[list[int], object], None]
    prime: Callable[[], None] = _nothing
    before: Callable[[int], None] = _nothing
    # A draft that may run on the device is synchronised before its clock stops; a table draft is numpy only,
    # with nothing on the device to wait for.
    draft_on_device: bool = True


def round_sampler(target: GPT, round_: Round, device: str = "cpu") -> Callable[[int], tuple[float, float]]:
    """Steady-state rounds as generation runs them, timed in two parts: drafting, and the rest of the round, on a
    scratch copy of the context that is cut back to it before every round.

    Timing both inside one loop makes each pay the cache misses the other's weights cause, as they do in
    generation -- timed alone, a transformer draft looks several percent cheaper than it is. Untimed rounds
    go first (see `WARM_ROUNDS`): a generation's rounds run back to back, long settled.
    Returns run(number) -> (seconds per drafted character or node, seconds per round without the draft).
    """
    context = round_.context
    tokens = list(context)

    def run(number: int) -> tuple[float, float]:
        fill_cache(target, context)  # a generation may have run in between
        round_.prime()
        count = itertools.count()

        def one_round() -> tuple[float, float, int]:  # (seconds drafting, seconds for the rest, units drafted)
            round_.before(next(count))
            del tokens[len(context) :]  # the scratch sequence is the context again
            sync(device)
            t0 = measured()
            proposal, units = round_.draft(tokens)
            if round_.draft_on_device:
                sync(device)
            t1 = measured()
            round_.rest(tokens, proposal)
            sync(device)
            return t1 - t0, measured() - t1, units

        warm_up(one_round, WARM_SECONDS, device, min_calls=WARM_ROUNDS)
        d, r, units = np.sum([one_round() for _ in range(number)], axis=0)
        return float(d) / max(units, 1), float(r) / number

    return run


def chain_round(target: GPT, draft: Draft, context: list[int], k: int, rng: np.random.Generator,
                temperature: float, all_accepted: float = 0.0) -> Round:
    """A chain round as `speculative_generate` runs it: the draft's `propose` of k, then `rounds.settle_round`
    (the verify pass over k+1 positions, the rule, the bookkeeping).

    The draft holds the context and steps back one token before each round, so every round feeds it exactly
    one pending token, as after a rejection -- two in an `all_accepted` share of the rounds, spread evenly:
    after a fully accepted round it has the last draft and the bonus to feed.
    """
    pos = len(context) - 1
    stats = _scratch_stats(k)
    reads = getattr(draft, "take_features", None) is not None  # a draft that reads the target's states
    held: dict = {}

    def prime() -> None:
        draft.reset()
        if reads:  # the states a prefill of the context hands it, kept to hand again before every round
            with decode.features_for(target, draft):
                target(target.ids(context[:-1]), 0)
                held["states"] = target.features[0].clone()
            draft.take_features(held["states"], 0)
        draft.propose(context, 1, rng, temperature)

    def before(i: int) -> None:
        two = int((i + 1) * all_accepted) > int(i * all_accepted)
        draft.rollback(pos - 1 if two else pos)
        if reads:  # untimed: the round's own hand-off (in settle_round, after its verify pass) is timed
            draft.take_features(held["states"], 0)

    def propose(tokens: list[int]) -> tuple[object, int]:
        return draft.propose(tokens, k, rng, temperature), k

    def rest(tokens: list[int], proposal) -> None:
        rounds.settle_round(target, draft, tokens, pos, *proposal, rng, temperature, stats)

    return Round(list(context), propose, rest, prime, before)


# Untimed rounds before a sampler's timed ones (`warm_up`): at least WARM_ROUNDS, and WARM_SECONDS. After other work
# (another draft's rounds, a prefill, target-only steps) a round runs slow and settles over several rounds
# (the first three of a round robin's rounds are the slowest). Sized by time as well, so a fast round gets more
# of them.
WARM_ROUNDS = 4
WARM_SECONDS = 0.004
# The widest pass a cost sampler runs to put its context in the cache. After one pass over the whole context
# the next narrow passes take several passes to settle; after passes of 32 positions -- about a generation's
# first pass over its prompt -- they settle sooner, and the warm-up rounds absorb the rest.
FILL_WIDTH = 32


def fill_cache(target: GPT, tokens: list[int]) -> None:
    """The target's cache holds `tokens` after this: passes of at most `FILL_WIDTH` positions from 0."""
    for start in range(0, len(tokens), FILL_WIDTH):
        target(target.ids(tokens[start : start + FILL_WIDTH]), start)


def _first_sampler(target, prompt, first_round, rng, temperature, device):
    """A generation's first target-only step and first speculative round, as `generate` and
    `speculative_generate` begin: the cache set up, the whole prompt in one pass. first_round(tokens) runs the
    round (draft included) on a scratch copy of the prompt, which is cut back after each call.
    Returns run(number) -> (seconds per first step, seconds per first round)."""
    tokens = list(prompt)

    def run(number: int) -> tuple[float, float]:
        s = r = 0.0
        for _ in range(number):
            sync(device)
            t0 = measured()
            target.setup_cache(1)
            rounds.step(target, prompt, 0, temperature, rng)
            sync(device)
            t1 = measured()
            target.setup_cache(1)
            first_round(tokens)
            sync(device)
            t2 = measured()
            del tokens[len(prompt) :]
            s += t1 - t0
            r += t2 - t1
        return s / number, r / number

    return run
