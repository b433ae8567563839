"""The asv suite's work benchmarks: `counted.work_counts` counts a commit as `specdec ab` counts a revision (the
running checkout's `work_pool`, by path; the figure the mean of `fewest` over the layouts), a skip names what is
missing, and asv.conf.json installs the counter's hooks and gives the work and time families their own
regression thresholds. The counting itself is replaced by a recording stand-in here (callgrind for real:
tests/measure/work/test_work.py, tests/measure/ab/test_ab.py)."""

import inspect
import itertools
import tomllib
from pathlib import Path
from types import SimpleNamespace

import pytest
from asv import util as asv_util
from asv.plugins.regressions import _GraphDataFilter
from asv_runner.discovery import disc_benchmarks

import specdec
from benchmarks import bench_work, common, counted, harness, pairs
from specdec.measure.ab import ab_work

ROOT = Path(__file__).resolve().parents[1]
WORK_THRESHOLD, EXACT_THRESHOLD, MEMORY_THRESHOLD, TIME_THRESHOLD = 0.0025, 0.0, 0.05, 0.1
EXACT = ("track_rejection", "track_passes_per_char", "track_exactness_failed", "track_weight_bytes")


def _family(name: str) -> float:
    """The threshold a graph's kind of figure calls for, from its name alone."""
    method = name.split("(")[0].split(".")[2]
    if name.startswith("bench_work."):
        return WORK_THRESHOLD
    if method in EXACT:
        return EXACT_THRESHOLD
    return MEMORY_THRESHOLD if method.startswith("peakmem_") else TIME_THRESHOLD


def _conf() -> dict:
    return asv_util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)  # asv's own loader: // comments


def _threshold(thresholds: dict, entry_name: str) -> float:
    """The threshold asv's `asv publish` applies to a graph (its own code: the largest of the patterns that match)."""
    me = SimpleNamespace(conf=SimpleNamespace(regressions_thresholds=thresholds))
    return _GraphDataFilter._get_threshold(me, SimpleNamespace(params={}), None, entry_name)


def _entry_names() -> list[str]:
    """Every graph asv publishes for the suite: a benchmark's name with each of its parameter combinations, as
    asv's regression search names it."""
    names = []
    for b in disc_benchmarks(str(ROOT / "benchmarks")):
        if b.params:
            names += [f"{b.name}({', '.join(p)})" for p in itertools.product(*b.params)]
        else:
            names.append(b.name)
    return names


def test_every_graph_gets_its_kinds_threshold_exact_work_memory_or_time():
    thresholds = _conf()["regressions_thresholds"]
    names = _entry_names()
    work = [n for n in names if n.startswith("bench_work.")]
    # 2 pass rows, 2 drafts, 2 round rows, 3 generations: every work benchmark is in the family
    assert len(work) == 9 and {n.split(".")[1] for n in work} == {n for n in vars(bench_work) if n.startswith("Work")}
    wrong = {n: _threshold(thresholds, n) for n in names if _threshold(thresholds, n) != _family(n)}
    assert not wrong, wrong
    assert {_family(n) for n in names} == {WORK_THRESHOLD, EXACT_THRESHOLD, MEMORY_THRESHOLD, TIME_THRESHOLD}


@pytest.mark.parametrize("name,expected", [
    ("bench_work.WorkPass.track_instructions(1, 'pass 1')", WORK_THRESHOLD),
    ("bench_work.WorkPass.track_instructions(1, 'pass 1')@main", WORK_THRESHOLD),  # a graph per branch
    ("bench_workload.WorkloadSpeedup.track_time_ratio(1, 'bigram', 4)", TIME_THRESHOLD),  # not bench_work's
    ("bench_drafts.DraftCost.track_c(1, 'eager', 'bigram')", TIME_THRESHOLD),
    ("bench_speedup.Speedup.track_rejection('bigram', 4)", EXACT_THRESHOLD),
    ("bench_speedup.Speedup.track_rejection_rate('bigram', 4)", TIME_THRESHOLD),  # a name only beginning alike
    ("bench_generation.Memory.peakmem_generate(1)", MEMORY_THRESHOLD),
])
def test_the_families_do_not_overlap(name, expected):
    assert _threshold(_conf()["regressions_thresholds"], name) == expected


