"""The asv suite: every tracked figure lower-is-better and documented, only the public API used, asv's style,
and the harness's method on stand-in calls (nothing here is timed against a threshold)."""

import ast
import importlib
import inspect
import itertools
import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import benchmarks
from benchmarks import common, harness, pairs
from specdec.measure.anatomy import roofline
from specdec.model import backends

ROOT = Path(__file__).resolve().parent.parent
SUITE = sorted((ROOT / "benchmarks").glob("bench_*.py"))
PUBLIC_API = {"load_target", "make_draft", "generate", "speculative_generate", "encode", "load_workload", "TreeSpec",
              "BACKENDS", "pass_flops", "pass_bytes", "measure_machine",
              "Target"}  # looked up, never assumed: it marks a commit that can load SPECDEC_TARGET
KINDS = ("time_", "track_", "peakmem_", "mem_", "timeraw_")
SHIPPED_DRAFTS = [n for n in common.DRAFTS if n != common.USER]  # "user" skips without SPECDEC_DRAFT
# the suite's fixed backend list less those not installed here (onnx without the onnx extra): what it can run
INSTALLED = [name for name in common.BACKENDS if name in backends.BACKENDS]


def _classes():
    for path in SUITE:
        module = importlib.import_module(f"benchmarks.{path.stem}")
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and not name.startswith("_"):  # asv skips private names
                yield cls


def _benchmarks(kind):
    return [(cls, name) for cls in _classes() for name in dir(cls) if name.startswith(kind)]  # inherited too


def test_the_suite_has_every_family():
    names = {name for cls in _classes() for name in dir(cls) if name.startswith(KINDS)}
    assert {"track_relative_time", "track_c", "track_verify_over_single", "track_time_ratio", "peakmem_generate"} <= names
    assert set(benchmarks.LOWER_IS_BETTER) <= names


def test_every_tracked_figure_is_a_documented_lower_is_better_one():
    tracked = _benchmarks("track_")
    assert tracked
    unknown = [f"{cls.__name__}.{name}" for cls, name in tracked if name not in benchmarks.LOWER_IS_BETTER]
    assert not unknown, f"not in benchmarks.LOWER_IS_BETTER (asv reads every track_ as lower-is-better): {unknown}"
    for cls, name in tracked:
        assert "lower is better" in getattr(cls, name).unit, f"{cls.__name__}.{name}'s unit must say so"


def test_readme_lists_the_lower_is_better_figures():
    readme = (ROOT / "README.md").read_text()
    missing = [name for name in benchmarks.LOWER_IS_BETTER if f"`{name}`" not in readme]
    assert not missing, f"README's asv section does not list {missing}"


def test_the_suite_uses_only_the_public_api():
    """No specdec.measure.timing, specdec.measure.stats or other internals: the method must not change with the commit."""
    for path in sorted((ROOT / "benchmarks").glob("*.py")):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                bad = [a.name for a in node.names if a.name.startswith("specdec.")]
            elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("specdec"):
                bad = [f"{node.module}.{a.name}" for a in node.names
                       if node.module != "specdec" or a.name not in PUBLIC_API]
            elif isinstance(node, ast.Attribute) and getattr(node.value, "id", None) == "specdec":
                bad = [] if node.attr in PUBLIC_API else [f"specdec.{node.attr}"]
            elif (isinstance(node, ast.Call) and getattr(node.func, "id", None) in ("getattr", "hasattr")
                  and getattr(node.args[0], "id", None) == "specdec"):  # names looked up where a commit may lack them
                name = node.args[1].value if isinstance(node.args[1], ast.Constant) else None
                bad = [] if name in PUBLIC_API else [f"specdec.{name}"]
            else:
                continue
            assert not bad, f"{path.name}:{node.lineno} uses {bad}; allowed: {sorted(PUBLIC_API)}"


