"""The asv suite: every tracked figure lower-is-better and documented, only the public API used, asv's style,
and the harness's method on stand-in calls (nothing here is timed against a threshold)."""

import ast
import importlib
import inspect
import itertools
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import benchmarks
from benchmarks import common, harness

ROOT = Path(__file__).resolve().parent.parent
SUITE = sorted((ROOT / "benchmarks").glob("bench_*.py"))
PUBLIC_API = {"load_target", "make_draft", "generate", "speculative_generate", "encode", "load_workload", "TreeSpec"}
KINDS = ("time_", "track_", "peakmem_", "mem_", "timeraw_")


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
    assert {"time_forward", "time_draft_character", "time_generate", "time_speculative_generate"} <= names
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
    """No specdec.timing, specdec.stats or other internals: the method must not change with the commit."""
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
    for cls in _classes():
        for values in (cls.params if isinstance(cls.params, tuple) else (cls.params,)):
            assert isinstance(values, list) and values, cls.__name__
    assert common.KS == [1, 4, 8] and common.POSITIONS == [2, 5, 9]


def test_the_clock_is_thread_cpu_time_with_one_thread_where_it_ticks_finely():
    import time

    assert common.CLOCK in (time.thread_time, time.perf_counter)
    if common.THREADS != 1:
        assert common.CLOCK is time.perf_counter


def test_round_robin_rotates_and_keeps_per_call_seconds():
    order = []
    calls = {name: (lambda name=name: order.append(name)) for name in "abc"}
    out = harness.round_robin(calls, samples=2, number=3, warmup=1)
    assert set(out) == set("abc") and all(v.shape == (2,) and (v >= 0).all() for v in out.values())
    assert order[:9] == list("abcbcacab")  # each round starts one later


def test_pair_alternates_and_median_ratio_is_per_sample():
    order = []
    assert harness.pair(lambda: order.append("a"), lambda: order.append("b"), b_first=True) > 0
    assert order == ["b", "a"]
    assert harness.median_ratio(np.array([2.0, 4.0, 9.0]), np.array([1.0, 2.0, 3.0])) == 2.0


def test_costs_and_generations_give_every_figure(monkeypatch):
    monkeypatch.setattr(common, "CHARS", 12)
    costs = harness.costs(samples=1, number=1)
    assert set(costs["c"]) == set(common.DRAFTS) and all(v > 0 for v in costs["c"].values())
    assert set(costs["verify_over_single"]) == set(common.POSITIONS)
    rows = harness.generations(pairs=1)
    assert set(rows) == {f"{n}/{k}" for n, k in itertools.product(common.DRAFTS, common.KS)}
    for row in rows.values():
        assert row["chars"] == 12 and 0 < row["target_passes"] <= 12 and row["time_ratio"] > 0


def test_a_missing_draft_skips(monkeypatch):
    with pytest.raises(NotImplementedError):
        common.draft("no-such-draft")
    assert common.available(["bigram", "no-such-draft"]) == ["bigram"]


def test_every_benchmark_runs_or_skips_at_head():
    """tools/check_history.py on the newest commit: the whole suite, shrunk, as `asv run --quick` calls it."""
    proc = subprocess.run([sys.executable, str(ROOT / "tools" / "check_history.py"), "--since", "HEAD",
                           "--verbose"], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert re.search(r"1 commits: ok \d+, skipped 0, failed 0", proc.stdout), proc.stdout
