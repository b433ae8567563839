"""`specdec ab --repo` and `specdec bisect` over a user's own repository (tests/user_repo.py builds one): entry
points imported from each revision with the running specdec as the harness, the bad input refused before any
worktree, bisect's search with git bisect's skip semantics, and, counted under the work counter, commit 5's
dearer draft flagged and named."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.cli.commands import main
from specdec.measure.ab import ab, ab_work
from specdec.measure import entry
from specdec.measure.ab.bisect import search
from tests import feature_draft, user_repo


def _worktrees(root: Path) -> int:
    out = subprocess.run(["git", "worktree", "list"], cwd=root, capture_output=True, text=True, check=True).stdout
    return len(out.splitlines())


def _run(argv, capsys) -> tuple[int, str, str]:
    try:
        code = main(argv)
    except SystemExit as exc:
        code = exc.code
    out = capsys.readouterr()
    return code, out.out, out.err


# --- bisect's search: git bisect's, skipped commits never judged, never bad -----------------------------------


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_the_search_names_the_first_bad_commit_or_the_skipped_run_before_it(data):
    n = data.draw(st.integers(1, 40))
    first = data.draw(st.integers(0, n - 1))
    skipped = data.draw(st.sets(st.integers(0, n - 2), max_size=n) if n > 1 else st.just(set()))  # BAD is not
    judged = []

    def judge(i):
        assert i not in skipped, "a skipped commit was judged"
        judged.append(i)
        return i >= first

    found = search(n, judge, lambda i: i in skipped)
    q = min(i for i in range(first, n) if i not in skipped)  # the first measurable bad commit
    p = max([i for i in range(first) if i not in skipped], default=-1)  # the last measurable good one
    assert found.first == q and found.candidates == list(range(p + 1, q + 1))
    assert not set(found.judged) & skipped and len(judged) == len(set(judged))
    assert all(found.judged[i] == (i >= first) for i in found.judged)


@pytest.mark.parametrize("n, first, skipped, judged, candidates", [
    (7, 3, set(), [6, 2, 4, 3], [3]),  # halving: BAD, then the midpoints 2, 4, 3
    (7, 3, {5}, [6, 2, 4, 3], [3]),  # a skipped commit away from the answer changes nothing
    (7, 3, {2}, [6, 1, 3], [2, 3]),  # a skipped midpoint: its nearest neighbour, the lower first; 2 borders 3
    (7, 3, {1, 2}, [6, 3, 0], [1, 2, 3]),
    (7, 3, {2, 3, 4, 5}, [6, 1], [2, 3, 4, 5, 6]),  # only skipped commits left: each of them could be it
])
def test_the_search_by_hand(n, first, skipped, judged, candidates):
    order = []
    found = search(n, lambda i: order.append(i) or i >= first, lambda i: i in skipped)
    assert order == judged and found.candidates == candidates


def test_bad_not_worse_names_nothing_and_a_judge_without_rows_skips():
    assert search(5, lambda i: False, lambda i: False).first is None
    found = search(5, lambda i: None if i == 2 else i >= 2, lambda i: False)
    assert found.candidates == [2, 3] and found.skipped == [2]


# --- bad input: one line, exit 2, before any worktree ---------------------------------------------------------


def _user(tmp_path, text: str) -> Path:
    folder = tmp_path / "tree"
    folder.mkdir(exist_ok=True)
    (folder / "mydraft.py").write_text(text)
    return folder


@pytest.mark.parametrize("argv, says", [
    (["ab", "{c1}", "{c2}", "--repo", "{root}", "--drafts", "mydraft:make"],
     "mydraft:make: no module 'mydraft' at revision '{c1}'"),
    (["ab", "{c2}", "{c3}", "--repo", "{root}", "--drafts", "mydraft:nope"],
     "mydraft:nope: module 'mydraft' at revision '{c2}'"),
    (["ab", "{c2}", "{c3}", "--repo", "{root}", "--drafts", "other.mod:make"], "no module 'other.mod'"),
    (["ab", "{c2}", "{c3}", "--repo", "{tmp}", "--drafts", "mydraft:make"], "is not inside a git checkout"),
    (["ab", "{c2}", "{c3}", "--repo", "{tmp}/none", "--drafts", "mydraft:make"], "--repo {tmp}/none: no such folder"),
    (["ab", "{c2}", "nope", "--repo", "{root}", "--drafts", "mydraft:make"], "revision 'nope' is not a commit"),
    (["bisect", "{c1}", "{c8}", "--repo", "{root}", "--drafts", "mydraft:make"], "GOOD {s1} holds no mydraft:make"),
    (["bisect", "{c8}", "{c2}", "--repo", "{root}", "--drafts", "mydraft:make"], "is not an ancestor of BAD"),
    (["bisect", "{c2}", "{c2}", "--repo", "{root}", "--drafts", "mydraft:make"], "nothing to search"),
])
def test_bad_input_is_one_line_and_exit_2_before_any_worktree(sample, tmp_path, monkeypatch, capsys, argv, says):
    root, commits = sample
    names = {"root": str(root), "tmp": str(tmp_path), **{f"c{i + 1}": c for i, c in enumerate(commits)},
             **{f"s{i + 1}": c[:10] for i, c in enumerate(commits)}}
    monkeypatch.setattr(ab, "measure", lambda *a, **k: pytest.fail("measured despite bad input"))
    code, _, err = _run([a.format(**names) for a in argv] + ["--no-work"], capsys)
    assert code == 2 and says.format(**names) in err and len(err.strip().splitlines()) == 1, err
    assert _worktrees(root) == 1


@pytest.mark.parametrize("text, code, says", [
    ("def make(target):\n    return 3\n", 2,
     "--drafts mydraft:make returned a int, not a specdec Draft (missing: name, reset, rollback, propose)"),
    ("import nosuchmodule_i48\n\ndef make(target):\n    return 3\n", 2,
     "the code imports 'nosuchmodule_i48', which the current environment"),
    ("def make(target):\n    raise ValueError('boom')\n", 1, "failed: A = "),  # the user's code failed: not bad input
])
def test_what_an_entry_point_returns_is_checked_in_a_probe_before_any_timing(tmp_path, monkeypatch, capsys, text,
                                                                             code, says):
    folder = str(_user(tmp_path, text))
    monkeypatch.setattr(ab, "measure", lambda *a, **k: pytest.fail("measured despite a bad entry point"))
    got, _, err = _run(["ab", "--a-path", folder, "--b-path", folder, "--drafts", "mydraft:make", "--no-work"],
                       capsys)
    assert got == code and says in err, err


def test_a_probe_that_does_not_return_is_the_codes_failure_not_a_traceback(tmp_path, monkeypatch, capsys):
    """An entry point whose call never returns: the probe is ended at PROBE_TIMEOUT (1 s here) and the run exits 1
    naming the revision and what took too long, before any timing."""
    folder = str(_user(tmp_path, "import time\n\ndef make(target):\n    time.sleep(60)\n"))
    monkeypatch.setattr(entry, "PROBE_TIMEOUT", 1.0)
    monkeypatch.setattr(ab, "measure", lambda *a, **k: pytest.fail("measured despite a probe that hung"))
    got, _, err = _run(["ab", "--a-path", folder, "--b-path", folder, "--drafts", "mydraft:make", "--no-work"],
                       capsys)
    assert got == 1 and "importing the entry points and calling them took more than 1 s" in err, err


def test_a_revisions_probe_runs_on_an_export_not_a_worktree(sample):
    root, commits = sample
    entry.probe_commit(root, commits[1], "C2", None, ["mydraft:make"])  # a Draft: no error
    assert _worktrees(root) == 1
    assert entry.is_entry("mydraft:make") and entry.is_entry("a.b:c")
    assert not any(entry.is_entry(s) for s in ("hf:gpt2", "ngram", "hf:org/m:x", None, "a:b:c"))


# --- real runs ------------------------------------------------------------------------------------------------


def test_an_a_a_of_one_commit_is_clean_and_the_rows_say_what_they_detect(sample, capsys):
    """Timing only (--no-work): two worker pairs of commit 4 against itself, the user's draft imported from its
    worktree, the running specdec's rows and statistics. Clean in what does not depend on the machine's speed:
    every exact figure (passes, drafted, accepted, the text) equal on both sides, every row timed on both and
    saying what it could detect, every verdict the rule's own (p against 0.01 / rows) and the exit status
    following them. Whether a timed row of the same code is flagged is chance (at most 1 % of runs, by the rule:
    tests/measure/ab/test_ab.py checks that rate), so no exit status is assumed here."""
    import json

    root, commits = sample
    code, out, err = _run(["ab", commits[3], commits[3], "--repo", str(root), "--drafts", "mydraft:make", "--ks", "4",
                           "--chars", "12", "--budget", "6", "--pairs", "2", "--no-work", "--json"], capsys)
    doc = json.loads(out)
    rows = doc["rows"]
    assert set(rows) == {"target-only", "pass 1", "verify 5", "draft mydraft:make", "spec mydraft:make k=4",
                         "round mydraft:make k=4"}, (set(rows), err)
    assert doc["behaviour_changed"] == [] and doc["complete"] and not doc["error"]
    for name, r in rows.items():
        assert r["pairs"] == 2 and r["a_seconds"] > 0 and r["b_seconds"] > 0, name
        assert r["detectable"] > 0 and r["se"] >= r["se_floor"] > 0, name
        assert r["verdict"] == ("same" if r["p"] >= 0.01 / len(rows) else "worse" if r["change"] > 0 else "better")
    assert code == (1 if doc["worse"] else 0) and doc["worse"] == sorted(n for n, r in rows.items()
                                                                          if r["verdict"] == "worse")
    assert doc["work"]["reason"].startswith("left out") and _worktrees(root) == 1


needs_valgrind = pytest.mark.skipif(shutil.which("valgrind") is None or ab_work.plan({}, "auto")[0] is None,
                                    reason="no work counter here (valgrind not installed, no PMU)")


@needs_valgrind
def test_COUNTS_WORK_ab_of_commit_4_against_5_flags_the_drafts_work_rows_and_no_other(sample, capsys):
    """Counts work under the counter (minutes under callgrind): commit 5's draft does 2.3 % more instructions
    per proposal; its draft row is flagged, the rows that do not run it are not, and ab exits 1."""
    root, commits = sample
    code, out, err = _run(["ab", commits[3], commits[4], "--repo", str(root), "--drafts", "mydraft:make", "--ks", "4",
                           "--chars", "6", "--budget", "6", "--pairs", "2", "--json"], capsys)
    import json

    doc = json.loads(out)
    rows = doc["work"]["rows"]  # judged: per row the change of mean instructions, its threshold, the verdict
    worse = set(doc["work"]["worse"])
    for n, r in rows.items():  # the figures, for the log (-s)
        print(f"work {n}: {r['change']:+.3%} (threshold {r['threshold']:.3%}) {r['verdict']}")
    for n, r in doc["rows"].items():
        print(f"time {n}: {r.get('change', float('nan')):+.2%} detects {r.get('detectable', float('nan')):.2%} "
              f"{r['verdict']}")
    assert code == 1 and "draft mydraft:make" in worse, (rows, err)
    assert all("mydraft:make" in n and not n.startswith("round") for n in worse), worse
    assert 0.01 < rows["draft mydraft:make"]["change"] < 0.04


def test_bisect_says_an_unmeasurable_bad_with_its_own_exit_status(holes, monkeypatch, capsys):
    """A judge that can measure nothing at BAD (no row in both): exit 3 and "could not be measured", never
    "not worse"."""
    from specdec.cli import bisect_cmd

    root, commits = holes
    monkeypatch.setattr(bisect_cmd, "_by_time", lambda *a: (lambda commit: None))
    monkeypatch.setattr(bisect_cmd, "work_plan", lambda args, config: (None, "left out (--no-work)"))
    code, out, err = _run(["bisect", commits[1], commits[-1], "--repo", str(root), "--drafts", "mydraft:make"], capsys)
    assert code == bisect_cmd.UNMEASURED == 3 and "could not be measured" in out and "not worse" not in out, out + err


@pytest.fixture
def holes(sample) -> tuple[Path, list[str]]:
    """The sample's commits 1 and 2, then a commit 3 that lost the module, then commits 4..8 with the sample's
    trees (commit 4 brings the module back, 5 makes the draft dearer)."""
    return user_repo.history(sample, "holes", [1, ("rm", "mydraft.py")] + [("from", i) for i in range(3, 8)])


def test_bisect_skips_the_commits_without_the_module(holes, monkeypatch, capsys):
    """GOOD = commit 2 against BAD = commit 8 of a history whose commit 3 lost the module (commit 4 brings it back):
    3 is skipped, never judged; the rest judged by a stand-in criterion (commit 5 on is worse), 5 named."""
    from specdec.cli import bisect_cmd

    root, commits = holes
    judged = []

    def by(*_):
        def judge(commit):
            judged.append(commits.index(commit))
            return commits.index(commit) >= 4
        return judge

    monkeypatch.setattr(bisect_cmd, "_by_work", by)
    monkeypatch.setattr(bisect_cmd, "_by_time", by)
    code, out, err = _run(["bisect", commits[1], commits[7], "--repo", str(root), "--drafts", "mydraft:make"],
                          capsys)
    assert code == 0 and f"first slower commit: {commits[4]}" in out, out + err
    assert 2 not in judged and "skipped 1" in out and err.count("the module does not exist there") == 1


def _short(root: Path, commit: str) -> str:
    return subprocess.run(["git", "log", "-1", "--format=%h", commit], cwd=root, capture_output=True, text=True,
                          check=True).stdout.strip()


def _timed_run(dearer: bool) -> ab.Run:
    """What `ab.measure` would return for two revisions whose draft row differs by +9 % (`dearer`) or not at all:
    five worker pairs of two samples each, a tiny spread, every other row unchanged (`tests/measure/ab/test_ab.py`'s shape)."""
    import math

    run = ab.Run({})
    for name in ("target-only", "pass 1", "draft mydraft:make", "spec mydraft:make k=4"):
        shift = 0.09 if dearer and "mydraft" in name else 0.0
        run.rows[name] = {side: {"ok": True, "reason": "", "facts": {}} for side in "ab"}
        run.numbers[name] = 1
        run.logs[name] = [[shift + d, shift - d] for d in (0.001, 0.002, 0.003, 0.0015, 0.0025)]
        run.seconds[name] = {"a": [1e-3] * 10, "b": [1e-3 * math.exp(shift)] * 10}
    run.pairs = [{"a": {}, "b": {}}] * 5
    return run


# A specdec package of the user's own in the repository: a step that imported its commit's specdec (as
# `git bisect run specdec ab` does with an editable install) would fail on it; the running specdec never reads it.
DECOY = 'raise RuntimeError("a commit\'s own specdec was imported: the harness must be the running specdec")\n'


@pytest.fixture
def decoy(sample) -> tuple[Path, list[str]]:
    """The sample's commits 1..4, then D1: a decoy `specdec` package added, D2: the module removed, D3: the module
    back with commit 5's dearer draft (the decoy still there). D1 is index 4, D3 index 6."""
    return user_repo.history(sample, "decoy", [3, ("add", "specdec/__init__.py", DECOY), ("rm", "mydraft.py"), ("from", 4)])


@pytest.mark.parametrize("history, good, bad, code, says, judged, skipped", [
    ("holes", 1, 7, 0, ["first slower commit: {c5} "], [7, 4, 3], 1),  # BAD, then halving; 3 (no module) skipped
    ("holes", 4, 7, 1, ["BAD {s8} is not worse than GOOD {s5}: no commit to name (by time: no row changed beyond "
                        "what it could detect"], [7], 0),  # BAD not worse: the end
    ("decoy", 4, 6, 1, ["the first slower commit is one of (skipped commits border it):\n  {h6} ", "\n  {h7} "],
     [6], 1),  # BAD worse, the only commit before it skipped: both named, exit 1
])
def test_bisect_by_time_judges_each_commit_against_good_in_checked_out_trees(request, monkeypatch, capsys, history,
                                                                           good, bad, code, says, judged, skipped):
    """The time criterion (--no-work) end to end but for the timing itself: each step's two revisions checked
    out, `ab.measure` of GOOD against the commit (a stand-in that reads the checked-out draft: +9 % where it copies
    its draws, the sample's commit 5 on), ab's own document and verdict, the search, its output and exit status,
    and every worktree removed. Nothing depends on how fast the machine is."""
    root, commits = request.getfixturevalue(history)
    calls = []

    def dearer(source) -> bool:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=source.path, capture_output=True, text=True,
                              check=True).stdout.strip()
        assert head == source.commit  # the tree is that commit's
        return "astype" in (Path(source.path) / "mydraft.py").read_text()

    def measure(a, b, config, budget, pairs, cpu, progress=None, **_):
        calls.append((commits.index(a.commit), commits.index(b.commit), budget))
        return _timed_run(dearer(b) and not dearer(a))

    monkeypatch.setattr(ab, "measure", measure)
    got, out, err = _run(["bisect", commits[good], commits[bad], "--repo", str(root), "--drafts", "mydraft:make",
                          "--no-work", "--budget", "7"], capsys)
    names = {**{f"c{i + 1}": c for i, c in enumerate(commits)}, **{f"s{i + 1}": c[:10] for i, c in enumerate(commits)},
             **{f"h{i + 1}": _short(root, c) for i, c in enumerate(commits)}}
    assert got == code and all(line.format(**names) in out for line in says), out + err
    assert out.startswith(f"criterion: time (work: left out (--no-work)); judged {len(judged)} of {bad - good} "
                          f"commits, skipped {skipped}\n"), out
    assert calls == [(good, j, 7.0) for j in judged]  # each judged once, against GOOD, with the budget given
    rows = [line for line in err.splitlines() if line.startswith("    draft mydraft:make: ")]
    assert len(rows) == len(judged) and all(" of time (could detect " in line for line in rows), err
    assert rows[0].endswith(": worse" if code == 0 or history == "decoy" else ": same"), rows
    assert _worktrees(root) == 1