def test_asv_style_params_names_and_one_line_timings():
    for cls in _classes():
        assert cls.__name__[0].isupper() and not cls.__name__.startswith(("Time", "Track", "Mem", "Peakmem"))
        params = cls.params if isinstance(cls.params, tuple) else (cls.params,)
        assert len(params) == len(cls.param_names), cls.__name__
        for name, fn in vars(cls).items():
            if name.startswith(("time_", "peakmem_")):
                body = ast.parse(inspect.getsource(fn).strip()).body[0].body
                assert len(body) == 1, f"{cls.__name__}.{name}: one-line body (set-up goes in setup)"


def test_parameter_lists_are_fixed_not_read_from_the_package():
    """asv indexes every commit's run into the lists discovered at the newest commit (common's docstring): a list
    read from the package would be shorter at older commits. The backends are fixed too, and kept equal to this
    package's BACKENDS here, so a new backend is added to the suite on purpose."""
    for cls in _classes():
        for values in (cls.params if isinstance(cls.params, tuple) else (cls.params,)):
            assert isinstance(values, list) and values, cls.__name__
    assert common.KS == [1, 4, 8] and common.POSITIONS == [2, 5, 9]

    assert common.BACKENDS == list(backends.KNOWN) and common.BACKENDS[0] == "eager"


def test_the_backend_parameter_is_on_the_pass_draft_cost_and_speedup_benchmarks_with_a_small_grid():
    from benchmarks import bench_drafts, bench_speedup, bench_target

    for cls in (bench_target.TargetPass, bench_target.VerifyGrowth, bench_target.OverheadShare,
                bench_drafts.DraftCharacter, bench_drafts.DraftCost, bench_speedup.Speedup):
        assert cls.param_names[:2] == ["threads", "backend"] and cls.params[1] == common.BACKENDS, cls.__name__
    # backend crosses a single pass and the widest verify pass only
    assert bench_target.TargetPass.params[2] == [1, 9]


def test_a_backend_the_commit_cannot_run_is_a_skip_and_eager_is_the_plain_target(monkeypatch):
    import specdec

    loaded = []
    monkeypatch.setattr(specdec, "load_target", lambda backend="eager": loaded.append(backend) or backend)
    assert common._load("fused") == "fused" and loaded == ["fused"]
    with pytest.raises(NotImplementedError, match="backend 'numba' does not exist at this commit"):
        common._load("numba")  # not in this commit's BACKENDS
    monkeypatch.setattr(specdec, "load_target", lambda: loaded.append("plain") or "plain")  # no backend parameter
    assert common._load("eager") == "plain"
    with pytest.raises(NotImplementedError, match="load_target takes no backend"):
        common._load("fused")
    monkeypatch.delattr(specdec, "BACKENDS")  # before backends: eager only
    assert common._load("eager") == "plain"
    with pytest.raises(NotImplementedError, match="does not exist at this commit"):
        common._load("fused")


def test_setup_skips_a_backend_this_commit_lacks():
    from benchmarks import bench_drafts, bench_speedup, bench_target

    from benchmarks import bench_generation

    with pytest.raises(NotImplementedError):
        bench_target.TargetPass().setup({"eager": {}}, 1, "fused", 1)
    with pytest.raises(NotImplementedError):
        bench_drafts.DraftCharacter().setup({"eager": {}}, 1, "fused", "bigram")
    with pytest.raises(NotImplementedError):
        bench_drafts.DraftCharacter().setup({"eager": {"draft_char_time": {}}}, 1, "eager", "bigram")
    with pytest.raises(NotImplementedError):
        bench_generation.TargetOnlyGeneration().setup({"eager": [1.0]}, 1, "fused")
    with pytest.raises(NotImplementedError):
        bench_drafts.DraftCost().setup({"eager": {"c": {"bigram": 0.1}}}, 1, "fused", "bigram")
    with pytest.raises(NotImplementedError):
        bench_speedup.Speedup().setup({"eager": {"bigram/1": {}}}, 1, "fused", "bigram", 1)
    with pytest.raises(NotImplementedError):
        bench_target.OverheadShare().setup({"eager": 0.9}, 1, "fused")
    with pytest.raises(NotImplementedError, match="no pass_flops"):
        bench_target.OverheadShare().setup({}, 1, "eager")


