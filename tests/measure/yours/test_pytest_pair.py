"""The `specdec_pair` pytest fixture (specdec.measure.yours.pytest_pair) in the sample user repository's own test suite
(tests/user_repo.py): pytest-benchmark's JSON holds each row's benchmark with its stats, and, with
`--specdec-work`, its instructions per call. Two pytest runs in subprocesses, at once: the counted one (a counting
process under callgrind: most of a minute) and an uncounted one. Nothing asserted depends on a time."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdec.measure.work import work
from tests import user_repo

pytest.importorskip("pytest_benchmark")

ROOT = Path(__file__).resolve().parents[3]
CONFTEST = 'pytest_plugins = ["specdec.measure.yours.pytest_pair"]\n'  # the one line docs/your-own-code.md gives
TESTS = '''def test_draft(specdec_pair):
    specdec_pair.draft("mydraft:make", k=4)


def test_pass(specdec_pair):
    specdec_pair.target_pass()


def test_verify(specdec_pair):
    specdec_pair.target_pass(positions=5)


def test_speculative(specdec_pair):
    specdec_pair.speculative("mydraft:make", k=4, chars=8)


def test_target_only(specdec_pair):
    specdec_pair.target_only(chars=8)
'''
# tests/user_repo.py: the draft's proposal at k = 4, counted as ab counts it; commit 8 holds commit 5's dearer one
DRAFT_INSTRUCTIONS = 117_333


def _pytest(repo: Path, out: str, *args: str) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECDEC_", "PYTEST_"))}
    env.update(PYTHONPATH=str(ROOT), SPECDEC_BENCH_SMOKE="1")  # this checkout's specdec; one counted layout
    return subprocess.Popen([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                             "tests", "--benchmark-json", out, "--benchmark-max-time=0.05", *args], cwd=repo,
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, dict]:
    repo = tmp_path_factory.mktemp("user") / "repo"
    user_repo.make(repo)
    (repo / "conftest.py").write_text(CONFTEST)
    (repo / "tests").mkdir()
    (repo / "tests" / "test_mine.py").write_text(TESTS)
    procs = {"counted": _pytest(repo, "counted.json", "-k", "draft or pass", "--specdec-work"),
             "timed": _pytest(repo, "timed.json", "-k", "not draft and not pass")}
    got = {}
    for name, proc in procs.items():
        out, _ = proc.communicate(timeout=600)
        assert proc.returncode == 0, out[-3000:]
        got[name] = {b["name"]: b for b in json.loads((repo / f"{name}.json").read_text())["benchmarks"]}
    return got


def test_every_row_is_a_benchmark_with_its_stats(runs):
    assert set(runs["counted"]) == {"test_draft", "test_pass"}
    assert set(runs["timed"]) == {"test_verify", "test_speculative", "test_target_only"}
    rows = {"test_draft": "draft mydraft:make", "test_pass": "pass 1", "test_verify": "verify 5",
            "test_speculative": "spec mydraft:make k=4", "test_target_only": "target-only"}
    for bench in [*runs["counted"].values(), *runs["timed"].values()]:
        assert bench["stats"]["rounds"] >= 1 and bench["stats"]["min"] > 0
        assert bench["extra_info"]["specdec_row"] == rows[bench["name"]] and bench["extra_info"]["target"] == "shipped"


def test_uncounted_benchmarks_carry_no_instructions(runs):
    assert not any("instructions" in b["extra_info"] for b in runs["timed"].values())


def test_work_counts_land_in_extra_info(runs):
    if work.probe().kind is None:
        pytest.skip(f"no work counter here: {work.probe().reason}")
    draft, single = runs["counted"]["test_draft"]["extra_info"], runs["counted"]["test_pass"]["extra_info"]
    assert draft["counter"] == single["counter"] == work.NAMES[work.probe().kind] and draft["layouts"] == [1]
    assert draft["instructions_per_token"] == draft["instructions"] / 4
    # the same row ab counts (tests/user_repo.py's figure, from another checkout's path: within 5 %)
    assert abs(draft["instructions"] / DRAFT_INSTRUCTIONS - 1) < 0.05, draft["instructions"]
    assert single["instructions"] > 10 * draft["instructions"]  # a target pass is a model's forward


@pytest.mark.parametrize("target", ["nonsense", "a:b:c", "hf:gpt2"])
def test_a_bad_specdec_target_is_pytests_usage_error_before_any_test(tmp_path, target):
    """docs/your-own-code.md: exit 4 (pytest's usage error) and one line naming the value, not an error per test."""
    (tmp_path / "conftest.py").write_text(CONFTEST)
    (tmp_path / "test_mine.py").write_text("def test_pass(specdec_pair):\n    specdec_pair.target_pass()\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECDEC_", "PYTEST_"))}
    got = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                          "--benchmark-disable", "--specdec-target", target], cwd=tmp_path, capture_output=True,
                         text=True, env={**env, "PYTHONPATH": str(ROOT)}, timeout=300)
    assert got.returncode == 4, got.stdout + got.stderr
    assert f"ERROR: --specdec-target {target!r}: not MODULE:CALLABLE" in got.stderr and "test_pass" not in got.stdout


def test_each_tests_draft_is_counted_at_its_own_k(monkeypatch):
    """Two tests of one draft at k = 2 and k = 4 in one run: each gets its own proposal's count (a stand-in
    counter whose draft proposal costs 1,000 instructions per drafted token plus 500: 2,500 and 4,500 by hand),
    and its per-token figure divides by its own k (1,250 and 1,125), never by the other's."""
    from specdec.measure.yours import pytest_pair, user_bench

    asked = []

    def fake_work(pair, tree, rows):
        asked.append((pair.draft_k, tuple(rows)))
        return {"counter": "callgrind", "layouts": [1, 2, 3],
                "rows": {r: 1000 * pair.draft_k + 500 for r in rows if r.startswith("draft ")}}

    monkeypatch.setattr(user_bench, "work", fake_work)
    infos = {k: {} for k in (2, 4)}
    counted = [(user_bench.Pair(None, ("bigram",), (k,), 12), "draft bigram", infos[k]) for k in (2, 4)]
    pytest_pair.count(counted, "/tree")
    assert sorted(asked) == [(2, ("draft bigram",)), (4, ("draft bigram",))]
    assert (infos[2]["instructions"], infos[2]["instructions_per_token"]) == (2500, 1250)
    assert (infos[4]["instructions"], infos[4]["instructions_per_token"]) == (4500, 1125)
