"""`specdec bisect` over a user's own repository, counted under the work counter (minutes under callgrind): the
longest test of the suite, in a file of its own so that pytest-xdist (`--dist loadfile`) runs it beside
test_user_repo.py's other counted run rather than after it. The repository is conftest.py's."""

from __future__ import annotations

import re

from tests.measure.yours.test_user_repo import _run, _worktrees, needs_valgrind


@needs_valgrind
def test_COUNTS_WORK_bisect_names_a_dearer_rollback_with_abs_rows_and_rule(rounds, capsys):
    """Counts work (minutes under callgrind): GOOD = commit 4, then a note, then a dearer rollback (the loop calls it
    once a round; the draft row's call steps back one token as a round does, so it runs it too), then a readme.
    bisect judges the rows `specdec ab` judges (target-only, pass, verify, the draft, its spec and round rows at
    the largest k) with ab's rule and this machine's calibration: the draft and spec rows flag the commit, the
    rows that never run the user's code (target-only, the passes) and the replayed round do not; one counting
    pool for the search. (The null commit's target-only once moved +0.667 % here: ONNX Runtime's telemetry
    thread, counted with the row until the counted processes turned it off; docs/work.md.)"""
    root, commits = rounds
    good, bad = commits[3], commits[-1]
    code, out, err = _run(["bisect", good, bad, "--repo", str(root), "--drafts", "mydraft:make"], capsys)
    print(err + out)  # each judged commit's rows and the answer, for the log (-s)
    assert code == 0 and f"first slower commit: {commits[-2]}" in out, out + err
    for row in ("spec mydraft:make k=4", "draft mydraft:make"):
        assert re.search(rf"{row}: \+[\d.]+% of work \(threshold [\d.]+%\): worse", err), err
    for row in ("target-only", "pass 1", "verify 5", "round mydraft:make k=4"):
        assert not re.search(rf"  {row}: [^\n]*: worse", err), err
    assert _worktrees(root) == 1 and err.count("counting process ready") == 1