def test_asvs_environments_install_the_work_counters_hooks_at_the_work_extras_floor():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["work"]
    floor = next(r.split(">=")[1] for r in extra if r.startswith("pytest-codspeed>="))
    req = _conf()["matrix"]["req"]
    assert req["pytest-codspeed"] == [floor] and "threadpoolctl" in req
    pinned = asv_util.ParsedPipDeclaration(f"pytest-codspeed {floor}")  # how asv's virtualenv plugin installs it
    assert (pinned.pkgname, pinned.specification) == ("pytest-codspeed", f"=={floor}")


def test_the_harness_counts_with_abs_layouts_length_and_config():
    assert counted.WORK_LAYOUTS == list(ab_work.LAYOUTS) and counted.WORK_CHARS == ab_work.COUNT_CHARS


@pytest.mark.parametrize("chars,smoke", [(200, False), (20, True), (5, False)])
def test_the_counting_config_is_abs(monkeypatch, chars, smoke):
    monkeypatch.setattr(common, "CHARS", chars)
    monkeypatch.setattr(common, "SMOKE", smoke)
    got = counted.work_config("onnx")
    base = {**got, "count": False, "chars": chars, "threads": 4}
    assert got == ab_work.counting_config(base)
    assert got["chars"] == min(chars, 12) and got["threads"] == 1 and got["count"] is True
    assert got["only"] == (["pass", "draft"] if smoke else list(ab_work.ROW_KINDS))


def _count(fewest: int, alloc: int) -> dict:
    return {"fewest": fewest, "alloc": alloc, "counts": [], "warmup": 24, "spread": 0.0}


class FakePool:
    """`work_pool.count_trees` stand-in: records its call (bound to the real signature) and answers in its shape.
    verify 5 cannot be built at this commit; the smoke config builds the pass and draft rows only."""

    def __init__(self, real):
        self.real, self.calls = real, []

    def __call__(self, *args, **kw):
        bound = inspect.signature(self.real).bind(*args, **kw)
        self.calls.append(bound.arguments)
        layouts, smoke = bound.arguments["layouts"], bound.arguments["config"]["only"] == ["pass", "draft"]
        per = {"pass 1": [1000, 1003, 1006], "draft bigram": [400, 401, 402], "draft ngram": [300, 300, 303],
               "round bigram k=4": [8000, 8004, 8008], "target-only": [90000, 90003, 90006]}
        answers = {"pass 1": {"ok": True, "reason": "", "facts": {}},
                   "verify 5": {"ok": False, "reason": "AttributeError: no verify here", "facts": {}},
                   "draft bigram": {"ok": True, "reason": "", "facts": {}},
                   "draft ngram": {"ok": True, "reason": "", "facts": {}}}
        if not smoke:
            answers["round bigram k=4"] = {"ok": True, "reason": "", "facts": {"rounds": 4}}
            answers["target-only"] = {"ok": True, "reason": "", "facts": {}}
        rows = {r: {"C": [_count(f, 7 * f) for f in v[:len(layouts)]]} for r, v in per.items()
                if answers.get(r, {}).get("ok")}
        return {"rows": rows, "answers": {"C": answers}, "seconds": 1.0, "layouts": list(layouts)}


@pytest.fixture
def pool(monkeypatch):
    monkeypatch.setattr(common, "USER_TARGET", None)
    work = harness.method("work/work.py")
    monkeypatch.setattr(work, "probe", lambda want="auto": work.Availability("callgrind", work.NAMES["callgrind"]))
    module = harness.method("work/work_pool.py")
    fake = FakePool(module.count_trees)
    monkeypatch.setattr(module, "count_trees", fake)
    return fake


