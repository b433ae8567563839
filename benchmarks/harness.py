"""The asv suite's own measuring method, fixed across commits while the code under test varies.

This suite imports no internal of the package under test (`measure.timing`, `measure.stats`, ...), because asv
runs today's benchmarks against every commit's package: a method living in that package would change from commit
to commit, and move the figures with no change in performance. The method's own files come from the running
checkout instead, loaded by path (`method`): the side-by-side timing (`specdec/measure/turns.py`, the turns the
report's timers and a user's suite take too) and the counting method (`work/work.py`, `work/work_pool.py`).

The method, in four rules:
  * Two things compared are measured side by side, never in separate runs: generations in alternated pairs
    (A B, then B A, ...) after a warm-up; costs in round-robin samples in which every call of the round takes
    its turn (the order rotating by one each time), so sample i of each covers the same stretch of time.
  * A figure is the median of per-sample (per-pair) ratios: drift and a faster or slower machine cancel in
    each ratio, and the median ignores the few samples a burst of outside load lands on. Within a cost
    sample each call's fastest turn counts (the least disturbed by other processes on a shared machine).
  * The garbage collector is off inside timed regions (it runs between samples) and torch's threads are set
    by the caller (`common.fix_threads`). The clock is `common.CLOCK`: the thread's CPU time with one torch
    thread (the default), the wall clock with more.
  * Nothing is tracked as a lone absolute time. asv compares runs made minutes apart in separate processes, and
    on a shared host the same pass can take 1.5-2x longer from one such run to the next (the no-op case of
    `python tools/regression_demo.py` shows it): a time is tracked relative to the suite's reference kernel (`reference`),
    which takes its turn in the same round-robin, so that load which slows both cancels in each sample. And
    every figure goes to asv with its samples (`sampled`): asv then merges them over rounds, reports the median
    with its spread, and flags a change only beyond `--factor` *and* significant by its Mann-Whitney test --
    a single value per round would be judged by the factor alone, and only the last round's kept.
"""

from __future__ import annotations

import functools
from typing import Callable

import numpy as np
import torch

from . import common


# ---- the method's files, from the running checkout --------------------------------------------------------


def method(filename: str):
    """A file of the running checkout's method (specdec/measure/FILENAME), loaded by path through the method's
    one loader (specdec/measure/method.py, itself run by path), never the commit's package: the method stays
    fixed while the code under test varies, and `work_pool` and `ab_worker` get the same module objects.
    These files import only the standard library at import: cheap, and nothing of specdec."""
    return _loader()(filename)


def _turns():
    """The method's way of timing things side by side (specdec/measure/turns.py, loaded by path)."""
    return method("turns.py")


@functools.cache
def _loader():
    import runpy
    from pathlib import Path

    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "specdec" / "measure" / "method.py"))["load"]


def _worker_constant(name: str):
    """A constant of `specdec ab`'s rows (the running checkout's ab_rows.py, `method`), so that both
    methods batch alike."""
    return getattr(method("ab_rows.py"), name)


# ---- timing side by side --------------------------------------------------------------------------------------


def _timed(fn: Callable[[], object]) -> float:
    return _turns().timed(fn, common.CLOCK)


def pair(fn_a: Callable[[], object], fn_b: Callable[[], object], b_first: bool = False) -> float:
    """One pair's time ratio B / A, back to back on the suite's clock (`turns.pair`); alternate `b_first` from
    pair to pair (A B, then B A, ...)."""
    return _turns().pair(fn_a, fn_b, _timed, b_first)


def round_robin(calls: dict[str, Callable[[], object]], samples: int, number: int,
                warmup: int = 1) -> dict[str, np.ndarray]:
    """Seconds of each named call: `samples` samples each, after `warmup` discarded samples, from
    `turns.round_robin`: a sample is `number` rotating rounds in which every call takes one turn, timed alone,
    with the collector held off; a sample's value is the call's fastest turn. Sample i of every call spans the
    same moments."""
    turns = {name: (lambda fn=fn: _timed(fn)) for name, fn in calls.items()}
    kept = _turns().round_robin(turns, samples, number, warmup, paused=True)
    return {name: np.asarray(v, dtype=float) for name, v in kept.items()}


def sampled(values) -> dict:
    """A tracked figure as its samples, the form asv's runner reads as a sampled result (`turns.sampled`)."""
    return _turns().sampled(values)