def test_a_worker_that_fails_at_a_step_is_exit_1_naming_the_commit_and_what_failed(holes, monkeypatch, capsys):
    """The user's code raising at a commit (or a worker dying) is a failure, not bad input and not a traceback:
    exit 1, one line naming the commit, the worker's last lines under it, no commit named, no worktree left."""
    root, commits = holes

    def measure(a, b, *_, **__):
        raise ab.WorkerError(f"worker B ({b.name}) failed:\nTraceback (most recent call last):\nValueError: boom")

    monkeypatch.setattr(ab, "measure", measure)
    code, out, err = _run(["bisect", commits[1], commits[7], "--repo", str(root), "--drafts", "mydraft:make",
                           "--no-work"], capsys)
    first = next(line for line in err.splitlines() if line.startswith("specdec bisect: failed: "))
    assert code == 1 and f"{_short(root, commits[7])} holes 5: from 7 could not be judged against GOOD " \
        f"{commits[1][:10]}: worker B ({commits[7][:10]}) failed:" in first, err
    assert "  | ValueError: boom" in err and "first slower commit" not in out and _worktrees(root) == 1


def test_bisect_by_time_with_real_timing_judges_with_the_running_specdec_whatever_it_finds(decoy, capsys):
    """The time criterion with nothing stood in (two worker pairs of ab at a small budget): GOOD = D1, BAD = D3,
    D2 without the module. Whatever the timing finds (the +2.3 % draft may or may not show at this budget), it
    holds that: D3 is judged against D1 by the running specdec (the commits' own decoy specdec would fail the
    step), D2 is never judged, the output names both as candidates where D3 was worse and says nothing is named
    where it was not, the exit status is 1 either way (docs/your-own-code.md), and no worktree is left."""
    root, commits = decoy
    code, out, err = _run(["bisect", commits[4], commits[6], "--repo", str(root), "--drafts", "mydraft:make",
                           "--no-work", "--budget", "4"], capsys)
    print(err + out)  # for the log (-s): docs/your-own-code.md's sample of the time criterion
    d2, d3 = (f"{_short(root, commits[i])} decoy {i - 4}" for i in (5, 6))  # their subjects in the output
    assert re.search(r"pair \d+/\d+: ", err) and "imported" not in err and "failed" not in err, err  # ab ran
    worse = f"  {d3}: from 4: worse" in err.splitlines()  # D3's verdict, by time
    assert worse or f"  {d3}: from 4: good" in err.splitlines(), err
    assert not any(line.startswith(f"  {d2}") and line.endswith((": good", ": worse")) for line in err.splitlines())
    assert code == 1 and out.startswith("criterion: time (work: left out (--no-work)); judged 1 of 2 commits")
    if worse:
        assert "one of (skipped commits border it)" in out and d2 in out and d3 in out, out
    else:
        assert f"BAD {commits[6][:10]} is not worse than GOOD {commits[4][:10]}: no commit to name" in out, out
    assert _worktrees(root) == 1


