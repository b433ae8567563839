"""`specdec ab`: the statistics by hand, the revisions' checkouts, bad input, and one real run of two trees."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import specdec
from specdec.cli.commands import main
from specdec.measure.ab import ab, ab_stats, ab_work
from specdec.measure.work import work
from specdec.measure.ab.ab_sources import Source, SourceError, sources
from specdec.report.ab import ab_render
from tests import feature_draft

PACKAGE = Path(specdec.__file__).parent


# --- statistics ------------------------------------------------------------------------------------------


def test_a_pairs_estimate_is_its_trimmed_mean():
    # 10 samples, 20 % cut from each end: the two lowest and two highest go, the mean of the middle six stays
    logs = [[-0.9, -0.5, 0.01, 0.02, 0.03, 0.03, 0.02, 0.01, 0.4, 0.8]]
    assert ab_stats.pair_estimates(logs) == pytest.approx([(0.01 + 0.02 + 0.03 + 0.03 + 0.02 + 0.01) / 6])


def test_row_test_is_a_t_test_over_the_pairs():
    logs = [[0.01, 0.01], [0.03, 0.03], [0.02, 0.02]]  # pair estimates 0.01, 0.03, 0.02: mean 0.02, sd 0.01
    se = 0.01 / math.sqrt(3)
    t = ab_stats.row_test(logs, m=1, tau=0.0)
    assert t["pairs"] == 3 and t["samples"] == 6
    assert t["change"] == pytest.approx(math.expm1(0.02))
    assert t["p"] == pytest.approx(2 * stats.t.sf(0.02 / se, 2))
    half = stats.t.isf(0.025, 2) * se
    assert t["ci95"] == pytest.approx([math.expm1(0.02 - half), math.expm1(0.02 + half)])
    # flagged with 80 % probability: the threshold's quantile plus t_0.2 (a 50 % chance would be the threshold alone)
    assert t["detectable"] == pytest.approx(math.expm1((stats.t.isf(0.005, 2) + stats.t.isf(0.2, 2)) * se))
    assert t["verdict"] == "same"  # t = 3.46 with 2 degrees of freedom: p = 0.074


def test_the_between_run_term_widens_the_test_and_keeps_its_doubt_in_the_pairs():
    logs = [[0.01, 0.01], [0.03, 0.03], [0.02, 0.02]]  # se = 0.01 / sqrt(3), 2 degrees of freedom
    se = 0.01 / math.sqrt(3)
    t = ab_stats.row_test(logs, m=1, tau=0.004)
    sd = math.sqrt(se**2 + 0.004**2)
    dof = sd**4 / (se**4 / 2)  # Welch-Satterthwaite: tau is known, only se is estimated
    assert t["dof"] == pytest.approx(dof) and t["se"] == pytest.approx(se)
    assert t["p"] == pytest.approx(2 * stats.t.sf(0.02 / sd, dof))
    assert t["detectable"] == pytest.approx(math.expm1((stats.t.isf(0.005, dof) + stats.t.isf(0.2, dof)) * sd))
    # tau widens the standard deviation but, being known, raises the degrees of freedom above the pairs' 2
    assert sd > se and t["dof"] > 2
    assert t["pair_estimates"] == pytest.approx([0.01, 0.03, 0.02])


@pytest.mark.parametrize("shift, verdict", [(0.05, "worse"), (-0.05, "better"), (0.0, "same")])
def test_the_verdict_follows_the_sign_at_the_bonferroni_threshold(shift, verdict):
    logs = [[shift + d, shift + d] for d in (-0.001, 0.0, 0.001, 0.0, 0.0005, -0.0005)]
    t = ab_stats.row_test(logs, m=14)
    assert t["verdict"] == verdict
    assert (t["p"] < 0.01 / 14) == (verdict != "same")


def test_bonferroni_makes_more_rows_need_a_smaller_p():
    logs = [[0.02 + d] * 2 for d in (-0.004, 0.0, 0.004, 0.002, -0.002)]  # t = 14.1, 4 dof: p = 1.5e-4
    assert ab_stats.row_test(logs, m=1)["verdict"] == "worse"
    assert ab_stats.row_test(logs, m=100)["verdict"] == "same"  # 1e-4 threshold


def test_yuens_variance_bounds_a_pairs_trimmed_mean():
    # 5 samples, 20 % trimmed: g = 1 cut each end, h = 3 kept; winsorized 0.01, 0.01, 0.02, 0.03, 0.03 (mean 0.02,
    # s_w^2 = 4e-4 / 4 = 1e-4); Yuen: (n - 1) s_w^2 / (h (h - 1)) = 4e-4 / 6, with h - 1 = 2 degrees of freedom
    assert ab_stats.within_se([[0.0, 0.01, 0.02, 0.03, 0.10]]) == pytest.approx((math.sqrt(4e-4 / 6), 2))
    # two pairs: the mean of two estimates has (v1 + v2) / 4; a one-sample pair adds nothing but counts in P
    v1, v2 = 0.1**2 / 2 / 2, 0.092**2 / 2 / 2  # n = 2: nothing trimmed, s^2 / 2
    assert ab_stats.within_se([[0.076, -0.024], [-0.02, 0.072]]) == pytest.approx((math.sqrt(v1 + v2) / 2, 2))
    assert ab_stats.within_se([[0.076, -0.024], [0.3]]) == pytest.approx((math.sqrt(v1) / 2, 1))
    assert ab_stats.within_se([[0.1], [0.2]]) == (0.0, 0)


def test_two_pairs_that_agree_by_chance_are_not_a_change():
    # the A/A that flagged `round` +2.6 % (p = 6e-5) in a CI run: two pairs of two samples, their estimates equal to
    # 0.1 % while each pair's own samples lay 10 % apart. Their spread says se ~ 0; their samples say 3.4 %.
    logs = [[0.076, -0.024], [-0.02, 0.072]]
    t = ab_stats.row_test(logs, m=6)
    floor = math.sqrt(0.1**2 / 4 + 0.092**2 / 4) / 2
    assert t["se"] == pytest.approx(floor) and t["se_floor"] == pytest.approx(floor)
    sd = math.hypot(floor, ab_stats.TAU)
    assert t["dof"] == pytest.approx(sd**4 / (floor**4 / 2))
    assert t["p"] == pytest.approx(2 * stats.t.sf(0.026 / sd, t["dof"]))
    assert t["verdict"] == "same" and t["detectable"] > 0.5


def test_the_false_alarm_rate_of_few_pairs_is_the_nominal_one():
    # A/A rows of 2 pairs x 2 samples, log ratios N(0, 8 %) (a short run's samples): the rule flags at most its
    # nominal 0.01 / 6 per row. Without the floor on the pairs' spread it flagged 6.2 % of them (seed 0, 4000 rows).
    rng = np.random.default_rng(0)
    flagged = sum(ab_stats.row_test([list(rng.normal(0, 0.08, 2)) for _ in range(2)], m=6)["verdict"] != "same"
                  for _ in range(4000))
    assert flagged <= 4000 * 0.01 / 6 * 1.5  # 10 here; binomial sd at the nominal rate is 2.6


def test_the_generation_and_verify_rows_are_counted_at_the_largest_k():
    rows = ["target-only", "pass 1", "verify 3", "verify 5", "draft bigram", "draft ngram", "spec bigram k=2",
            "spec bigram k=4", "spec ngram k=2", "round bigram k=2", "round bigram k=4", "round ngram k=2",
            "spec-batch8 bigram k=2", "spec-batch8 bigram k=4"]
    assert ab_work.largest_k(rows) == ["target-only", "pass 1", "verify 5", "draft bigram",
                                       "draft ngram", "spec bigram k=4", "spec ngram k=2", "round bigram k=4",
                                       "round ngram k=2", "spec-batch8 bigram k=4"]
    # one k: nothing left out; the verify pass of k = 1 (2 positions) is its own largest
    assert ab_work.largest_k(["pass 1", "verify 2", "spec bigram k=1"]) == ["pass 1", "verify 2", "spec bigram k=1"]


def test_one_pair_gives_no_verdict():
    t = ab_stats.row_test([[0.1, 0.1, 0.1]], m=1)
    assert t["verdict"] == "too few pairs" and t["p"] is None and math.isinf(t["detectable"])


def test_spreads_split_within_from_between_pairs():
    # within each pair the samples are ±0.01 around the pair's mean: within sd = sqrt(0.0002 / 1) per pair
    logs = [[0.0, 0.02], [0.10, 0.12], [0.20, 0.22]]
    s = ab_stats.spreads(logs)
    assert s["within_sd"] == pytest.approx(math.sqrt(0.0002))
    # the pair means 0.01, 0.11, 0.21 have variance 0.01; the within noise explains 0.0002 / 2 of it
    assert s["between_sd"] == pytest.approx(math.sqrt(0.01 - 0.0001))


def test_explain_accounts_for_a_speculative_row_by_its_terms():
    tests = {"spec bigram k=4": {"change": 0.03}, "draft bigram": {"change": 0.10},
             "round bigram k=4": {"change": 0.0}, "verify 5": {"change": 0.0}, "pass 1": {"change": 0.001}}
    seconds = {"spec bigram k=4": {"a": [10.0, 10.0, 10.0]}, "round bigram k=4": {"a": [7.0, 7.0, 7.0]}}
    why = ab_stats.explain("spec bigram k=4", tests, seconds)
    assert why["draft_share"] == pytest.approx(0.3)
    assert why["accounted"] == pytest.approx(math.expm1(0.3 * math.log(1.1)))
    assert list(why["terms"]) == ["draft bigram", "round bigram k=4", "verify 5", "pass 1"]
    assert ab_stats.explain("target-only", tests, seconds) == {"terms": {"pass 1": 0.001}}
    assert ab_stats.explain("draft bigram", tests, seconds) is None


# --- the document and its exit code -------------------------------------------------------------------------


def _fake_run(shift: dict[str, float], facts_b: dict | None = None) -> ab.Run:
    """A run whose rows moved by `shift` (log ratio) in each of five pairs, with a tiny spread."""
    run = ab.Run({"backend": "onnx", "target": None})
    for name, s in shift.items():
        facts = {"target_passes": 30} if name.startswith("spec") else {}
        run.rows[name] = {"a": {"ok": True, "reason": "", "facts": facts},
                          "b": {"ok": True, "reason": "", "facts": (facts_b or {}).get(name, facts)}}
        run.numbers[name] = 1
        run.logs[name] = [[s + d, s - d] for d in (0.001, 0.002, 0.003, 0.0015, 0.0025)]
        run.seconds[name] = {"a": [1e-3] * 10, "b": [1e-3 * math.exp(s)] * 10}
    run.rows["draft ngram"] = {"a": {"ok": True, "reason": "", "facts": {}},
                               "b": {"ok": False, "reason": "UnknownDraftError: no ngram", "facts": {}}}
    run.pairs = [{"a": {"threads": {"torch": 1, "blas": 1}, "clock": "thread_time"}, "b": {}}] * 5
    return run


def test_the_document_names_worse_rows_behaviour_and_unavailable_ones():
    run = _fake_run({"draft bigram": 0.09, "round bigram k=4": 0.0, "spec bigram k=4": 0.03,
                     "verify 5": 0.0, "pass 1": 0.0}, facts_b={"spec bigram k=4": {"target_passes": 31}})
    a, b = Source("A", "main", "/a", "a" * 40), Source("B", "HEAD", "/b", "b" * 40)
    doc = ab_render.document(run, a, b, cpu=1)
    assert doc["worse"] == ["draft bigram", "spec bigram k=4"]
    assert doc["rows"]["round bigram k=4"]["verdict"] == "same"
    assert doc["behaviour_changed"] == [{"row": "spec bigram k=4", "changed": {"target_passes": [30, 31]}}]
    assert doc["unavailable"] == {"draft ngram": {"b": "UnknownDraftError: no ngram"}}
    out = ab_render.text(doc)
    assert "why spec bigram k=4 +3.0%: draft bigram +9.4% (worse), round bigram k=4 +0.0% (same)" in out
    assert "behaviour changed: spec bigram k=4: target_passes 30 -> 31" in out
    assert "unavailable: draft ngram: B: UnknownDraftError: no ngram" in out
    assert out.splitlines()[-1] == "WORSE: draft bigram +9.4%, spec bigram k=4 +3.0%"
    json.dumps(doc)  # --json writes it as it is


def _layouts(*ns: int) -> list[dict]:
    """One Count dict per layout, the figure `fewest` as given."""
    return [{"fewest": n, "alloc": 1000, "counts": [{"total": n + 1000, "alloc": 1000, "lookup": 0, "work": n}],
             "warmup": 24, "spread": 0.0} for n in ns]


# a calibration as work_calibration.fit gives it: every row's layouts spread 0.02 % (relative), no build term
CAL = {"id": "c0", "path": "/cal.json", "trees": {"aa-1": "", "null-1": ""},
       "rows": {n: {"sigma_l": 0.0002, "df_l": 32, "ms_between": 0.0002**2, "df_b": 16, "layouts": 3, "trees": 17, "largest": 0.0}
                for n in ("pass 1", "draft bigram", "verify 5")}}


def test_the_work_rows_stand_beside_the_timing_rows_and_say_where_they_disagree():
    """pass 1: time worse, work the same (a cache or dispatch effect); draft bigram: 0.6 % more work that time
    could not see; verify 5: the same either way. Judged by the calibration: the change of two means of 3 layouts
    has sd 0.02 % x sqrt(2/3) on the calibration's 32 degrees of freedom, and the threshold is t at 1 % over the
    6 rows (3 timed, 3 counted: one family) times that: 0.056 %."""
    run = _fake_run({"pass 1": 0.05, "draft bigram": 0.0, "verify 5": 0.0})
    work_doc = {"counter": "callgrind", "name": "Ir (callgrind)", "seconds": 95.0, "layouts": [1, 2, 3], "chars": 12,
                "rows": {"pass 1": {"a": _layouts(700000, 700000, 700000), "b": _layouts(700350, 700350, 700350)},
                         "draft bigram": {"a": _layouts(50000, 50000, 50000), "b": _layouts(50300, 50300, 50300)},
                         "verify 5": {"a": _layouts(1000000, 1000000, 1000000),
                                      "b": _layouts(1000000, 1000000, 1000000)}},
                "largest_k_only": ["spec bigram k=2", "round bigram k=2"], "calibration": CAL}
    doc = ab_render.document(run, Source("A", "main", "/a", None), Source("B", "HEAD", "/b", None), cpu=1,
                             work=work_doc)
    threshold = stats.t.isf(0.01 / 6 / 2, 32) * 0.0002 * math.sqrt(2 / 3)
    assert doc["tested"] == 6 and doc["work"]["rows"]["pass 1"]["threshold"] == pytest.approx(threshold)
    assert round(threshold, 6) == 0.000561
    assert doc["worse"] == ["pass 1"] and doc["work"]["worse"] == ["draft bigram"]  # pass 1: +0.05 % < 0.056 %
    assert {r["row"]: (r["work"], r["time"]) for r in doc["work"]["disagree"]} == {
        "pass 1": ("same", "worse"), "draft bigram": ("worse", "same")}
    out = ab_render.text(doc)
    assert "draft bigram                   50,000         50,300   +0.600%     0.06%    0.07%  worse   " in out
    assert "calibrated on 2 A/A and null-change trees counted apart (/cal.json)" in out
    assert "work and time disagree: draft bigram: work worse while time stayed within its interval" in out
    assert "work and time disagree: pass 1: time worse with the same work: a cache, memory-layout" in out
    assert ("timed, counted at the largest k only (the same code at every k): spec bigram k=2, "
            "round bigram k=2; --count-all-ks counts them") in out
    assert out.splitlines()[-1] == "WORSE (work): draft bigram +0.6%"


def test_work_rows_that_cannot_run_say_why_and_a_named_counter_that_cannot_is_bad_input(monkeypatch):
    from types import SimpleNamespace

    from specdec.cli.checks import UsageError, work_plan

    monkeypatch.setattr(work, "probe", lambda want="auto": work.Availability(None, "unavailable", "perf: no PMU"))
    assert work_plan(SimpleNamespace(work=True, counter="auto"), {}) == (None, "perf: no PMU")
    assert work_plan(SimpleNamespace(work=False, counter="auto"), {}) == (None, "left out (--no-work)")
    with pytest.raises(UsageError, match=r"^--counter perf: perf: no PMU$"):
        work_plan(SimpleNamespace(work=True, counter="perf"), {})
    doc = ab_render.document(_fake_run({"pass 1": 0.0}), Source("A", "a", "/a", None), Source("B", "b", "/b", None),
                             cpu=1, work=ab_work.unavailable("perf: no PMU"))
    assert "work rows unavailable: perf: no PMU" in ab_render.text(doc) and not doc["work"]["worse"]


@pytest.mark.parametrize("shift, code", [(0.05, 1), (0.0, 0), (-0.05, 0)])
def test_ab_exits_1_only_when_a_row_got_worse(monkeypatch, capsys, tmp_path, shift, code):
    monkeypatch.setattr(ab, "measure", lambda *a, **k: _fake_run({"draft bigram": shift}))
    args = ["ab", "--a-path", str(tmp_path), "--b-path", str(tmp_path), "--budget", "1", "--no-work"]
    (tmp_path / "specdec").mkdir()
    (tmp_path / "specdec" / "__init__.py").write_text("")
    assert main(args) == code
    assert ("WORSE: draft bigram" in capsys.readouterr().out) == (code == 1)


# --- bad input: one line, exit 2, before any work -------------------------------------------------------------


@pytest.mark.parametrize("argv, says", [
    (["ab", "HEAD"], "give each side once"),
    (["ab", "HEAD", "no-such-rev-xyz"], "revision 'no-such-rev-xyz' is not a commit"),
    (["ab", "--a-path", "/nonexistent", "--b-path", "/nonexistent"], "not a specdec source tree"),
    (["ab", "HEAD", "HEAD", "--budget", "0"], "--budget must be seconds in (0, 3600]"),
    (["ab", "HEAD", "HEAD", "--pairs", "1"], "--pairs must be at least 2"),
    (["ab", "HEAD", "HEAD", "--cpu", "99"], "--cpu '99': one CPU this process may use"),
    (["ab", "HEAD", "HEAD", "--drafts", "nope"], "unknown draft 'nope'"),
    (["ab", "HEAD", "HEAD", "--ks", "0"], "k must be at least 1"),
    (["ab", "HEAD", "HEAD", "--temperature", "nan"], "--temperature must be"),
])
def test_bad_input_is_one_line_and_exit_2(monkeypatch, capsys, argv, says):
    monkeypatch.setattr(ab, "measure", lambda *a, **k: pytest.fail("measured despite bad input"))
    with pytest.raises(SystemExit) as exc:
        main(argv)
    err = capsys.readouterr().err
    assert exc.value.code == 2 and says in err and len(err.strip().splitlines()) == 1


# --- the checkouts --------------------------------------------------------------------------------------------


def _git(cwd, *args) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path) -> Path:
    """A git repository with two commits of a stand-in package."""
    root = tmp_path / "repo"
    (root / "specdec").mkdir(parents=True)
    _git(root, "init", "-q")
    for n in (1, 2):
        (root / "specdec" / "__init__.py").write_text(f"VERSION = {n}\n")
        _git(root, "add", "-A")
        _git(root, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", f"v{n}")
    return root


def test_revisions_are_checked_out_outside_the_checkout_and_removed_after(repo):
    before = _git(repo, "worktree", "list")
    with sources("HEAD~1", "HEAD", cwd=repo) as (a, b):
        assert (Path(a.path) / "specdec" / "__init__.py").read_text() == "VERSION = 1\n"
        assert (Path(b.path) / "specdec" / "__init__.py").read_text() == "VERSION = 2\n"
        assert not Path(a.path).is_relative_to(repo) and a.commit == _git(repo, "rev-parse", "HEAD~1")
        paths = (a.path, b.path)
    assert not any(Path(p).exists() for p in paths)
    assert _git(repo, "worktree", "list") == before
    assert _git(repo, "status", "--porcelain") == ""


def test_an_interrupt_removes_the_checkouts_too(repo):
    with pytest.raises(KeyboardInterrupt):
        with sources("HEAD", "HEAD~1", cwd=repo) as (a, _):
            kept = a.path
            raise KeyboardInterrupt
    assert not Path(kept).exists() and len(_git(repo, "worktree", "list").splitlines()) == 1


def test_a_folder_outside_git_cannot_name_revisions(tmp_path):
    with pytest.raises(SourceError, match="not inside a git checkout"):
        with sources("HEAD", "HEAD", cwd=tmp_path):
            pass


# --- one real run: two copies of this package, B's bigram made slower and its ngram removed --------------

SLOWER_BIGRAM = '''

import time as _time


def _slowed(factory):
    def make(target, **options):
        draft = factory(target, **options)
        inner = draft.propose

        def propose(*args, **kwargs):
            end = _time.perf_counter() + 4e-4  # a busy wait: CPU time the worker's clock counts
            while _time.perf_counter() < end:
                pass
            return inner(*args, **kwargs)

        draft.propose = propose
        return draft

    return make


DRAFTS["bigram"] = _slowed(DRAFTS["bigram"])
del DRAFTS["ngram"]
'''


def test_a_real_run_finds_a_much_slower_draft_and_says_what_b_lacks(tmp_path, capsys):
    trees = {}
    for side in ("a", "b"):
        trees[side] = tmp_path / side
        shutil.copytree(PACKAGE, trees[side] / "specdec", ignore=shutil.ignore_patterns("__pycache__"))
    with open(trees["b"] / "specdec" / "decoding" / "registry.py", "a") as f:
        f.write(SLOWER_BIGRAM)
    code = main(["ab", "--a-path", str(trees["a"]), "--b-path", str(trees["b"]), "--budget", "1", "--pairs", "2",
                 "--drafts", "bigram", "ngram", "--ks", "2", "--chars", "20", "--json", "--no-work"])
    doc = json.loads(capsys.readouterr().out)
    rows = doc["rows"]
    assert set(rows) == {"target-only", "pass 1", "verify 3", "draft bigram", "spec bigram k=2",
                         "round bigram k=2", "spec-batch8 bigram k=2"}
    assert set(doc["unavailable"]) == {"draft ngram", "spec ngram k=2", "round ngram k=2", "spec-batch8 ngram k=2"}
    assert "UnknownDraftError" in doc["unavailable"]["draft ngram"]["b"]
    # +400 us on a proposal of a few tens of us: paired, B/A is far above 2 whatever the machine's load
    assert rows["draft bigram"]["change"] > 1.0
    assert doc["behaviour_changed"] == []  # slower, not different: the same exact figures
    assert len(doc["pairs"]) == 2 and all(p["sweeps"] >= ab.MIN_SWEEPS for p in doc["pairs"])
    assert {p["a"]["hash_seed"] for p in doc["pairs"]}.isdisjoint({p["b"]["hash_seed"] for p in doc["pairs"]})
    assert all(p["a"]["threads"] == {"torch": 1, "blas": 1} for p in doc["pairs"])
    assert code in (0, 1) and doc["complete"]
    assert np.isfinite(rows["spec bigram k=2"]["a_seconds"])


MORE_BIGRAM_WORK = '''

def _more_work(factory):
    def make(target, **options):
        draft = factory(target, **options)
        inner = draft.propose

        def propose(*args, **kwargs):
            s = 0
            for i in range(2000):  # a Python-level loop: more instructions, whatever the clock says
                s += i
            return inner(*args, **kwargs)

        draft.propose = propose
        return draft

    return make


DRAFTS["bigram"] = _more_work(DRAFTS["bigram"])
'''


@pytest.mark.skipif(shutil.which("valgrind") is None, reason="valgrind is not installed (apt-get install valgrind)")
def test_the_work_rows_flag_more_work_in_one_draft_and_not_the_pass(tmp_path):
    """B's bigram does a deterministic extra loop per proposal: counted under callgrind (no PMU here), its work
    row is worse and the target pass, which does not run the draft, is the same. Two rows only (the counting
    workers' setup builds no generation), so that the simulation stays short; test_work.py holds the rest."""
    pytest.importorskip("pytest_codspeed")
    trees = {}
    for side in ("a", "b"):
        trees[side] = tmp_path / side
        shutil.copytree(PACKAGE, trees[side] / "specdec", ignore=shutil.ignore_patterns("__pycache__"))
    with open(trees["b"] / "specdec" / "decoding" / "registry.py", "a") as f:
        f.write(MORE_BIGRAM_WORK)
    a, b = (Source(s.upper(), s, str(trees[s]), None) for s in ("a", "b"))
    config = {"target": None, "backend": "onnx", "dtype": None, "drafts": ["bigram"], "ks": [2], "chars": 10,
              "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1, "only": ["pass", "draft"]}
    counted = ab_work.count(a, b, config, "callgrind", ["pass 1", "draft bigram", "no such row"])
    assert counted["counter"] == "callgrind" and set(counted["rows"]) == {"pass 1", "draft bigram"}
    rows = ab_work.judge(counted)
    assert rows["draft bigram"]["verdict"] == "worse" and rows["draft bigram"]["change"] > 0.2
    assert rows["pass 1"]["verdict"] == "same" and abs(rows["pass 1"]["change"]) < 0.001  # the goal: 0.1 %
    for side in ("a", "b"):  # every layout counted, the pass's 3 warm calls in each
        assert [len(c["counts"]) for c in counted["rows"]["pass 1"][side]] == [3] * len(ab_work.LAYOUTS)


def test_a_users_hugging_face_pair_runs_through_the_same_rows(hf_exported, capsys):
    """The exported pair as --target hf:... with an hf: draft and prompt lookup, this tree on both sides (an A/A):
    every row timed on both sides, none unavailable but the batched rows (an hf target does not batch), no behaviour
    changed."""
    tree = str(PACKAGE.parent)
    target, small = f"hf:{hf_exported['target']}", f"hf:{hf_exported['small']}"
    main(["ab", "--a-path", tree, "--b-path", tree, "--target", target, "--drafts", small, "prompt-lookup",
          "--ks", "2", "--chars", "12", "--budget", "1", "--pairs", "2", "--json", "--no-work"])
    doc = json.loads(capsys.readouterr().out)
    batched = {f"spec-batch8 {small} k=2", "spec-batch8 prompt-lookup k=2"}
    assert set(doc["unavailable"]) == batched and doc["behaviour_changed"] == []
    assert all("DynamicCache" in doc["unavailable"][r]["a"] for r in batched)
    assert set(doc["rows"]) == {"target-only", "pass 1", "verify 3", f"draft {small}", f"spec {small} k=2",
                                f"round {small} k=2", "draft prompt-lookup", "spec prompt-lookup k=2",
                                "round prompt-lookup k=2"}
    assert doc["config"]["backend"] == "eager" and doc["config"]["target"] == target


def test_an_engines_rows_are_its_generations_on_both_sides(capsys):
    """--engine llama-cpp, this tree on both sides (an A/A): the engine's own target-only and speculative
    generations are the rows, every one timed on both sides, no behaviour changed, greedy output equal."""
    pytest.importorskip("llama_cpp")
    tree = str(PACKAGE.parent)
    main(["ab", "--a-path", tree, "--b-path", tree, "--engine", "llama-cpp", "--drafts", "small", "prompt-lookup",
          "--ks", "2", "--chars", "12", "--budget", "1", "--pairs", "2", "--json", "--no-work"])
    doc = json.loads(capsys.readouterr().out)
    assert set(doc["rows"]) == {"target-only", "spec small k=2", "spec prompt-lookup k=2"}
    assert doc["unavailable"] == {} and doc["behaviour_changed"] == [] and doc["config"]["engine"] == "llama-cpp"
    assert all(p["a"]["clock"] == "perf_counter" for p in doc["pairs"])  # an engine's threads: the wall clock
    assert "; engine llama-cpp, target shipped; " in ab_render.text(doc)


def _children() -> set[int]:
    """Live child processes of this one (from /proc: the tests need Linux)."""
    import os

    kids = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == os.getpid() and fields[0] != "Z":
            kids.add(int(stat.parent.name))
    return kids


def test_an_interrupt_ends_every_worker_the_running_pair_and_the_next(tmp_path):
    before = _children()
    tree = Source("A", "tree", str(PACKAGE.parent), None)
    config = {"target": None, "backend": "eager", "dtype": None, "drafts": ["bigram"], "ks": [2], "chars": 12,
              "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}

    def stop(line):
        raise KeyboardInterrupt  # after the first pair, while the second is starting beside it

    with pytest.raises(KeyboardInterrupt):
        ab.measure(tree, Source("B", "tree", tree.path, None), config, budget=1, pairs=3, cpu=ab_cmd_cpu(),
                   progress=stop, seed=0)
    assert _children() <= before


def ab_cmd_cpu() -> int:
    from specdec.cli.ab_cmd import _cpu

    return _cpu(None)


def test_a_budget_too_short_for_every_worker_pair_cuts_them_and_says_so():
    """After the first pair (ready in 4 s, a sweep 2 s: a pair needs 4 + 3 x 2 = 10 s), the pairs the rest of the
    budget buys: all when they fit, fewer with a line when not, and never fewer than ab.MIN_PAIRS -- then a line
    naming the budget that would do."""
    def run():
        r = ab.Run({})
        r.pairs, r.logs = [{"ready_seconds": 4.0, "sweep_seconds": 2.0}], {"x": [], "y": []}
        return r

    said = []
    assert ab._fit_pairs(run(), 100.0, 11, said.append) == 11 and said == []
    short = run()
    assert ab._fit_pairs(short, 55.0, 18, said.append) == 6  # five more pairs of 10 s in 55 s
    assert short.warnings == ["worker pairs 18 -> 6: the budget left buys 5 more of about 10 s each here (getting "
                              "ready 4 s, a sweep of 2 rows 2.0 s)"]
    none = run()
    assert ab._fit_pairs(none, 5.0, 18, said.append) == ab.MIN_PAIRS == 2
    assert none.warnings[1] == ("the budget is too small for 2 worker pairs of 2 rows here: give --budget 20 or "
                                "fewer rows; this run goes over its budget")
    assert said == [f"warning: {w}" for w in short.warnings + none.warnings]


@pytest.mark.parametrize("on", ["shipped", "hf"])
def test_a_users_feature_draft_runs_through_abs_rows(on, tmp_path, tiny_llama_dir, capsys):
    """A user's draft that reads the target (`MODULE:CALLABLE`, its module in the user's tree), over the shipped
    target and over a Hugging Face Llama, as an A/A: every row of the draft timed on both sides (its rounds hand
    it the target's states), nothing changed, and its first character exact as any draft's (the worker's facts)."""
    (tmp_path / "featdraft.py").write_text(feature_draft.SOURCE)
    target = [] if on == "shipped" else ["--target", f"hf:{tiny_llama_dir}"]
    main(["ab", "--a-path", str(tmp_path), "--b-path", str(tmp_path), *target, "--drafts", "featdraft:make",
          "--ks", "2", "--chars", "12", "--budget", "1", "--pairs", "2", "--json", "--no-work"])
    doc = json.loads(capsys.readouterr().out)
    assert {"draft featdraft:make", "spec featdraft:make k=2", "round featdraft:make k=2"} <= set(doc["rows"])
    assert doc["behaviour_changed"] == [] and "draft featdraft:make" not in doc["unavailable"]


def test_the_shipped_feature_drafts_rows_survive_the_generation_rows_between_their_samples(capsys):
    """eagle and medusa share one draft object between their proposal row and their generation rows, which leave
    it holding their own states: the proposal row hands the prefill's states again before each sample, so every
    row of both is timed on both sides (an A/A of this tree)."""
    tree = str(PACKAGE.parent)
    main(["ab", "--a-path", tree, "--b-path", tree, "--drafts", "eagle", "medusa", "--ks", "2", "--chars", "12",
          "--budget", "1", "--pairs", "2", "--json", "--no-work"])
    doc = json.loads(capsys.readouterr().out)
    for d in ("eagle", "medusa"):
        assert {f"draft {d}", f"spec {d} k=2", f"round {d} k=2", f"spec-batch8 {d} k=2"} <= set(doc["rows"])
    assert doc["unavailable"] == {} and doc["behaviour_changed"] == []
