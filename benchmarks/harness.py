"""The asv suite's own measuring method, fixed across commits while the code under test varies.

The report measures through `specdec.measure.timing`; this suite does not import it (nor `measure.stats` or any other
internal), because asv runs today's benchmarks against every commit's package: a method living in the package
would change from commit to commit, and move the figures with no change in performance. (So its round-robin and
pairs have twins in the package, `timing.round_robin` and `measure.user_bench`, which time a user's commits with
`specdec ab`'s worker: they import the package and cannot be loaded by path, as the counting method's
stdlib-only files `work.py` and `work_pool.py` are below.)

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

import contextlib
import functools
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


def sampled(values) -> dict:
    """A tracked figure as its samples, in the form asv's runner reads as a sampled result (what a `time_*`
    benchmark hands it): asv stores the samples, appends those of later rounds, takes their median as the
    figure with a 99 % interval, and `asv continuous`/`compare` test the two commits' samples (Mann-Whitney,
    p < 0.002) before flagging a change beyond the factor."""
    values = [float(v) for v in np.asarray(values, dtype=float).ravel()]
    if not values:
        raise ValueError("a sampled figure needs at least one sample")
    return {"samples": values, "number": 1}


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
    (None for any other draft): `specdec ab`'s own hand-off (the running checkout's ab_rows.py, `_method`)."""
    return _method("ab_rows.py").prefill_states(model, draft, ctx)


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


def _timed_rows(runs: dict[str, list], pairs_per_run: int = 1) -> dict[str, dict]:
    """Rows of (target-only, speculative) call pairs, one per run of the row: each run's pair timed
    alternately with every other row's, the row's counts summed from its timed speculative runs.

    runs: key -> list of (target-only call, speculative call). Returns key -> chars, target_passes, drafted,
    accepted, and ratios: each pair's speculative / target-only (the samples asv judges the row by).
    """
    common.fix_threads()
    ratios: dict[str, list[float]] = {key: [] for key in runs}
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
            ratios[key].append(tb / ta)
            if i < len(calls):  # count each run once
                st = out["spec"].stats
                for name in counts[key]:
                    counts[key][name] += getattr(st, name)
    return {key: {**counts[key], "ratios": ratios[key]} for key in runs}


def workload_generations(drafts: list[str], ks: list[int]) -> dict:
    """Per draft x k ('draft/k') over six workload runs (every fourth prompt, seeds in turn); {} where the
    workload API is absent."""
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


def _method(filename: str):
    """A file of the running checkout's method (specdec/measure/FILENAME), loaded by path through the method's
    one loader (specdec/measure/method.py, itself run by path), never the commit's package: the method stays
    fixed while the code under test varies, and `work_pool` and `ab_worker` get the same module objects.
    These files import only the standard library at import: cheap, and nothing of specdec."""
    return _loader()(filename)


@functools.cache
def _loader():
    import runpy
    from pathlib import Path

    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "specdec" / "measure" / "method.py"))["load"]


def _worker_constant(name: str):
    """A constant of `specdec ab`'s rows (the running checkout's ab_rows.py, `_method`), so that both
    methods batch alike."""
    return getattr(_method("ab_rows.py"), name)


BATCH = _worker_constant("BATCH")  # sequences at once in the batched rows (bench_batch), as in `specdec ab`


@functools.lru_cache(maxsize=None)
def batch_generations(drafts: tuple[str, ...], k: int, pairs: int | None = None) -> dict:
    """Per draft this commit can batch: speculative ÷ target-only time of BATCH sequences at once (the prompt
    BATCH times, seeds SEED..SEED+BATCH-1, `batch=` of the public API), in alternated pairs (`pair`), rows
    taking turns pair by pair; and the batch's target passes per character. {} on a commit whose
    `speculative_generate` takes no batch, or for a target that cannot batch (its ValueError)."""
    import inspect

    import specdec

    if "batch" not in inspect.signature(specdec.speculative_generate).parameters:
        return {}
    pairs = pairs or common.scaled(3, 1)
    common.fix_threads()
    t = common.target()
    plain = lambda: specdec.generate(t, common.PROMPT, common.CHARS, seed=common.SEED,
                                     temperature=common.TEMPERATURE, batch=BATCH)
    try:
        plain()  # warm-up; a target that cannot batch (a user's hf: model) says so with a ValueError: skip
    except ValueError:
        return {}
    runs, last = {}, {}
    for name in common.available(drafts):
        d = common.draft(name)
        run = lambda d=d: specdec.speculative_generate(t, d, common.PROMPT, common.CHARS, k=k, seed=common.SEED,
                                                       temperature=common.TEMPERATURE, batch=BATCH)
        try:
            run()  # warm-up: the draft's first batched call
        except ValueError:  # a draft that cannot batch: its rows skip
            continue
        runs[name] = lambda name=name, run=run: last.__setitem__(name, run())
    ratios = {name: [] for name in runs}
    for i in range(pairs):
        for name, run in runs.items():
            ratios[name].append(pair(plain, run, b_first=i % 2 == 1))
    return {name: {"ratios": ratios[name], "time_ratio": float(np.median(ratios[name])),
                   "passes_per_char": last[name].passes / common.CHARS} for name in runs}


