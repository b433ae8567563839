"""The asv suite's own measuring method, fixed across commits while the code under test varies.

The report measures through `specdec.timing`; this suite does not import it (nor `specdec.stats` or any other
internal), because asv runs today's benchmarks against every commit's package: a method living in the package
would change from commit to commit, and move the figures with no change in performance.

The method, in three rules:
  * Two things compared are measured side by side, never in separate runs: generations in alternated pairs
    (A B, then B A, ...) after a warm-up; costs in round-robin samples in which every call of the round takes
    its turn (the order rotating by one each time), so sample i of each covers the same stretch of time.
  * A figure is the median of per-sample (per-pair) ratios: drift and a faster or slower machine cancel in
    each ratio, and the median ignores the few samples a burst of outside load lands on. Within a cost
    sample each call's fastest turn counts (the least disturbed by other processes on a shared machine).
  * The garbage collector is off inside timed regions (it runs between samples) and torch's threads are set
    by the caller (`common.fix_threads`). The clock is `common.CLOCK`: the thread's CPU time with one torch
    thread (the default), the wall clock with more.
"""

from __future__ import annotations

import contextlib
import gc
import math
from typing import Callable

import numpy as np
import torch

from . import common


@contextlib.contextmanager
def gc_paused():
    """Collect now, then keep the collector out of the block (a collection inside a timed call is noise)."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _timed(fn: Callable[[], object]) -> float:
    clock = common.CLOCK
    t0 = clock()
    fn()
    return clock() - t0


def pair(fn_a: Callable[[], object], fn_b: Callable[[], object], b_first: bool = False) -> float:
    """One pair's time ratio B / A, the two run back to back; alternate `b_first` from pair to pair (A B, then
    B A, ...) so that neither side always runs second, into caches the other just warmed."""
    with gc_paused():
        if b_first:
            tb, ta = _timed(fn_b), _timed(fn_a)
        else:
            ta, tb = _timed(fn_a), _timed(fn_b)
    return tb / ta


def round_robin(calls: dict[str, Callable[[], object]], samples: int, number: int,
                warmup: int = 1) -> dict[str, np.ndarray]:
    """Seconds of each named call: `samples` samples each, after `warmup` discarded samples.

    A sample is `number` rounds; in a round every call takes one turn, timed alone, and the round's order
    starts one later each time (A B C, B C A, ...) so that no call always follows the same one (whose
    weights it would find in the CPU caches, or not). A sample's value is its fastest call: on a shared
    machine a call that was descheduled or ran beside another process's burst is slower, never faster, and
    the fastest of a few calls is the least disturbed. Sample i of every call spans the same moments.
    """
    names = list(calls)
    kept: dict[str, list[float]] = {name: [] for name in names}
    for s in range(warmup + samples):
        fastest = dict.fromkeys(names, math.inf)
        with gc_paused():
            for r in range(number):
                shift = r % len(names)
                for name in names[shift:] + names[:shift]:
                    fastest[name] = min(fastest[name], _timed(calls[name]))
        if s >= warmup:
            for name in names:
                kept[name].append(fastest[name])
    return {name: np.asarray(v) for name, v in kept.items()}


def median_ratio(num: np.ndarray, den: np.ndarray) -> float:
    """The median of per-sample ratios num[i] / den[i] (samples taken at the same moments)."""
    return float(np.median(np.asarray(num) / np.asarray(den)))


def costs(samples: int | None = None, number: int | None = None) -> dict:
    """Per backend this commit can run (`common.available_backends`): c per draft and T(n)/T(1) per verify
    width, from one round-robin per backend over its target and every draft made from it.

    The target's calls are single passes and n-position verify passes at the cost context's last position
    (its cache filled with the context first). A draft's call is what a round pays for its proposal: the
    draft steps back one token and proposes DRAFT_K characters. c = (draft call / DRAFT_K) / single pass,
    per sample, then the median; T(n)/T(1) likewise: both ratios within one backend. Plain dicts: asv pickles
    setup_cache's value.
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
            calls[f"draft:{name}"] = _proposal(common.draft(name, backend), ctx, pos)
        per_call = round_robin(calls, samples, number)
    single = per_call["pass1"]
    drafts = [key.split(":", 1)[1] for key in calls if key.startswith("draft:")]
    return {
        "c": {name: median_ratio(per_call[f"draft:{name}"] / common.DRAFT_K, single) for name in drafts},
        "verify_over_single": {n: median_ratio(per_call[f"pass{n}"], single) for n in common.POSITIONS},
        "single_pass_us": float(np.median(single)) * 1e6,
    }


def _proposal(draft, ctx: list[int], pos: int) -> Callable[[], object]:
    """A draft's proposal as a round pays for it: step back to `pos`, feed the pending token, draft DRAFT_K."""
    rng = np.random.default_rng(0)
    draft.reset()
    draft.propose(ctx, 1, rng, common.TEMPERATURE)  # the draft's own cache (if any) now holds the context

    def call():
        draft.rollback(pos)
        draft.propose(ctx, common.DRAFT_K, rng, common.TEMPERATURE)

    return call


