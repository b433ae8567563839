"""Timers, round-robin samples, and the cost measurements the speedup models need.

Shared machines drift by tens of percent between runs, so nothing here reports a lone absolute time as a
result: costs are medians of samples taken round-robin across every quantity, so that drift touches all of
them alike and their per-sample ratios (c, T(k+1)/T(1)) stay sound. (Speedups come from alternated runs, in
`schedule`.) Warm-up calls are discarded, and sized by time. The garbage collector is off inside every timed
region. The thread count is set explicitly by the caller (`hygiene.set_threads`) and recorded beside every
result. On CUDA every timer synchronises the device.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from specdec.model import corpus
from specdec.decoding import generate as decode
from specdec.measure import hygiene
from specdec.measure.clock import measured, now
from specdec.decoding.drafts import Draft, corpus_ids
from specdec.model.gpt import GPT
from specdec.decoding import rule

# The text cost samples run at: the A/B worker's, which cannot import the package (it is the method, run as a script
# at every revision), so the package reads it from there and the two can never disagree.
from specdec.measure.ab_rows import COST_TEXT as COST_PROMPT


def corpus_tokens(target, split: str = "val") -> np.ndarray:
    """The shipped corpus's `split` in the target's ids: the text every cost sampler and the overhead table run
    over (the corpus's own character ids for the shipped model, the tokenizer's tokens otherwise)."""
    ids = corpus_ids(target, split)
    return corpus.split_ids(split) if ids is None else ids


def sync(device: str | torch.device) -> None:
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()


def timed(fn: Callable[[], object], device: str = "cpu", number: int = 1,
          clock: Callable[[], float] = measured) -> float:
    """Seconds per call of fn over `number` back-to-back calls (device synchronised at both ends), on the
    measurement clock; `clock=clock.now` where the time is a decision's input (the sizing probe)."""
    with hygiene.no_gc():
        sync(device)
        t0 = clock()
        for _ in range(number):
            fn()
        sync(device)
        return (clock() - t0) / number


def warm_up(fn: Callable[[], object], seconds: float = 0.05, device: str = "cpu", min_calls: int = 1) -> int:
    """Call fn until `seconds` have passed (at least `min_calls` times): warm-up sized by time, not by count,
    so a slow machine warms as long as a fast one (by the decision clock: a fake one in a test, so the calls
    made never depend on the machine). Returns the number of calls made."""
    end = now() + seconds
    n = 0
    while n < min_calls or now() < end:
        fn()
        n += 1
    sync(device)
    return n


def round_robin(
    fns: dict[str, Callable[[], object]],
    samples: int,
    number: int,
    device: str = "cpu",
    samplers: dict[str, Callable[[], object]] | None = None,
    rotate: bool = False,
    deadline: float | None = None,
    min_samples: int = 1,
) -> dict[str, np.ndarray]:
    """Seconds per call of each fn, `samples` samples each, taken in turn (after one discarded warm-up round).

    Sample i of every fn comes from the same moment, so per-sample ratios of two fns cancel drift.
    `samplers` take their turns in the same rounds but measure themselves: what each returns is kept as is.
    rotate: start round i at the i-th turn (A B C, B C A, C A B, ...) so no fn always follows the same one.
    deadline (a `clock.now()` value): stop after `min_samples` once another round would end past it, so
    a slow or loaded machine takes fewer samples instead of more time.
    """
    turns = {name: (lambda fn=fn: timed(fn, device, number)) for name, fn in fns.items()}
    turns.update({name: (lambda s=s: _quiet(s)) for name, s in (samplers or {}).items()})
    kept: dict[str, list] = {name: [] for name in turns}
    names = list(turns)
    last = 0.0
    for i in range(samples + 1):
        if deadline is not None and i > min_samples and now() + last > deadline:
            break
        t0 = now()
        shift = i % len(names) if rotate else 0
        for name in names[shift:] + names[:shift]:
            value = turns[name]()
            if i:
                kept[name].append(value)
        last = now() - t0
    return {name: np.asarray(values) for name, values in kept.items()}


def _quiet(sampler: Callable[[], object]) -> object:
    with hygiene.no_gc():
        return sampler()


