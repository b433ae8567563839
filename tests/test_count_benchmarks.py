"""tools/count_benchmarks.py: each benchmark counted by work_pool's method (its layouts, its plan), each its own count."""

import importlib.util
import json
import textwrap
from pathlib import Path

import pytest

from specdec.measure.work import work, work_pool

TOOL = Path(__file__).resolve().parents[1] / "tools" / "count_benchmarks.py"
N = 20000  # loop iterations of the short benchmark; the long one runs 2N


def load_tool():
    spec = importlib.util.spec_from_file_location("count_benchmarks_under_test", TOOL)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SUITE = """
from pathlib import Path

items = []


def test_the_checkout_is_seen_through_the_fixed_length_link():
    import specdec

    link = Path(specdec.__file__).parents[1]
    assert link.name == "A" and link.parent.name.startswith("specdec-work-"), specdec.__file__


def loop(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def test_short(benchmark):
    benchmark(loop, {n})


def test_long(benchmark):
    benchmark(loop, {twice})


def grow():  # N more iterations per call since the last `again`: each counted call does N only if `again` runs
    items.append(1)
    return loop({n} * len(items))


grow.again = items.clear


def test_again_is_honoured(benchmark):
    benchmark(grow)
"""


@pytest.mark.skipif(bool(work.callgrind_missing()), reason=work.callgrind_missing() or "callgrind runs here")
def test_one_counted_run_gives_each_benchmark_its_own_count(tmp_path, capfd):
    suite = tmp_path / "suite"
    suite.mkdir()
    (suite / "conftest.py").write_text("THREADS = 1\n")
    (suite / "test_two.py").write_text(textwrap.dedent(SUITE.format(n=N, twice=2 * N)))
    store = tmp_path / "store"
    rc = load_tool().main(["-q", "--benchmark-storage", str(store)], suite=suite)
    out, err = capfd.readouterr()
    assert rc == 0, out[-1500:] + err[-3000:]
    saved = list(store.rglob("*.json"))
    assert len(saved) == 1  # one saved run: the last layout's, holding every layout's counts
    info = {b["name"]: b["extra_info"] for b in json.loads(saved[0].read_text())["benchmarks"]}
    assert set(info) == {"test_short", "test_long", "test_again_is_honoured"}
    short, long_, again = info["test_short"], info["test_long"], info["test_again_is_honoured"]
    print("instructions:", {k: (v["instructions_layouts"], v["alloc"]) for k, v in info.items()})
    for e in (short, long_, again):
        assert e["counter"] == work.NAMES["callgrind"] and e["plan"] == list(work.PLAN["draft"])
        # counted as ab counts: one process per layout, the figure their mean
        assert len(e["instructions_layouts"]) == len(work_pool.LAYOUTS)
        assert e["instructions"] == sum(e["instructions_layouts"]) / len(work_pool.LAYOUTS) and e["alloc"] >= 0
    # the old bug: every benchmark after the first read the first one's dumps, so all showed one figure
    assert short["instructions"] != long_["instructions"]
    assert 1.9 < long_["instructions"] / short["instructions"] < 2.1  # twice the loop, twice the work
    # with `again` every counted call of grow runs N iterations (without it the 5th to 8th calls run 5N to 8N)
    assert 0.99 < again["instructions"] / short["instructions"] < 1.01


def test_a_suite_not_at_one_thread_is_refused_before_any_work(tmp_path, capsys, monkeypatch):
    tool = load_tool()
    monkeypatch.setattr(tool.work, "popen", lambda *a, **k: pytest.fail("a counted process was started"))
    (tmp_path / "conftest.py").write_text("import os\nTHREADS = 4  # per benchmark\n")
    assert tool.main([], suite=tmp_path) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "THREADS = 4" in err[0] and "needs 1" in err[0]


def test_the_shipped_suite_counts_at_one_thread():
    assert load_tool().suite_threads(TOOL.parents[1] / "tests" / "benchmarks") == 1


def test_the_counted_callable_keeps_prepare_and_again():
    tool = load_tool()
    seen = []

    def fn(a, b=0):
        seen.append((a, b))

    fn.prepare, fn.again = (lambda: "p"), (lambda: "a")
    call = tool.bound(fn, (1,), {"b": 2})
    call()
    assert seen == [(1, 2)] and call.prepare() == "p" and call.again() == "a"
    assert not hasattr(tool.bound(len, ([],), {}), "prepare")


def test_a_benchmarks_kind_picks_its_plan():
    tool = load_tool()
    assert [tool.kind(n) for n in ("test_target_pass[eager-1]", "test_speculative_generation[onnx-bigram-4]",
                                   "test_draft_character[ngram]", "test_short")] == ["pass", "generation", "draft",
                                                                                      "draft"]