WORK_ROWS = ["target-only", "pass 1", "verify 5"] + [f"{kind} {d}{k}" for d in ("bigram", "ngram")
                                                    for kind, k in (("draft", ""), ("round", " k=4"), ("spec", " k=4"))]


# What `specdec ab` counts a revision with: the running checkout's `work_pool.py` (loaded by path, `_method`),
# where ab, bisect and a user's suite take it from too, so the two cannot drift apart.
WORK_LAYOUTS = list(_method("work/work_pool.py").LAYOUTS)  # layout seeds (`work.perturb`): the figure is the mean over them
WORK_CHARS = _method("work/work_pool.py").COUNT_CHARS  # characters of a counted generation: the timed row's code, cheaper


def work_config(backend: str) -> dict:
    """The counting children's config, `work_pool.counting_config` of this suite's pair: rows without their facts
    (`count`), generations at most WORK_CHARS long, one thread (callgrind adds every thread's instructions, the
    hardware counter counts the calling thread's). A smoke run builds the cheap rows only (the call path is the
    same); the rest skip there."""
    return _method("work/work_pool.py").counting_config(
        {"target": common.USER_TARGET, "backend": backend, "dtype": None, "drafts": ["bigram", "ngram"], "ks": [4],
         "chars": common.CHARS, "prompt": common.PROMPT, "seed": common.SEED, "temperature": common.TEMPERATURE,
         "threads": 1, "only": ["pass", "draft"] if common.SMOKE else None})


@functools.lru_cache(maxsize=None)
def work_counts(backend: str = "onnx") -> dict:
    """Instructions per call of the work rows, counted as `specdec ab` counts a revision: the running checkout's
    `work_pool.count_tree` (loaded by path with `work.py` and `ab_worker.py` beside it, never the commit's), the
    tree being the folder the commit's package is installed in; one zygote under the work counter (callgrind where
    the machine has no hardware counter), a forked child per layout of WORK_LAYOUTS. A row's figure is the mean
    over the layouts of its `fewest` (instructions outside the allocators and the type cache's misses); a round
    row's is divided by its rounds (instructions per round).

    Returns {"counter": name, "rows": {row: figure}, "reasons": {row: why it was not counted}}, or
    {"counter": None, "reason": why nothing counts here} (every work benchmark then skips with that reason).
    Under SPECDEC_BENCH_SMOKE only the pass and draft rows are counted, in one layout (its figures mean nothing;
    a user's pair: none)."""
    import importlib.util
    import sys
    from pathlib import Path

    avail = _method("work/work.py").probe()
    if avail.kind is None:
        return {"counter": None, "reason": avail.reason}
    if common.SMOKE and common.USER_TARGET:  # tools/check_history.py on a user's pair: minutes of simulation
        return {"counter": None, "reason": "a smoke run counts no user's pair (SPECDEC_TARGET set)"}
    package = importlib.util.find_spec("specdec")  # the commit's installed package: the folder holding it is the tree
    site = str(Path(package.origin).resolve().parents[1])
    layouts = WORK_LAYOUTS[:1] if common.SMOKE else WORK_LAYOUTS
    pool = _method("work/work_pool.py")
    got = pool.count_tree(site, work_config(backend), WORK_ROWS, avail.kind, layouts,
                          progress=lambda line: print(line, file=sys.stderr, flush=True))
    rows = {name: mean / got["facts"][name]["rounds"] if name.startswith("round") else mean
            for name, mean in got["rows"].items()}
    reasons = {name: ("a smoke run counts the pass and draft rows only" if common.SMOKE and why == "not built" else why)
               for name, why in got["reasons"].items()}
    return {"counter": avail.name, "rows": rows, "reasons": reasons}