@pytest.mark.parametrize("gflops,gbps,share", [
    # the cost context is 84 characters: one pass at position 83, S = 84 keys.
    # FLOPs: Linear 1,179,648 + attention 3·2·2·84·128 = 129,024 + lm_head 21,504 = 1,330,176
    # bytes: (589,824 + 10,752 weights + 256 rows + 1,792 norms + 2·3·84·128 = 64,512 KV) · 4 = 2,668,544
    (10.0, 2.0, 1 - 1334.272 / 2000),  # bytes / 2 GB/s = 1,334.272 µs > FLOPs / 10 GFLOP/s = 133.0 µs
    (1.0, 20.0, 1 - 1330.176 / 2000),  # FLOPs / 1 GFLOP/s = 1,330.176 µs > bytes / 20 GB/s = 133.4 µs
])
def test_overhead_share_is_one_minus_the_floor_over_each_harness_sample(monkeypatch, gflops, gbps, share):
    import specdec

    seen = {}
    monkeypatch.setattr(specdec, "measure_machine", lambda seconds, threads: seen.setdefault(
        "machine", roofline.Machine(matmul_gflops=gflops, cache_gbps=gbps, memory_gbps=1.0, threads=threads)))

    def round_robin(calls, samples, number):
        seen["calls"] = sorted(calls)
        for fn in calls.values():
            assert fn().shape == (1, 1, 84)  # a single position
        return {name: np.array([1e-3, 2e-3, 3e-3]) for name in calls}  # median 2 ms

    monkeypatch.setattr(harness, "round_robin", round_robin)
    shares = harness.overhead_shares(samples=1, number=1, seconds=0.1)
    assert seen["calls"] == sorted(INSTALLED) and set(shares) == set(INSTALLED)
    for v in shares.values():  # per sample: 1 - floor / 1, 2, 3 ms
        floor_ms = (1 - share) * 2
        assert v == pytest.approx([1 - floor_ms / 1, 1 - floor_ms / 2, 1 - floor_ms / 3], rel=1e-12)


def test_overhead_share_is_empty_without_the_floor_api(monkeypatch):
    import specdec

    monkeypatch.delattr(specdec, "pass_flops")
    assert harness.overhead_shares() == {}


class _FakeTime:
    """A stand-in for common's `time` module: each thread_time() read advances by `step` seconds."""

    def __init__(self, step):
        self.step, self.now = step, 0.0

    def thread_time(self):
        self.now += self.step
        return self.now

    def perf_counter(self):
        return -1.0


@pytest.mark.parametrize("threads,step,chosen", [
    (1, 1e-6, "thread_time"),  # one thread, a fine thread clock: the thread's CPU time
    (1, 0.004, "perf_counter"),  # one thread, a clock in 4 ms scheduler ticks: too coarse, the wall clock
    (2, 1e-6, "perf_counter"),  # work spread over threads: the wall clock, however fine the thread clock
])
def test_the_clock_is_thread_cpu_time_with_one_thread_where_it_ticks_finely(monkeypatch, threads, step, chosen):
    fake = _FakeTime(step)
    monkeypatch.setattr(common, "time", fake)
    monkeypatch.setattr(common, "THREADS", threads)
    assert common._clock() == getattr(fake, chosen)


def test_the_harness_times_with_common_clock(monkeypatch):
    """A fake CLOCK that only the calls move (a advances it 1 s, b 3 s): the harness's seconds and ratios are
    exactly those, where any other clock would give microseconds."""
    now = [0.0]

    def call(seconds):
        def fn():
            now[0] += seconds
        return fn

    monkeypatch.setattr(common, "CLOCK", lambda: now[0])
    a, b = call(1.0), call(3.0)
    assert harness.pair(a, b) == 3.0 and harness.pair(a, b, b_first=True) == 3.0
    out = harness.round_robin({"a": a, "b": b}, samples=2, number=2, warmup=1)
    assert {name: v.tolist() for name, v in out.items()} == {"a": [1.0, 1.0], "b": [3.0, 3.0]}


