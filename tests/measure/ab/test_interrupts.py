"""^C and SIGTERM sent to real `specdec ab` runs at each phase, and to a load sweep: what was measured stays on
disk, the output says what is missing, the worktrees and the counting process are gone, and the exit status is 3
(incomplete).

The signal goes to the run's whole process group, as a terminal sends ^C. When it lands is decided by what the
run has printed or written (never by how long it took), so the outcomes asserted hold on a fast or a loaded
machine; a generous limit only keeps a broken run from hanging the suite."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from specdec.measure.load import load
from specdec.measure.work import work
from specdec.measure.load.load_driver import Window

ROOT = Path(__file__).resolve().parents[3]
HANG = 300.0  # seconds: a run that outlives this after its signal is hung (a guard, not a speed goal)
INCOMPLETE = 3
needs_valgrind = pytest.mark.skipif(work.probe().kind is None, reason="no work counter on this machine")


def _worktrees() -> int:
    out = subprocess.run(["git", "worktree", "list"], cwd=ROOT, capture_output=True, text=True)
    return len(out.stdout.splitlines())


def _start(argv: list[str], tmp: Path) -> subprocess.Popen:
    env = dict(os.environ, TMPDIR=str(tmp), PYTHONUNBUFFERED="1")
    # SIGINT at its default, as in a terminal's foreground job: a pytest started in the background (`cmd &` in a
    # script) hands its children SIGINT ignored, and Python then installs no KeyboardInterrupt for it
    return subprocess.Popen([sys.executable, "-m", "specdec.cli", *argv], cwd=tmp, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=open(tmp / "stderr.txt", "w"), start_new_session=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))


def _wait_for(proc: subprocess.Popen, ready) -> None:
    """Until `ready()` holds (the phase the signal is meant for has begun) or the run ended by itself."""
    deadline = time.monotonic() + HANG
    while not ready() and proc.poll() is None:
        assert time.monotonic() < deadline, "the run never reached the phase"
        time.sleep(0.2)


def _signal(proc: subprocess.Popen, sig: int) -> tuple[int, str, float]:
    sent = time.monotonic()
    os.killpg(proc.pid, sig)
    out, _ = proc.communicate(timeout=HANG)
    return proc.returncode, out, time.monotonic() - sent


def _leftovers(tmp: Path) -> list[str]:
    """What the run left in its temporary folder: worker logs, counting folders, exports."""
    return sorted(p.name for p in tmp.iterdir() if p.name.startswith("specdec-"))


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM])
def test_a_signal_during_the_timing_keeps_what_was_measured_and_removes_the_worktrees(tmp_path, sig):
    before = _worktrees()
    out_file = tmp_path / "ab.json"
    proc = _start(["ab", "HEAD", "HEAD", "--repo", str(ROOT), "--drafts", "bigram", "--ks", "2", "--budget", "600",
                   "--pairs", "4", "--no-work", "--json", "--out", str(out_file)], tmp_path)
    _wait_for(proc, lambda: "specdec ab: A = " in (tmp_path / "stderr.txt").read_text())
    code, out, took = _signal(proc, sig)
    err = (tmp_path / "stderr.txt").read_text()
    print(f"{signal.Signals(sig).name}: ended {took:.1f} s after the signal")
    assert code == INCOMPLETE, err
    doc = json.loads(out_file.read_text())
    assert json.loads(out) == doc  # stdout carries the same document
    assert doc["complete"] is False and doc["missing"] and doc["missing"][0].startswith("timing: interrupted")
    assert "INCOMPLETE" in err and str(out_file) in err
    assert _worktrees() == before and _leftovers(tmp_path) == []


@needs_valgrind
def test_a_signal_during_the_count_keeps_the_timing_and_ends_the_counting_process(tmp_path):
    before = _worktrees()
    out_file = tmp_path / "ab.json"
    proc = _start(["ab", "HEAD", "HEAD", "--repo", str(ROOT), "--drafts", "bigram", "--ks", "2", "--budget", "2",
                   "--pairs", "2", "--chars", "6", "--out", str(out_file)], tmp_path)
    _wait_for(proc, out_file.exists)  # the timing's document is written as the timing ends: the count follows
    code, out, took = _signal(proc, signal.SIGINT)
    err = (tmp_path / "stderr.txt").read_text()
    print(f"SIGINT during the count: ended {took:.1f} s after the signal")
    assert code == INCOMPLETE, err
    doc = json.loads(out_file.read_text())
    assert doc["rows"] and all(r["pairs"] == 2 for r in doc["rows"].values())  # the timing stands whole
    assert doc["missing"] == ["work rows: interrupted during the count"]
    assert "work rows FAILED: interrupted during the count" in out and "no row got worse" in out
    assert _worktrees() == before and _leftovers(tmp_path) == []
    ps = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
    assert str(tmp_path) not in ps  # no counting process (its dumps go under TMPDIR) outlived the run


def _sweep(levels: int = 3) -> load.Sweep:
    lv = [load.Level("concurrency", i + 1) for i in range(levels)]
    return load.Sweep(urls={"on": "http://127.0.0.1:9", "off": "http://127.0.0.1:9"}, levels=lv, prompts=["a"],
                      visits=1, requests=2, warmup=0, max_tokens=4)


def test_a_sweep_interrupted_or_failing_keeps_every_window_it_measured(monkeypatch):
    """The third window is interrupted (^C), or its /metrics cannot be read: the two before it were handed to
    `record` as they ended and are returned; `incomplete` says which and why."""
    for failure, says in ((KeyboardInterrupt, "interrupted after 2 window(s)"),
                          (ValueError("bad /metrics line"), "the sweep failed after 2 window(s): ValueError")):
        calls = []

        def metrics(url):
            calls.append(url)
            if len(calls) == 5:  # windows 1 and 2 read before and after; the third's first read fails
                raise failure
            return {}

        monkeypatch.setattr(load, "read_metrics", metrics)
        monkeypatch.setattr(load, "_settled", lambda url, before, tokens: metrics(url))
        monkeypatch.setattr(load, "run_window", lambda *a, **k: Window([], None))
        monkeypatch.setattr(load, "window_counts", lambda before, after, records: {"n": 0})
        recorded = []
        swept = load.run(_sweep(), record=recorded.append)
        assert swept.incomplete.startswith(says) and len(swept.windows) == 2
        assert [w["level"] for w in recorded] == [w["level"] for w in load.raw(_sweep(), swept)["windows"]]
