"""tools/suite_figures.py: the same commits measured by two versions of the asv suite, set side by side against
each figure's threshold in asv.conf.json (exact 0, work 0.25 %, time 10 %)."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools"))
import suite_figures  # noqa: E402

PASSES = "bench_speedup.Acceptance.track_passes_per_char('bigram', 1)"
WORK = "bench_work.Work.track_instructions('pass 1', 1)"
COST = "bench_drafts.DraftCost.track_c('bigram', 'eager', 1)"


def _write(path: Path, figures: dict) -> str:
    path.write_text("".join(json.dumps({"suite": "x", "commit": "c" * 40, "benchmark": b, "result": r}) + "\n"
                            for b, r in figures.items()))
    return str(path)


def test_a_sampled_figure_is_its_median_and_a_plain_one_its_value():
    assert suite_figures.figure({"samples": [3.0, 1.0, 2.0, 10.0], "number": 1}) == 2.5
    assert suite_figures.figure(7) == 7.0


def test_each_figure_gets_its_familys_threshold_as_asv_publish_gives_it():
    from asv import util

    families = util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)["regressions_thresholds"]
    assert suite_figures.threshold(PASSES, families) == 0.0
    assert suite_figures.threshold(WORK, families) == 0.0025
    assert suite_figures.threshold(COST, families) == 0.1


def test_diff_passes_changes_within_their_thresholds_and_flags_one_beyond(tmp_path, capsys):
    old = _write(tmp_path / "old.jsonl", {PASSES: 0.65, WORK: 1000.0, COST: {"samples": [1.0, 2.0, 3.0], "number": 1}})
    new = _write(tmp_path / "new.jsonl", {PASSES: 0.65, WORK: 1002.0, COST: {"samples": [2.1], "number": 1}})
    assert suite_figures.main(["--diff", old, new]) == 0
    out = capsys.readouterr().out
    assert "3 figures in both, 0 beyond their threshold" in out and "+0.20%" in out and "+5.00%" in out
    moved = _write(tmp_path / "moved.jsonl", {PASSES: 0.66, WORK: 1003.0, COST: {"samples": [2.1], "number": 1}})
    assert suite_figures.main(["--diff", old, moved]) == 1
    lines = capsys.readouterr().out.splitlines()
    beyond = [line for line in lines if line.endswith("BEYOND")]
    assert len(beyond) == 2 and beyond[0].startswith(PASSES) and beyond[1].startswith(WORK)  # 0.65 -> 0.66; +0.3 %


def test_a_run_appends_one_line_per_figure_and_resumes_past_a_commit_it_has(tmp_path):
    """The working tree's suite at HEAD, shrunk (SPECDEC_BENCH_SMOKE=1), one cheap benchmark class: its figures
    land in the file; a second run finds the commit there and measures nothing."""
    out = tmp_path / "figures.jsonl"
    env = dict(os.environ, SPECDEC_BENCH_SMOKE="1")
    cmd = [sys.executable, str(ROOT / "tools" / "suite_figures.py"), "--suite", ".", "--commits", "HEAD",
           "--bench", r"bench_speedup\.Acceptance\.track_passes_per_char", "--out", str(out)]
    first = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert first.returncode == 0, first.stderr[-2000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert rows and all(r["benchmark"].startswith("bench_speedup.Acceptance.track_passes_per_char(") for r in rows)
    assert all(0 < r["result"] <= 1 for r in rows)  # target passes per character
    again = subprocess.run(cmd, cwd=ROOT, env=env, text=True, capture_output=True, timeout=600)
    assert again.returncode == 0 and "already" in again.stderr
    assert out.read_text().splitlines() == [json.dumps(r) for r in rows]