def test_round_robin_rotates_and_keeps_per_call_seconds():
    order = []
    calls = {name: (lambda name=name: order.append(name)) for name in "abc"}
    out = harness.round_robin(calls, samples=2, number=3, warmup=1)
    assert set(out) == set("abc") and all(v.shape == (2,) and (v >= 0).all() for v in out.values())
    assert order[:9] == list("abcbcacab")  # each round starts one later


def test_pair_alternates():
    order = []
    assert harness.pair(lambda: order.append("a"), lambda: order.append("b"), b_first=True) > 0
    assert order == ["b", "a"]


def test_costs_and_generations_give_every_figure_per_backend(monkeypatch):
    monkeypatch.setattr(common, "CHARS", 12)
    per_backend = harness.costs(samples=2, number=1)
    assert list(per_backend) == INSTALLED
    for costs in per_backend.values():
        assert set(costs["c"]) == set(costs["draft_char_time"]) == set(SHIPPED_DRAFTS)
        assert set(costs["verify_over_single"]) == set(common.POSITIONS)
        assert set(costs["pass_time"]) == {1, *common.POSITIONS}
        for figure in ("c", "verify_over_single", "pass_time", "draft_char_time"):
            for samples in costs[figure].values():
                assert len(samples) == 2 and all(v > 0 for v in samples)  # per sample, every sample kept
        # every ratio is within one sample: c = (draft per char / reference) / (pass / reference)
        for name, c in costs["c"].items():
            expect = np.asarray(costs["draft_char_time"][name]) / np.asarray(costs["pass_time"][1])
            assert np.allclose(c, expect, rtol=1e-12)
    per_backend = pairs.generations(pairs=1)
    assert list(per_backend) == INSTALLED
    for rows in per_backend.values():
        assert set(rows) == {f"{n}/{k}" for n, k in itertools.product(SHIPPED_DRAFTS, common.KS)}
        for row in rows.values():
            assert row["chars"] == 12 and 0 < row["target_passes"] <= 12 and row["time_ratio"] > 0
            assert len(row["ratios"]) == 1 and row["time_ratio"] == row["ratios"][0]
    times = harness.generation_times(samples=2)
    assert list(times) == INSTALLED and all(len(v) == 2 and min(v) > 0 for v in times.values())


def test_sampled_is_asvs_sampled_result_form():
    """asv's runner reads a result dict with `samples` and `number` as a sampled one (asv.runner); anything
    else is a lone value judged by the factor alone."""
    assert harness.sampled(np.array([0.5, 2.0])) == {"samples": [0.5, 2.0], "number": 1}
    assert harness.sampled([[1, 2], [3, 4]])["samples"] == [1.0, 2.0, 3.0, 4.0]
    with pytest.raises(ValueError, match="at least one sample"):
        harness.sampled([])


def test_asv_keeps_a_tracks_samples_and_merges_them_over_rounds():
    """The protocol `sampled` relies on, checked against the asv installed here: the runner's parsing of a
    benchmark's result file, and results.add_result appending a later round's samples."""
    asv_runner = pytest.importorskip("asv.runner")
    from asv import results as asv_results

    src = inspect.getsource(asv_runner)
    assert "'samples' in data and 'number' in data" in src  # a sampled result, whatever the benchmark type
    assert "append_samples" in inspect.signature(asv_results.Results.add_result).parameters


def test_relative_divides_each_sample_by_the_reference_in_the_same_sample(monkeypatch):
    seen = {}

    def round_robin(calls, samples, number):
        seen["calls"] = list(calls)
        return {"a": np.array([2.0, 9.0]), "b": np.array([1.0, 3.0]), harness.REFERENCE: np.array([0.5, 3.0])}

    monkeypatch.setattr(harness, "round_robin", round_robin)
    out = harness.relative({"a": None, "b": None}, samples=2, number=1)
    assert seen["calls"] == ["a", "b", harness.REFERENCE]
    assert out["a"].tolist() == [4.0, 3.0] and out["b"].tolist() == [2.0, 1.0] and set(out) == {"a", "b"}