REFERENCE = "reference"  # the reference kernel's name in a round-robin


@functools.lru_cache(maxsize=None)
def reference() -> Callable[[], object]:
    """The suite's reference kernel: a fixed computation shaped like one decoding step of a small transformer
    (4 layers, width 128, 84 cached keys, 65 outputs), half in torch ops and half in numpy, with seeded random
    weights. It is part of the method, not of the package: no commit changes it, so a time relative to it moves
    only when the code under test does (or when load slows one more than the other).
    """
    g = torch.Generator().manual_seed(0)
    width, hidden, keys, vocab = 128, 512, 84, 65
    shapes = [(width, 3 * width), (width, width), (width, hidden), (hidden, width)]
    layers = [[torch.randn(*s, generator=g) / s[0] ** 0.5 for s in shapes] for _ in range(4)]
    cached_k, cached_v = torch.randn(keys, width, generator=g), torch.randn(keys, width, generator=g)
    head = torch.randn(width, vocab, generator=g) / width ** 0.5
    x0 = torch.randn(1, width, generator=g)
    np_layers = [[w.numpy().copy() for w in layer] for layer in layers]
    np_k, np_v, np_head, np_x0 = cached_k.numpy().copy(), cached_v.numpy().copy(), head.numpy().copy(), x0.numpy().copy()
    scale = width ** -0.5

    def _np_norm(x):
        x = x - x.mean(-1, keepdims=True)
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-5)

    def _np_softmax(x):
        e = np.exp(x - x.max(-1, keepdims=True))
        return e / e.sum(-1, keepdims=True)

    def call():
        with torch.inference_mode():
            x = x0
            for wqkv, wo, w1, w2 in layers[:2]:
                q, _, _ = (torch.nn.functional.layer_norm(x, (width,)) @ wqkv).split(width, -1)
                x = x + (torch.softmax(q @ cached_k.T * scale, -1) @ cached_v) @ wo
                x = x + torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (width,)) @ w1) @ w2
            torch.softmax(x @ head, -1)
        y = np_x0
        for wqkv, wo, w1, w2 in np_layers[2:]:
            q = (_np_norm(y) @ wqkv)[:, :width]
            y = y + (_np_softmax(q @ np_k.T * scale) @ np_v) @ wo
            u = _np_norm(y) @ w1
            y = y + (u * (1.0 / (1.0 + np.exp(-1.702 * u)))) @ w2
        return _np_softmax(y @ np_head)

    return call


def relative(calls: dict[str, Callable[[], object]], samples: int, number: int) -> dict[str, np.ndarray]:
    """Each call's time in reference-kernel times, per sample: one round-robin of the calls and `reference()`,
    each sample's time of a call divided by the reference's in the same sample."""
    timed = round_robin({**calls, REFERENCE: reference()}, samples, number)
    ref = timed.pop(REFERENCE)
    return {name: t / ref for name, t in timed.items()}


def costs(samples: int | None = None, number: int | None = None) -> dict:
    """Per backend this commit can run (`common.available_backends`): c per draft, T(n)/T(1) per verify width,
    and the pass and drafted-character times in reference-kernel times, from one round-robin per backend over
    its target, every draft made from it and the reference kernel.

    The target's calls are single passes and n-position verify passes at the cost context's last position
    (its cache filled with the context first). A draft's call is what a round pays for its proposal: the
    draft steps back one token and proposes DRAFT_K characters. Per sample: c = (draft call / DRAFT_K) / single
    pass, T(n)/T(1), pass / reference and (draft call / DRAFT_K) / reference -- every ratio within one sample.
    Each figure is its list of per-sample values (asv gets them through `sampled`); plain dicts and lists
    because asv pickles setup_cache's value.
    """
    return {backend: _costs(backend, samples, number) for backend in common.available_backends()}


