"""What the generation loops pay: the cost table's measurement (`measure_costs`) of the target's passes, each
draft's drafted character and the rounds, sampled round-robin so that drift touches every quantity alike, and
its result (`Costs`), from which c and the speedup models' terms are read.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import torch

from specdec.decoding import rounds
from specdec.measure.clock import now
from specdec.decoding.drafts import Draft
from specdec.model.gpt import GPT
from specdec.decoding import rule



from specdec.measure.timing import COST_PROMPT, round_robin
from specdec.measure.round_samplers import _steps, fill_cache, loop_sampler


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
            p = rounds.verify(target, tokens[pos:] + drafted, pos, k + 1, temperature)
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
