"""The method's one loader (specdec/measure/method.py): every by-path file goes through it."""

import runpy
import subprocess
import sys
from pathlib import Path

import pytest

import specdec.measure

MEASURE = Path(specdec.measure.__file__).parent
load = runpy.run_path(str(MEASURE / "method.py"))["load"]


def test_a_method_file_is_registered_by_its_stem_and_loaded_once():
    work = load("work/work.py")
    assert work.__name__ == "specdec_work_method" and sys.modules["specdec_work_method"] is work
    assert load("work/work.py") is work
    # its siblings come through the same loader: one counters module whoever asks
    assert work.PerfCounter is load("work/counters.py").PerfCounter is sys.modules["specdec_counters_method"].PerfCounter


def test_a_file_that_fails_half_way_is_not_left_registered(tmp_path):
    (tmp_path / "method.py").write_text((MEASURE / "method.py").read_text())  # a folder of its own
    loader = runpy.run_path(str(tmp_path / "method.py"))
    (tmp_path / "broken.py").write_text("X = 1\nraise RuntimeError('half way')\n")
    with pytest.raises(RuntimeError, match="half way"):
        loader["load"]("broken.py")
    assert "specdec_broken_method" not in sys.modules
    (tmp_path / "broken.py").write_text("X = 2\n")
    assert loader["load"]("broken.py").X == 2
    del sys.modules["specdec_broken_method"]


def test_no_other_file_loads_a_method_file_by_path_itself():
    """One loader: nothing but method.py calls importlib's spec_from_file_location on the method's files."""
    root = MEASURE.parents[1]
    hits = subprocess.run(["grep", "-rl", "spec_from_file_location", str(MEASURE), str(root / "benchmarks")],
                          capture_output=True, text=True).stdout.split()
    assert [Path(h).name for h in hits if h.endswith(".py")] == ["method.py"]