@dataclass
class Costs:
    """What the generation loops pay, in microseconds (medians of round-robin samples, and the samples)."""

    target_pass_us: float  # one single-position target forward
    verify_pass_us: dict[int, float]  # positions -> one forward over that many new positions
    step_us: float  # one character of target-only generation: single pass + p + sampling
    round_us: dict[int, float]  # k -> one speculative round without any draft: (k+1) pass + p + rule
    loop_char_us: dict[str, dict[int, float]]  # draft -> k -> one drafted character inside a round
    loop_round_us: dict[str, dict[int, float]]  # draft -> k -> the rest of that round (pass + p + rule)
    loop_samples: dict[tuple[str, int], np.ndarray]  # (draft, k) -> (samples, 3): step, drafted char, round µs
    draft_char_us: dict[str, float]  # draft -> one drafted character at k = draft_k (what c is made of)
    c_samples: dict[str, list[float]]  # draft -> per-sample c (each sample's ratio cancels drift)
    verify_ratio_samples: dict[int, list[float]]  # positions -> per-sample T(positions) / T(1)
    char_range: dict[str, tuple[float, float]]  # draft -> min, max of the per-character samples (µs)
    target_range: tuple[float, float]  # min, max of the single-pass samples (µs)
    samples: int  # round-robin samples taken (fewer than asked when the time ran out)
    draft_k: int
    threads: int
    device: str
    # name -> per-sample values of the caller's extra quantities: µs per call for `extra_fns`, the returned
    # tuples for `extra_samplers` (the report's tree verify passes and tree-round terms)
    extra_samples: dict[str, np.ndarray] = field(default_factory=dict)

    def c(self, draft: str) -> float:
        """Median of the per-sample c."""
        return float(np.median(self.c_samples[draft]))

    def c_range(self, draft: str) -> tuple[float, float]:
        return float(np.min(self.c_samples[draft])), float(np.max(self.c_samples[draft]))