def _costs(backend: str, samples: int | None, number: int | None) -> dict:
    samples = samples or common.scaled(15, 2)
    number = number or (1 if common.SMOKE else 8)
    common.fix_threads()
    model = common.target(backend)
    ctx = list(common.cost_context())
    pos = len(ctx) - 1
    inputs = {n: torch.tensor([ctx[-1:] + ctx[: n - 1]]) for n in [1] + common.POSITIONS}
    with torch.inference_mode():
        model(torch.tensor([ctx]), 0)
        calls = {f"pass{n}": (lambda x=x: model(x, pos)) for n, x in inputs.items()}
        for name in common.available(common.DRAFTS, backend):
            d = common.draft(name, backend)
            calls[f"draft:{name}"] = _proposal(d, ctx, pos, _prefill_states(model, d, ctx))
        rel = relative(calls, samples, number)
    single = rel["pass1"]
    drafts = [key.split(":", 1)[1] for key in calls if key.startswith("draft:")]
    per_char = {name: rel[f"draft:{name}"] / common.DRAFT_K for name in drafts}
    return {
        "c": {name: (per_char[name] / single).tolist() for name in drafts},
        "verify_over_single": {n: (rel[f"pass{n}"] / single).tolist() for n in common.POSITIONS},
        "pass_time": {n: rel[f"pass{n}"].tolist() for n in [1] + common.POSITIONS},
        "draft_char_time": {name: per_char[name].tolist() for name in drafts},
    }


def _prefill_states(model, draft, ctx: list[int]):
    """For a draft that reads the target: the states a prefill of the context forms, as the loop hands them
    (None for any other draft): `specdec ab`'s own hand-off (the running checkout's ab_rows.py, `method`)."""
    return method("ab_rows.py").prefill_states(model, draft, ctx)


def _proposal(draft, ctx: list[int], pos: int, states=None) -> Callable[[], object]:
    """A draft's proposal as a round pays for it: step back to `pos`, feed the pending token, draft DRAFT_K. A
    draft that reads the target is handed the prefill's `states` first (its round's hand-off is the round's)."""
    rng = np.random.default_rng(0)
    draft.reset()
    if states is not None:
        draft.take_features(states, 0)
    draft.propose(ctx, 1, rng, common.TEMPERATURE)  # the draft's own cache (if any) now holds the context

    def call():
        draft.rollback(pos)
        draft.propose(ctx, common.DRAFT_K, rng, common.TEMPERATURE)

    return call


def generation_times(samples: int | None = None) -> dict:
    """Per backend this commit can run: target-only generation of the benchmark's characters in reference-kernel
    times, per sample (one round-robin of every backend's generation and the reference kernel, one turn each)."""
    samples = samples or common.scaled(5, 1)
    common.fix_threads()
    calls = {}
    for backend in common.available_backends():
        calls[backend] = lambda backend=backend: common.target_only(backend)
        calls[backend]()  # warm-up
    return {backend: times.tolist() for backend, times in relative(calls, samples, 1).items()}


def overhead_shares(samples: int | None = None, number: int | None = None, seconds: float | None = None) -> dict:
    """Per backend this commit can run: 1 - floor / measured for a single-position pass, per sample ({} where
    the package has no `pass_flops`, `pass_bytes` and `measure_machine`).

    measured: the harness's own method -- every backend's single pass at the cost context's last position
    taking turns in one round-robin, a sample its fastest call. floor: the roofline
    max(FLOPs / GEMM throughput, bytes / cache bandwidth) of that pass, counted by the package's `pass_flops`
    and `pass_bytes` from the target's config, the throughput and bandwidth from its `measure_machine`
    (`seconds` long, with the suite's threads).
    """
    import specdec

    if not (hasattr(specdec, "pass_flops") and hasattr(specdec, "pass_bytes") and hasattr(specdec, "measure_machine")):
        return {}
    samples = samples or common.scaled(15, 2)
    number = number or (1 if common.SMOKE else 8)
    common.fix_threads()
    machine = specdec.measure_machine(seconds or (0.2 if common.SMOKE else 1.0), threads=common.THREADS)
    ctx = list(common.cost_context())
    pos = len(ctx) - 1
    calls = {}
    with torch.inference_mode():
        for backend in common.available_backends():
            model = common.target(backend)
            model(torch.tensor([ctx]), 0)
            calls[backend] = lambda model=model, x=torch.tensor([ctx[-1:]]): model(x, pos)
        per_call = round_robin(calls, samples, number)
    shares = {}
    for backend, times in per_call.items():
        cfg = common.target(backend).config
        flops, nbytes = specdec.pass_flops(cfg, 1, pos), specdec.pass_bytes(cfg, 1, pos)
        if flops is None or nbytes is None:  # a user's model whose config does not give its shape: no floor
            continue
        floor = max(flops / (machine.matmul_gflops * 1e9), nbytes / (machine.cache_gbps * 1e9))  # seconds
        shares[backend] = (1.0 - floor / times).tolist()  # per sample
    return shares
