"""The one decision clock (`measure.clock`): every read of time in the package goes through it, a fake clock
handed in is read as it is, and the guard SPECDEC_TIME_SCALE makes the machine look N times slower to every
budget, deadline and warm-up -- in this process and in the ones it starts."""

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specdec.measure import clock, schedule, timing
from specdec.util.errors import InputError

PACKAGE = Path(__file__).resolve().parents[2] / "specdec"
CLOCKS = {"perf_counter", "perf_counter_ns", "monotonic", "monotonic_ns", "time", "time_ns", "thread_time",
          "process_time"}
# The only modules that may read a clock of `time` themselves, and why none of their reads is a decision.
OWN_CLOCKS = {
    "measure/clock.py": "the seam itself",
    "measure/ab_worker.py": "the A/B method, run as a script at each revision: its samples' own clock (the "
                            "thread's CPU time with one thread); the parent's scheduling reads the seam",
    "measure/work/work_pool.py": "the counting method, loaded by path like ab_worker (standard library only): the "
                            "seconds its progress lines and its answer report; its time-outs bound a hung child",
    "model/train.py": "the training log's seconds (no budget: training runs its steps whatever they take)",
    "decoding/medusa.py": "the heads' training log's seconds (no budget, as model/train.py)",
    "decoding/eagle.py": "the draft's training log's seconds (no budget, as model/train.py)",
    # the engines layer lies below measure (the seam): its reads bound a failure or fill a log, not a budget
    "engines/llama_server.py": "a server's start timeout (how long to wait for /health before calling it dead)",
    "engines/server_build.py": "the build log's seconds",
}
HUGE = 1e9  # a scale at which any real call looks like many seconds: the machine looks endlessly slow


def _reads_of_time(path: Path) -> list[str]:
    """`time.<clock>` attributes and `from time import <clock>` names in one module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        if (isinstance(node, ast.Attribute) and node.attr in CLOCKS and isinstance(node.value, ast.Name)
                and node.value.id in ("time", "_time")):
            found.append(f"line {node.lineno}: time.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            found += [f"line {node.lineno}: from time import {a.name}" for a in node.names if a.name in CLOCKS]
    return found


def test_every_read_of_time_in_the_package_goes_through_the_clock_seam():
    """A budget that read `time.perf_counter` itself would escape both a test's fake clock and the guard."""
    bad = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel not in OWN_CLOCKS and _reads_of_time(path):
            bad[rel] = _reads_of_time(path)
    assert bad == {}, f"read time through specdec.measure.clock (now: decisions; measured: timers): {bad}"
    assert all((PACKAGE / rel).is_file() for rel in OWN_CLOCKS)  # no stale exemption


def test_a_fake_clock_handed_in_is_what_every_decision_reads_until_the_block_ends():
    fake = iter([5.0, 7.5])
    with clock.using(lambda: next(fake)):
        assert (clock.now(), clock.now()) == (5.0, 7.5)
        assert schedule.now is clock.now  # the schedule reads the same seam, not a copy of it
    with clock.using(None):  # None: the clock as it was
        assert clock.now() != 5.0


def test_the_guard_multiplies_the_real_clock_in_a_process_it_starts():
    """The factor reaches a subprocess through the environment (as a report's or ab's workers would see it)."""
    code = ("import time; time.perf_counter = lambda: 10.0\n"
            "from specdec.measure import clock\n"
            "print(clock.SCALE, clock.now())")
    env = dict(os.environ, SPECDEC_TIME_SCALE="3", PYTHONPATH=str(PACKAGE.parent))
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    scale, now = out.stdout.split()
    assert (float(scale), float(now)) == (3.0, 30.0)


@pytest.mark.parametrize("text,scale", [(None, 1.0), ("", 1.0), ("  ", 1.0), ("3", 3.0), (" 0.33 ", 0.33),
                                        ("1e-3", 0.001)])
def test_the_guard_reads_a_positive_number_and_unset_is_this_machine(text, scale):
    assert clock.read_scale(text) == scale