def _steps(target, text, start, n, temperature, rng, device):
    """n consecutive target-only steps at positions start..start+n-1, the cache advancing as in `generate`
    (the target's cache must hold text[:start]); the next input is the text's, so every call is alike."""
    def run():
        for pos in range(start, start + n):
            decode.step(target, text[pos : pos + 1], pos, temperature, rng)

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
    rounds = round_sampler(target, chain_round(target, draft, text[: position + 1], k, rng, temperature, all_accepted),
                           device)
    stats = _scratch_stats(k)

    def first_round(tokens: list[int]) -> None:  # a reset draft proposes k after the whole prompt
        draft.reset()
        # a draft that reads the target drafts nothing in its first round: that pass is the prefill (the loop's)
        ids, q = (([], None) if getattr(draft, "take_features", None) is not None
                  else draft.propose(tokens, k, rng, temperature))
        decode.settle_round(target, draft, tokens, 0, ids, q, rng, temperature, stats)

    firsts = _first_sampler(target, prompt, first_round, rng, temperature, device)
    return _terms_sampler(target, text, position, n_steps, rounds, max(number, -(-4 * number // k)), firsts,
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
    """A chain round as `speculative_generate` runs it: the draft's `propose` of k, then `decode.settle_round`
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
        decode.settle_round(target, draft, tokens, pos, *proposal, rng, temperature, stats)

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
            decode.step(target, prompt, 0, temperature, rng)
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
    samplers: dict[tuple[str, int], Callable[[], tuple[float, float, float]]] | None = None,
    term_calls: int = 10,
    seconds: float | None = None,
    min_samples: int = 3,
    extra_fns: dict[str, Callable[[], object]] | None = None,
    extra_samplers: dict[str, Callable[[], object]] | None = None,
) -> Costs:
    """Time each piece the loops pay, every quantity sampled in turn, `samples` times (fewer when `seconds`
    run out, never fewer than `min_samples`).

    Single and multi-position passes alone and a target-only step, at a mid-context position (the cost
    prompt, ~80 characters in), `number` calls a sample; a speculative round without a draft; and for each
    draft and k the three terms of the refined model, from `samplers[(draft, k)]` (see `loop_sampler`; built
    with `term_calls` rounds at the cost prompt's position where not given). c is the drafted character at
    k = draft_k over the single pass of the same sample. extra_fns and extra_samplers join the same rounds
    (timed calls and self-measuring samplers; names must not clash with the built-in ones); their samples come
    back in `Costs.extra_samples`.
    """
    tokens = target.tokenize(COST_PROMPT)
    target.setup_cache(1)
    target(target.ids(tokens), 0)  # fill the cache up to the cost prompt's last position
    ks = sorted(set(ks))
    fns = {**_pass_fns(target, tokens, ks, temperature, device), **(extra_fns or {})}
    sim_ks = sorted(set(ks) | {draft_k})
    given = samplers or {}
    loops = {f"loop:{name}:{k}": given.get((name, k)) or loop_sampler(target, draft, k, temperature, device,
                                                                        term_calls)
             for name, draft in drafts.items() for k in sim_ks}
    loops.update(extra_samplers or {})
    if not isinstance(target, GPT):  # a cache with a length: each sampler leaves it at its own position, and
        loops = {n: _then(s, lambda: fill_cache(target, tokens)) for n, s in loops.items()}  # the passes need it
    deadline = None if seconds is None else now() + seconds
    raw = round_robin(fns, samples, number, device, samplers=loops, deadline=deadline, min_samples=min_samples)
    terms = {(n, k): np.asarray(raw.pop(f"loop:{n}:{k}"), dtype=float) for n in drafts for k in sim_ks}
    extra = {n: np.asarray(raw.pop(n), dtype=float) for n in (extra_samplers or {})}
    extra.update({n: raw.pop(n) * 1e6 for n in (extra_fns or {})})
    return _costs({n: t * 1e6 for n, t in raw.items()}, terms, list(drafts), ks, sim_ks, draft_k,
                  threads_used or torch.get_num_threads(), str(device), extra)


def _then(sampler: Callable[[], object], after: Callable[[], None]) -> Callable[[], object]:
    """sampler's call, then `after` (outside what the sampler measures of itself)."""
    def call():
        value = sampler()
        after()
        return value

    return call


def _pass_fns(target: GPT, tokens: list[int], ks: list[int], temperature: float,
              device: str) -> dict[str, Callable[[], object]]:
    """The cost table's own timed calls at the last position of `tokens` (the target's cache holding them): the
    single pass ("target"), a target-only step ("step"), and per k the (k+1)-position pass ("verify{k+1}") and
    a round without a draft ("round{k}": that pass, p, the rule against a uniform q)."""
    pos = len(tokens) - 1
    rng = np.random.default_rng(0)
    one = target.ids(tokens[-1:])
    fns: dict[str, Callable[[], object]] = {"target": lambda: target(one, pos)}
    fns["step"] = _steps(target, tokens, pos, 1, temperature, rng, device)  # one step at the last position
    q_uniform = np.full((max(ks), target.config.vocab_size), 1.0 / target.config.vocab_size)
    for k in ks:
        x = target.ids(tokens[-1:] + tokens[:k])
        fns[f"verify{k + 1}"] = lambda x=x: target(x, pos)

        def round_(k=k):
            drafted = tokens[:k]
            p = decode.verify(target, tokens[pos:] + drafted, pos, k + 1, temperature)
            return rule.accept_reject(p, q_uniform[:k], drafted, rng)

        fns[f"round{k}"] = round_
    return fns


def _costs(us: dict[str, np.ndarray], terms: dict[tuple[str, int], np.ndarray], drafts: list[str], ks: list[int],
           sim_ks: list[int], draft_k: int, threads: int, device: str, extra: dict[str, np.ndarray]) -> Costs:
    """The Costs of the round-robin's samples: `us` the timed calls' (µs), `terms` each (draft, k)'s loop-sampler
    rows, `extra` the caller's quantities."""
    med = {n: float(np.median(t)) for n, t in us.items()}
    target_samples = us["target"]
    char = {n: terms[n, draft_k][:, 1] for n in drafts}
    return Costs(
        target_pass_us=med["target"],
        verify_pass_us={k + 1: med[f"verify{k + 1}"] for k in ks},
        step_us=med["step"],
        round_us={k: med[f"round{k}"] for k in ks},
        loop_char_us={n: {k: float(np.median(terms[n, k][:, 1])) for k in sim_ks} for n in drafts},
        loop_round_us={n: {k: float(np.median(terms[n, k][:, 2])) for k in sim_ks} for n in drafts},
        loop_samples=terms,
        draft_char_us={n: float(np.median(char[n])) for n in drafts},
        c_samples={n: (char[n] / target_samples).tolist() for n in drafts},
        verify_ratio_samples={k + 1: (us[f"verify{k + 1}"] / target_samples).tolist() for k in ks},
        char_range={n: (float(char[n].min()), float(char[n].max())) for n in drafts},
        target_range=(float(target_samples.min()), float(target_samples.max())),
        samples=len(target_samples),
        draft_k=draft_k,
        threads=threads,
        device=device,
        extra_samples=extra,
    )