def generations(pairs: int | None = None) -> dict:
    """Per backend this commit can run, per draft x k ('draft/k'): the generation's counts and speculative ÷
    target-only time ratios, both generations on that backend's target.

    Each row's generation first runs short and untimed (the draft's first call pays one-off set-up), then rows
    -- of every backend -- take turns pair by pair -- pair i of every row before pair i + 1 of any -- so a burst
    of load touches one pair of many rows, which the per-row median shrugs off, rather than every pair of one
    row. The counts come from the timed speculative runs themselves (exact given the seed: every run makes the
    same choices).
    """
    pairs = pairs or common.scaled(3, 1)
    common.fix_threads()
    runs, last, plain = {}, {}, {}
    for backend in common.available_backends():
        for name in common.available(common.DRAFTS, backend):
            for k in common.KS:
                key, run = (backend, f"{name}/{k}"), common.speculative(name, k, backend=backend)
                common.speculative(name, k, chars=k + 2, backend=backend)()  # warm-up: a round or two
                runs[key] = lambda key=key, run=run: last.__setitem__(key, run())
        plain[backend] = lambda backend=backend: common.target_only(backend)
        plain[backend]()  # warm-up
    ratios = {key: [] for key in runs}
    for i in range(pairs):
        for key, run in runs.items():  # A B in even pairs, B A in odd ones
            ratios[key].append(pair(plain[key[0]], run, b_first=i % 2 == 1))
    rows: dict[str, dict] = {backend: {} for backend in plain}
    for (backend, key), out in last.items():
        st = out.stats
        r = ratios[backend, key]
        rows[backend][key] = {"chars": st.chars, "target_passes": st.target_passes, "drafted": st.drafted,
                              "accepted": st.accepted, "ratios": r, "time_ratio": float(np.median(r))}
    return rows


def overhead_shares(samples: int | None = None, number: int | None = None, seconds: float | None = None) -> dict:
    """Per backend this commit can run: 1 - floor / measured for a single-position pass ({} where the package
    has no `pass_flops`, `pass_bytes` and `measure_machine`).

    measured: the harness's own method -- every backend's single pass at the cost context's last position
    taking turns in one round-robin, a sample its fastest call, the median of samples. floor: the roofline
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
        floor = max(flops / (machine.matmul_gflops * 1e9), nbytes / (machine.cache_gbps * 1e9))  # seconds
        shares[backend] = 1.0 - floor / float(np.median(times))
    return shares


def _timed_rows(runs: dict[str, list], pairs_per_run: int = 1) -> dict[str, dict]:
    """Rows of (target-only, speculative) call pairs, one per run of the row: each run's pair timed
    alternately with every other row's, the row's counts summed from its timed speculative runs.

    runs: key -> list of (target-only call, speculative call). Returns key -> chars, target_passes, drafted,
    accepted, time_ratio = Σ speculative / Σ target-only over the row's pairs.
    """
    common.fix_threads()
    times = {key: [0.0, 0.0] for key in runs}
    counts = {key: dict.fromkeys(("chars", "target_passes", "drafted", "accepted"), 0) for key in runs}
    width = max(len(v) for v in runs.values())
    for i in range(width * pairs_per_run):
        for key, calls in runs.items():
            if i >= len(calls) * pairs_per_run:
                continue
            plain, spec = calls[i % len(calls)]
            out = {}
            with gc_paused():
                if i % 2:
                    tb, ta = _timed(lambda: out.setdefault("spec", spec())), _timed(plain)
                else:
                    ta, tb = _timed(plain), _timed(lambda: out.setdefault("spec", spec()))
            times[key][0] += ta
            times[key][1] += tb
            if i < len(calls):  # count each run once
                st = out["spec"].stats
                for name in counts[key]:
                    counts[key][name] += getattr(st, name)
    return {key: {**counts[key], "time_ratio": times[key][1] / times[key][0]} for key in runs}


def workload_generations(drafts: list[str], ks: list[int]) -> dict:
    """Per draft x k ('draft/k') over six workload runs (every fourth prompt, seeds in turn); {} where the workload API is absent."""
    import specdec

    if not hasattr(specdec, "load_workload"):
        return {}
    runs = specdec.load_workload("shakespeare24").cycled(4)
    chars = common.CHARS
    t = common.target()
    plain = [lambda item=item, s=s: specdec.generate(t, item.prompt, chars, seed=s) for item, s in runs]
    rows = {}
    for name in common.available(drafts):
        d = common.draft(name)
        for k in ks:
            rows[f"{name}/{k}"] = [(p, lambda item=item, s=s, k=k, d=d: specdec.speculative_generate(
                t, d, item.prompt, chars, k=k, seed=s)) for p, (item, s) in zip(plain, runs)]
    return _timed_rows(rows)


def tree_generations(drafts: list[str], shapes: list[str]) -> dict:
    """Per draft x tree shape ('draft/shape') on the benchmark prompt, three alternated pairs each; {} where
    the package has no trees."""
    import specdec

    if not hasattr(specdec, "TreeSpec"):
        return {}
    t = common.target()
    rows = {}
    for name in common.available(drafts):
        d = common.draft(name)
        for shape in shapes:
            spec = specdec.TreeSpec.parse(shape)
            call = lambda d=d, spec=spec: specdec.speculative_generate(
                t, d, common.PROMPT, common.CHARS, k=1, seed=common.SEED, temperature=common.TEMPERATURE, tree=spec)
            call()  # warm-up
            rows[f"{name}/{shape}"] = [(common.target_only, call)]
    return _timed_rows(rows, pairs_per_run=common.scaled(3, 1))
