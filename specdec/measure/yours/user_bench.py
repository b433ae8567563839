"""A user's own pair as benchmarks: the figures `specdec asv-init`'s suite tracks and `specdec_pair` benchmarks.

The harness is the installed specdec, fixed while the user's commits vary: the rows are `specdec ab`'s (its worker's
`_setup`, with the user's `MODULE:CALLABLE` entry points imported from the tree under test after the running
specdec, `measure.entry`), timed by its worker's clock (`_timed`, `_number`: the thread's CPU time at one thread)
in the method's rotating turns and alternated pairs (`measure.turns`, which the repository's own suite,
benchmarks/harness.py, loads by path and times with too), and counted by its work pool (`work_pool.count_tree`,
the method's `counting_config`, a row's `figure` the mean over layouts of its instructions outside the
allocators), as that suite counts. Nothing here is imported from the user's commit but their entry points'
modules.

The figures, each lower-is-better (asv reads every `track_*` so):
  * c: the draft's proposal per drafted token in single-position target passes, and the same in seconds;
  * the target pass (one position) in seconds;
  * the time ratio: speculative over target-only generation time, per alternated pair (1 / speedup);
  * target passes per generated character (token): exact given the seed;
  * instructions per call of the target pass and of each draft's proposal (one call: k tokens), where a work
    counter runs.

Environment: SPECDEC_BENCH_SMOKE=1 shrinks every sample count to one, generations to 20 characters and the
work count to one layout (a check that the suite runs; its figures mean little), SPECDEC_BENCH_SCALE multiplies
the sample and pair counts: the names the repository's own suite (benchmarks/common.py) reads.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import numpy as np

from specdec.measure import ab_worker, entry, turns

TREE_VAR = "ASV_SPECDEC_TREE"  # the commit's checked-out tree, set by the asv environment (`asv_env`)
SAMPLE_SECONDS = 0.01  # a cost sample's length: calls enough to fill it (ab_worker._number)
SAMPLES, PAIRS = 15, 5  # cost samples; alternated generation pairs
SMOKE_CHARS = 20


class Missing(NotImplementedError):
    """What this tree cannot run (an entry point's module not there yet): asv's skip, never a failure."""


def smoke() -> bool:
    return os.environ.get("SPECDEC_BENCH_SMOKE") == "1"


def scaled(normal: int) -> int:
    """A sample count: `normal` times SPECDEC_BENCH_SCALE (at least 1), or 1 under SPECDEC_BENCH_SMOKE=1."""
    return 1 if smoke() else max(1, round(normal * float(os.environ.get("SPECDEC_BENCH_SCALE", "1"))))


@dataclass(frozen=True)
class Pair:
    """What is measured: the target (`MODULE:CALLABLE`, `hf:PATH`, or None for the shipped one), the drafts
    (entry points or shipped names), the k values (a draft's cost at the largest, as `specdec ab`), and the
    generation each speculative row runs."""

    target: str | None
    drafts: tuple[str, ...]
    ks: tuple[int, ...] = (4,)
    chars: int = 200
    prompt: str = "ROMEO:"
    seed: int = 0
    temperature: float = 1.0

    @property
    def draft_k(self) -> int:
        return max(self.ks)

    def entries(self) -> list[str]:
        return [s for s in (self.target, *self.drafts) if entry.is_entry(s)]

    def config(self, tree: str, only: list[str], chars: int | None = None) -> dict:
        """`specdec ab`'s worker config for these rows of `tree` (one thread, the running specdec the harness)."""
        return {"target": self.target, "backend": None, "dtype": None, "drafts": list(self.drafts),
                "ks": list(self.ks), "chars": chars or (min(self.chars, SMOKE_CHARS) if smoke() else self.chars),
                "prompt": self.prompt, "seed": self.seed, "temperature": self.temperature, "threads": 1,
                "harness": entry.harness_root(), "source": str(tree), "only": only, "draft_k": self.draft_k}


def tree(working_copy: str | None = None) -> str:
    """The tree under test: the commit asv checked out (ASV_SPECDEC_TREE, `asv_env`), else, as with
    `asv run --python=same` (asv's existing environment sets nothing), the working copy: `working_copy`, the
    folder holding the benchmarks module's folder."""
    where = os.environ.get(TREE_VAR) or working_copy
    if not where:
        raise RuntimeError(f"no tree to measure: run under asv (it sets {TREE_VAR})")
    return where


def check_tree(pair: Pair, where: str) -> None:
    """Missing (a skip) where the tree lacks an entry point's module or callable: a commit before the module."""
    for spec in pair.entries():
        try:
            entry.check_static(spec, where, folder=where)
        except entry.EntryError as exc:
            raise Missing(str(exc)) from None


def _leave_working_copy(where: str, working_copy: str | None) -> None:
    """Drop the working copy (which asv's runner puts first on sys.path) from sys.path unless it is the tree under
    test: a module the commit lacks must not come from the working copy."""
    if not working_copy or os.path.realpath(working_copy) == os.path.realpath(where):
        return
    sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") != os.path.realpath(working_copy)]


def rows(pair: Pair, where: str, only: list[str], chars: int | None = None) -> tuple[dict, dict]:
    """(row name -> call, row name -> {"ok", "reason", "facts"}): `specdec ab`'s rows of the kinds `only`, built
    from `where` with the running specdec first (`ab_worker._setup`). Missing where the tree lacks a module."""
    check_tree(pair, where)
    calls, answer = ab_worker._setup(pair.config(where, only, chars))
    return calls, answer["rows"]


def _unavailable(answer: dict, row: str) -> str:
    got = answer.get(row)
    return got["reason"] if got else "not built"


def costs(pair: Pair, where: str, samples: int | None = None) -> dict:
    """The target pass's and each draft's proposal's seconds per sample, from one round-robin (rotating turns,
    each turn a sample of `ab_worker._number` calls timed by `ab_worker._timed`); per sample c = (proposal /
    draft_k) / pass. {"pass": [s], "c": {draft: [..]}, "per_token": {draft: [s]}, "reasons": {draft: why}}."""
    calls, answer = rows(pair, where, ["pass", "draft"])
    names = ["pass 1"] + [f"draft {d}" for d in pair.drafts if f"draft {d}" in calls]
    numbers = {n: ab_worker._number(calls[n], SAMPLE_SECONDS) for n in names}
    got = {n: np.asarray(v) for n, v in turns.round_robin(
        {n: (lambda n=n: ab_worker._timed(calls[n], numbers[n])) for n in names}, samples or scaled(SAMPLES)).items()}
    single = got["pass 1"]
    per_token = {d: got[f"draft {d}"] / pair.draft_k for d in pair.drafts if f"draft {d}" in got}
    return {"pass": single.tolist(), "per_token": {d: t.tolist() for d, t in per_token.items()},
            "c": {d: (t / single).tolist() for d, t in per_token.items()},
            "reasons": {d: _unavailable(answer, f"draft {d}") for d in pair.drafts if d not in per_token}}


def generations(pair: Pair, where: str, pairs: int | None = None) -> dict:
    """Per `draft/k`: speculative over target-only time per alternated pair (A B, then B A; every row's pair i
    before any row's pair i + 1) and target passes per generated character (exact: the worker's facts).
    {"rows": {"draft/k": {"ratios": [..], "passes_per_char": x}}, "reasons": {"draft/k": why}}."""
    calls, answer = rows(pair, where, ["target-only", "spec"])
    chars = pair.config(where, [])["chars"]
    keys = {f"{d}/{k}": f"spec {d} k={k}" for d in pair.drafts for k in pair.ks}
    plain = calls["target-only"]
    ratios: dict[str, list[float]] = {key: [] for key, row in keys.items() if row in calls}
    for i in range(pairs or scaled(PAIRS)):
        for key in ratios:  # one call each, timed by the worker (its row's `prepare` first, untimed)
            ratios[key].append(turns.pair(plain, calls[keys[key]], lambda fn: ab_worker._timed(fn, 1), b_first=i % 2 == 1))
    out = {key: {"ratios": r, "passes_per_char": answer[keys[key]]["facts"]["target_passes"] / chars}
           for key, r in ratios.items()}
    return {"rows": out, "reasons": {key: _unavailable(answer, row) for key, row in keys.items() if key not in out}}


def work_rows(pair: Pair) -> list[str]:
    return ["pass 1"] + [f"draft {d}" for d in pair.drafts]


def work(pair: Pair, where: str, rows_: list[str] | None = None, layouts: tuple | None = None,
         chars: int | None = None, progress=lambda line: None) -> dict:
    """Instructions per call of `rows_` (default the pass and each draft's proposal) of `where`, counted as
    `specdec ab` counts a revision (`work_pool.count_tree` with `work_pool.counting_config`, as the repository's
    harness counts a commit); a row's figure is the mean over the layouts of its instructions outside the
    allocators and the type cache's misses.
    {"counter": name, "rows": {row: figure}, "reasons": {row: why}} or {"counter": None, "reason": why}."""
    from specdec.measure.work import work as work_, work_pool

    avail = work_.probe()
    if avail.kind is None:
        return {"counter": None, "reason": avail.reason}
    check_tree(pair, where)
    wanted = rows_ or work_rows(pair)
    layouts = layouts or (work_pool.LAYOUTS[:1] if smoke() else work_pool.LAYOUTS)
    kinds = sorted({row.split(" ", 1)[0] for row in wanted})
    got = work_pool.count_tree(where, work_pool.counting_config(pair.config(where, kinds, chars)), wanted, avail.kind,
                               layouts, progress=progress)
    return {"counter": work_.NAMES[avail.kind], "rows": got["rows"], "reasons": got["reasons"], "layouts": list(layouts)}


# ---- asv: the classes `specdec asv-init`'s benchmarks module makes from its pair ------------------------------


def _skip(cache: dict, key: str | None = None, what: str = "") -> None:
    if "missing" in cache:
        raise NotImplementedError(cache["missing"])
    if key is not None and key in cache.get("reasons", {}):
        raise NotImplementedError(f"{what}: {cache['reasons'][key]}")


def _cached(fn, bench) -> dict:
    """setup_cache's body: the figures of the tree under test, or {"missing": why} where it lacks a module."""
    try:
        where = tree(bench.working_copy)
        _leave_working_copy(where, bench.working_copy)
        return fn(bench.pair, where)
    except Missing as exc:
        return {"missing": str(exc)}


# One function per cache, each at a line of its own: asv keys a setup_cache by its module and line, and runs each
# key once per commit (DraftCost and TargetPass share the round-robin of costs).
def _costs_cache(self) -> dict:
    return _cached(costs, self)


def _generations_cache(self) -> dict:
    return _cached(generations, self)


def _work_cache(self) -> dict:
    return _cached(_counted, self)


sampled = turns.sampled


class DraftCost:
    """c and seconds per drafted token of each draft's proposal at k = max(ks) (`costs`)."""

    pair: Pair
    param_names = ["draft"]
    timeout = 600
    setup_cache = _costs_cache

    def setup(self, cache, draft):
        _skip(cache, draft, f"draft {draft}")

    def track_c(self, cache, draft):
        return sampled(cache["c"][draft])

    def track_seconds_per_token(self, cache, draft):
        return sampled(cache["per_token"][draft])

    track_c.unit = "target passes per drafted token (lower is better)"
    track_seconds_per_token.unit = "seconds per drafted token (lower is better)"


class TargetPass:
    """The target's forward over one position, in seconds (timed in the same round-robin as the drafts)."""

    pair: Pair
    timeout = 600
    setup_cache = _costs_cache

    def setup(self, cache):
        _skip(cache)

    def track_seconds(self, cache):
        return sampled(cache["pass"])

    track_seconds.unit = "seconds (lower is better)"


class Speedup:
    """Per draft × k: speculative ÷ target-only time per alternated pair (1 / speedup), and target passes per
    generated character (exact given the seed)."""

    pair: Pair
    param_names = ["draft", "k"]
    timeout = 1200
    setup_cache = _generations_cache

    def setup(self, cache, draft, k):
        _skip(cache, f"{draft}/{k}", f"draft {draft} at k={k}")

    def track_time_ratio(self, cache, draft, k):
        return sampled(cache["rows"][f"{draft}/{k}"]["ratios"])

    def track_passes_per_char(self, cache, draft, k):
        return cache["rows"][f"{draft}/{k}"]["passes_per_char"]

    track_time_ratio.unit = "speculative / target-only time (lower is better)"
    track_passes_per_char.unit = "target passes per generated character (lower is better)"


def _counted(pair: Pair, where: str) -> dict:
    return work(pair, where, progress=lambda line: print(line, file=sys.stderr, flush=True))


class Work:
    """Instructions per call of the target's forward over one position (`pass 1`) and of each draft's proposal of
    max(ks) tokens (`draft D`): counted, not timed, so deterministic (one counting process for every row)."""

    pair: Pair
    param_names = ["row"]
    timeout = 1800
    setup_cache = _work_cache

    def setup(self, cache, row):
        _skip(cache)
        if cache.get("counter") is None:
            raise NotImplementedError(f"no work counter here: {cache.get('reason')}")
        if row not in cache["rows"]:
            raise NotImplementedError(f"{row} not counted: {cache['reasons'].get(row, 'not built')}")

    def track_instructions(self, cache, row):
        return cache["rows"][row]

    track_instructions.unit = "instructions per call (lower is better)"


def asv_classes(target: str | None, drafts: list[str], ks: list[int], chars: int = 200, prompt: str = "ROMEO:",
                here: str | None = None) -> dict[str, type]:
    """The benchmark classes of one pair, by name, for an asv benchmarks module (`globals().update(...)`): their
    parameter lists are fixed here, from the module's constants, as asv needs (it discovers them once). `here`:
    the module's file; the folder above its folder is the working copy (`tree`'s fallback)."""
    pair = Pair(target, tuple(drafts), tuple(ks), chars, prompt)
    params = {"DraftCost": [list(drafts)], "TargetPass": [], "Speedup": [list(drafts), list(ks)],
              "Work": [work_rows(pair)]}
    out = {}
    for base in (DraftCost, TargetPass, Speedup, Work):
        attrs = {"pair": pair, "__module__": base.__module__,
                 "working_copy": os.path.dirname(os.path.dirname(os.path.abspath(here))) if here else None}
        if params[base.__name__]:
            attrs["params"] = params[base.__name__]
        out[base.__name__] = type(base.__name__, (base,), attrs)
    return out