def test_work_counts_is_the_mean_of_fewest_over_the_layouts_of_the_installed_package(monkeypatch, pool):
    monkeypatch.setattr(common, "SMOKE", False)
    out = counted.work_counts.__wrapped__("onnx")
    (call,) = pool.calls
    assert call["trees"] == {"C": str(Path(specdec.__file__).resolve().parents[1])}  # the package's folder
    assert call["layouts"] == [1, 2, 3] and call["jobs"] in (1, 2) and call["kind"] == "callgrind"
    assert call["config"] == counted.work_config("onnx") and call["rows"] == counted.WORK_ROWS
    assert out["rows"] == {"pass 1": 1003.0, "draft bigram": 401.0, "draft ngram": 301.0,
                           "round bigram k=4": 2001.0,  # 8004 per generation over its 4 rounds
                           "target-only": 90003.0}  # the allocators' figure (alloc) is not the work figure
    assert out["reasons"]["verify 5"] == "AttributeError: no verify here"
    assert out["counter"].startswith("Ir (callgrind")
    cache = out
    assert bench_work.WorkDraft().track_instructions_per_token(cache, 1, "bigram") == 100.25
    assert bench_work.WorkRound().track_instructions_per_round(cache, 1, "bigram") == 2001.0
    bench_work.WorkPass().setup(cache, 1, "pass 1")
    with pytest.raises(NotImplementedError, match="'verify 5' not counted: AttributeError: no verify here"):
        bench_work.WorkPass().setup(cache, 1, "verify 5")


def test_a_smoke_run_counts_the_pass_and_draft_rows_in_one_layout(monkeypatch, pool):
    monkeypatch.setattr(common, "SMOKE", True)
    out = counted.work_counts.__wrapped__("onnx")
    assert pool.calls[0]["layouts"] == [1] and pool.calls[0]["config"]["only"] == ["pass", "draft"]
    assert out["rows"] == {"pass 1": 1000.0, "draft bigram": 400.0, "draft ngram": 300.0}
    with pytest.raises(NotImplementedError, match="smoke run counts the pass and draft rows only"):
        bench_work.WorkGeneration().setup(out, 1, "target-only")


def test_a_smoke_run_of_a_users_pair_counts_nothing_and_says_so(monkeypatch, pool):
    monkeypatch.setattr(common, "SMOKE", True)
    monkeypatch.setattr(common, "USER_TARGET", "hf:/some/model")
    out = counted.work_counts.__wrapped__("onnx")
    assert not pool.calls and out["counter"] is None
    with pytest.raises(NotImplementedError, match="SPECDEC_TARGET"):
        bench_work.WorkPass().setup(out, 1, "pass 1")


def test_without_a_counter_every_work_benchmark_skips_naming_what_is_missing(monkeypatch):
    work = harness.method("work/work.py")
    missing = "callgrind: pytest-codspeed's instrument hooks are not installed (pip install 'pytest-codspeed>=5.0.4')"
    monkeypatch.setattr(work, "probe", lambda want="auto": work.Availability(None, "unavailable", missing))
    out = counted.work_counts.__wrapped__("onnx")
    assert out == {"counter": None, "reason": missing}
    for cls, arg in [(bench_work.WorkPass, "pass 1"), (bench_work.WorkDraft, "bigram"),
                     (bench_work.WorkRound, "ngram"), (bench_work.WorkGeneration, "target-only")]:
        with pytest.raises(NotImplementedError) as exc:
            cls().setup(out, 1, arg)
        assert missing in str(exc.value) and "no valgrind" not in str(exc.value)


def test_the_harness_loads_the_method_by_path_once():
    """work_pool, work and ab_worker from the running checkout's specdec/measure, never the commit's package;
    work.py one module object whoever loads it (work_pool's own loader finds the harness's)."""
    pool = harness.method("work/work_pool.py")
    assert Path(pool.__file__).resolve() == ROOT / "specdec" / "measure" / "work" / "work_pool.py"
    assert pool._work() is harness.method("work/work.py") and harness.method("work/work_pool.py") is pool
    assert pairs.BATCH == harness.method("ab_rows.py").BATCH