@pytest.mark.parametrize("text", ["fast", "0", "-2", "inf", "nan", "3x"])
def test_a_guard_that_is_not_a_positive_number_is_an_input_error_naming_it(text):
    with pytest.raises(InputError) as bad:
        clock.read_scale(text)
    assert str(bad.value).startswith(f"SPECDEC_TIME_SCALE={text!r} is not a positive number") and "allowed" in str(
        bad.value) and "\n" not in str(bad.value)


BAD_GUARD = dict(os.environ, SPECDEC_TIME_SCALE="fast", PYTHONPATH=str(PACKAGE.parent))


def test_a_bad_guard_breaks_no_import_and_the_library_raises_an_input_error():
    """Importing is no place for an error (and never a SystemExit): the package imports, and the first decision
    read -- or `check_scale` -- raises an InputError, which a library caller can catch as a ValueError."""
    code = ("import specdec\nfrom specdec.measure import clock\n"
            "for call in (clock.check_scale, clock.now):\n"
            "    try:\n        call()\n    except ValueError as exc:\n        print(type(exc).__name__, exc)\n"
            "with clock.using(lambda: 5.0):\n    print(clock.now())\n")
    out = subprocess.run([sys.executable, "-c", code], env=BAD_GUARD, capture_output=True, text=True, timeout=600)
    said = "InputError SPECDEC_TIME_SCALE='fast' is not a positive number of times"
    lines = out.stdout.splitlines()
    assert out.returncode == 0 and out.stderr == "", out.stderr
    assert [line[:len(said)] for line in lines[:2]] == [said, said] and lines[2] == "5.0"  # a fake clock still reads


@pytest.mark.parametrize("argv", [["info"], ["--help"], ["report", "--quick"]])
def test_a_bad_guard_is_one_line_and_exit_2_where_the_command_starts(tmp_path, argv):
    out = subprocess.run([sys.executable, "-m", "specdec.cli", *argv], env=BAD_GUARD, capture_output=True, text=True,
                         timeout=600, cwd=tmp_path)
    assert out.returncode == 2 and out.stdout == "" and list(tmp_path.iterdir()) == []
    assert out.stderr.startswith("specdec: error: SPECDEC_TIME_SCALE='fast' is not a positive number") and (
        out.stderr.count("\n") == 1 and "allowed" in out.stderr)


# --- the decisions under a scaled real clock: each fails if its function reads time around the seam ----------


def test_a_warm_up_on_an_endlessly_slow_machine_makes_its_minimum_calls(monkeypatch):
    monkeypatch.setattr(clock, "SCALE", HUGE)
    calls = []
    assert timing.warm_up(lambda: calls.append(1), seconds=1.0, min_calls=3) == 3 == len(calls)


def test_cost_rounds_on_an_endlessly_slow_machine_stop_at_their_minimum(monkeypatch):
    monkeypatch.setattr(clock, "SCALE", HUGE)
    got = timing.round_robin({"x": lambda: None}, samples=50, number=1, deadline=clock.now() + 1.0, min_samples=2)
    assert len(got["x"]) == 2


def test_a_budget_on_an_endlessly_slow_machine_is_spent_at_once_and_a_schedule_gives_one_round(monkeypatch):
    monkeypatch.setattr(clock, "SCALE", HUGE)
    budget = schedule.Budget(60.0)
    assert budget.left() == 0.0
    rows = [schedule.Runs(i, {"a": lambda item: None, "b": lambda item: None}, ("a", "b"), warm=lambda item: None)
            for i in range(3)]
    assert schedule.interleave(rows, 60.0, min_visits=3, precision=0.0, log=lambda s: None) == 1
    assert [r.visits for r in rows] == [1, 1, 1]  # the first round always runs: every row has a figure



def test_a_command_called_in_a_running_process_counts_its_budget_from_the_call(monkeypatch):
    """`main(argv)` in a process that has run for a while (pytest, a notebook): the budget starts at the call,
    not at the package's import, so it never depends on what ran before (the tests' order)."""
    from specdec.cli import commands

    seen = []
    monkeypatch.setitem(commands.COMMANDS, "info", lambda args: seen.append(args.started) or 0)
    with clock.using(lambda: 42.0):
        assert commands.main(["info"]) == 0
    assert seen == [42.0]