def test_the_reference_kernel_is_fixed_and_needs_no_package():
    out = harness.reference()()
    assert out.shape == (1, 65) and np.isclose(out.sum(), 1.0)
    assert np.array_equal(out, harness.reference()())  # seeded weights, the same computation every call
    src = inspect.getsource(harness.reference)
    assert "specdec" not in src and "common." not in src


def test_drafts_are_made_from_their_backends_target():
    assert common.target("fused") is not common.target() is common.target("eager")
    assert common.draft("int8", "fused") is not common.draft("int8") is common.draft("int8", "eager")
    assert common.available(["bigram", "no-such-draft"], "fused") == ["bigram"]


def test_a_missing_draft_skips(monkeypatch):
    with pytest.raises(NotImplementedError):
        common.draft("no-such-draft")
    assert common.available(["bigram", "no-such-draft"]) == ["bigram"]


def test_every_benchmark_runs_or_skips_at_head():
    """tools/check_history.py on the newest commit: the whole suite, shrunk, as `asv run --quick` calls it."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "check_history.py"), "--since", "HEAD",
                           "--verbose"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    # without SPECDEC_DRAFT the "user" draft's parameter sets skip; a backend not installed here skips too; the
    # work benchmarks count only their pass and draft rows in a smoke run (all skip without a counter)
    skipped = (str(_user_parameter_sets() + _smoke_work_skips()) if INSTALLED == common.BACKENDS
               else r"[1-9]\d*")
    assert re.search(rf"1 commits: ok \d+, skipped {skipped}, failed 0", proc.stdout), proc.stdout


def _smoke_work_skips() -> int:
    """bench_work's parameter sets a smoke run skips: those whose rows are not the pass or a draft's proposal
    (`counted.work_counts` counts only "pass 1" and "draft D" under SPECDEC_BENCH_SMOKE), or all where no counter
    runs here."""
    from benchmarks import bench_work
    from specdec.measure.work import work

    rows = {"WorkPass": ["pass 1", "verify 5"], "WorkDraft": ["draft bigram", "draft ngram"],
            "WorkRound": ["round bigram k=4", "round ngram k=4"],
            "WorkGeneration": ["target-only", "spec bigram k=4", "spec ngram k=4"]}
    assert set(rows) == {n for n in vars(bench_work) if n.startswith("Work")}
    every = [r for names in rows.values() for r in names]
    if work.probe().kind is None:
        return len(every)
    return sum(not r.startswith(("pass", "draft")) for r in every)


def _user_parameter_sets() -> int:
    """How many (benchmark, parameter set) pairs of the suite name the draft "user"."""
    n = 0
    for path in sorted((ROOT / "benchmarks").glob("bench_*.py")):
        module = importlib.import_module(f"benchmarks.{path.stem}")
        for cls in vars(module).values():
            if not (inspect.isclass(cls) and cls.__module__ == module.__name__ and hasattr(cls, "params")):
                continue
            lists = cls.params if isinstance(cls.params, tuple) or (cls.params and isinstance(cls.params[0], list)) \
                else (cls.params,)
            combos = sum(common.USER in combo for combo in itertools.product(*lists))
            n += combos * sum(name.startswith(("track_", "time_", "timeraw_", "mem_", "peakmem_")) for name in dir(cls))
    return n


def test_the_suite_measures_the_users_pair_when_asked(hf_exported):
    """SPECDEC_TARGET and SPECDEC_DRAFT (the exported pair here): every benchmark runs or skips, none fails, and
    the draft "user" runs (the parameter sets that ran include it)."""
    env = dict(os.environ, SPECDEC_TARGET=f"hf:{hf_exported['target']}", SPECDEC_DRAFT=f"hf:{hf_exported['small']}",
               HF_HUB_OFFLINE="1")
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "check_history.py"), "--since", "HEAD"],
                          capture_output=True, text=True, cwd=ROOT, timeout=600, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    ok = int(re.search(r"1 commits: ok (\d+), skipped \d+, failed 0", proc.stdout).group(1))
    assert ok >= 40, proc.stdout  # eager only, bigram/ngram/user: far fewer than the shipped model's, but many