def test_bisect_by_time_measures_a_users_feature_draft(tmp_path, capsys):
    """A user's draft that reads the target's states (`take_features`), bisected by time with real timing over
    three commits of its repository (the module unchanged, then a readme, then a note): every judged step times
    the draft's rows on both sides (their rounds hand it the target's states), nothing fails, no worktree is left.
    Whatever the timing finds at this budget, the answer is one of bisect's two (a commit, or nothing named)."""
    root = tmp_path / "feat"
    root.mkdir()
    user_repo._git(root, "init", "-q", "-b", "main")
    commits = [user_repo._commit(root, files, message) for files, message in [
        ({"featdraft.py": feature_draft.SOURCE}, "1: my feature draft"),
        ({"README.md": "a draft that reads the target\n"}, "2: readme"),
        ({"NOTES.md": "to do: two heads\n"}, "3: notes")]]
    code, out, err = _run(["bisect", commits[0], commits[2], "--repo", str(root), "--drafts", "featdraft:make",
                           "--no-work", "--budget", "3"], capsys)
    print(err + out)  # for the log (-s)
    assert "failed" not in err and "Traceback" not in err, err
    assert re.search(r"    draft featdraft:make: [+-][\d.]+% of time \(could detect ", err), err
    assert code in (0, 1) and out.startswith("criterion: time (work: left out (--no-work)); judged "), out
    assert ("first slower commit: " in out) == (code == 0), out
    assert _worktrees(root) == 1
