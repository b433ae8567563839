"""The suite's paired rows: speculative ÷ target-only generation time, alternated pair by pair (`harness.pair`).

Every row's pair i runs before any row's pair i + 1, so a burst of outside load touches one pair of many rows,
which each row's median shrugs off. The counts (passes, drafted, accepted) come from the timed speculative runs
themselves: exact given the seed. Only the public API of the commit under test is called; a commit that lacks
what a row measures gives {} and its benchmarks skip.
"""

from __future__ import annotations

import functools

import numpy as np

from . import common, harness


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
            ratios[key].append(harness.pair(plain[key[0]], run, b_first=i % 2 == 1))
    rows: dict[str, dict] = {backend: {} for backend in plain}
    for (backend, key), out in last.items():
        st = out.stats
        r = ratios[backend, key]
        rows[backend][key] = {"chars": st.chars, "target_passes": st.target_passes, "drafted": st.drafted,
                              "accepted": st.accepted, "ratios": r, "time_ratio": float(np.median(r))}
    return rows


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
            ratios[key].append(harness.pair(plain, lambda: out.setdefault("spec", spec()), b_first=i % 2 == 1))
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


BATCH = harness._worker_constant("BATCH")  # sequences at once in the batched rows (bench_batch), as in `specdec ab`


@functools.lru_cache(maxsize=None)
def batch_generations(drafts: tuple[str, ...], k: int, pairs: int | None = None) -> dict:
    """Per draft this commit can batch: speculative ÷ target-only time of BATCH sequences at once (the prompt
    BATCH times, seeds SEED..SEED+BATCH-1, `batch=` of the public API), in alternated pairs (`harness.pair`), rows
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
            ratios[name].append(harness.pair(plain, run, b_first=i % 2 == 1))
    return {name: {"ratios": ratios[name], "time_ratio": float(np.median(ratios[name])),
                   "passes_per_char": last[name].passes / common.CHARS} for name in runs}
