import gc
import os

import pytest
import torch

from specdec.measure import hygiene


def test_no_gc_turns_collection_off_and_back_on():
    assert gc.isenabled()
    with hygiene.no_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_set_threads_sets_and_reports_both_counts():
    before = torch.get_num_threads()
    try:
        got = hygiene.set_threads(1)
        assert got["threads"] == 1 == torch.get_num_threads() and got["interop_threads"] >= 1
        assert got["blas_threads"] == 1 == hygiene.blas_threads()  # numpy's BLAS too (threadpoolctl)
    finally:
        torch.set_num_threads(before)
    with pytest.raises(ValueError, match="threads must be at least 1, got 0"):
        hygiene.set_threads(0)


def test_parse_cpus_accepts_lists_and_ranges_of_available_cpus():
    first = min(os.sched_getaffinity(0))
    assert hygiene.parse_cpus(str(first)) == [first]
    assert hygiene.parse_cpus(f"{first}-{first}") == [first]


@pytest.mark.parametrize("text,message", [("x", "is not a CPU list"), ("999", "CPU 999 is not available"),
                                          ("0-1,5000", "CPU 5000 is not available")])
def test_parse_cpus_names_the_bad_value(text, message):
    with pytest.raises(ValueError, match=message):
        hygiene.parse_cpus(text)


def test_pin_keeps_the_affinity_it_was_given():
    before = sorted(os.sched_getaffinity(0))
    try:
        assert hygiene.pin([before[0]]) == [before[0]]
    finally:
        os.sched_setaffinity(0, before)
    assert hygiene.pin(None) == before


STAT = ("cpu  100 5 50 1000 20 3 2 1 0 0\n"  # user nice system idle iowait irq softirq steal guest guest_nice
        "cpu0 60 5 30 500 10 2 1 1 0 0\n"
        "cpu1 40 0 20 500 10 1 1 0 0 0\n"
        "intr 376312 0 0\n\nctxt 354558\n")


@pytest.mark.parametrize("cpus,seconds", [([1], 0.62),        # 40 + 0 + 20 + 1 + 1 + 0 ticks
                                          ([0], 0.99),        # 60 + 5 + 30 + 2 + 1 + 1
                                          ([0, 1], 1.61),
                                          (None, 1.61)])      # the all-CPU line: 100 + 5 + 50 + 3 + 2 + 1
def test_busy_seconds_adds_the_busy_fields_of_the_chosen_cpus(cpus, seconds):
    assert hygiene.busy_seconds(STAT, cpus, 100) == pytest.approx(seconds)


def reading(busy, own, wall):
    return {"busy_s": busy, "own_s": own, "wall_s": wall, "cpus": [0, 1]}


def test_others_cpus_is_busy_time_less_our_own_over_wall_time():
    # 6 s of busy CPU in 4 s of wall time, 4.5 of them ours: others kept 1.5 / 4 CPUs busy
    assert hygiene.others_cpus(reading(100.0, 5.0, 10.0), reading(106.0, 9.5, 14.0)) == 0.375
    # our own time counted by a coarser clock than /proc/stat's can come out above the busy time: 0, not < 0
    assert hygiene.others_cpus(reading(100.0, 5.0, 10.0), reading(101.0, 6.02, 12.0)) == 0.0
    assert hygiene.others_cpus(None, reading(1.0, 1.0, 1.0)) is None
    assert hygiene.others_cpus(reading(1.0, 1.0, 5.0), reading(2.0, 1.0, 5.0)) is None  # no time passed


def test_end_of_run_leaves_the_figure_and_not_the_start_reading(monkeypatch):
    monkeypatch.setattr(hygiene, "cpu_clock", lambda cpus=None: reading(106.0, 9.5, 14.0))
    machine = {"cpu_start": reading(100.0, 5.0, 10.0), "load_end": 0.5}
    assert hygiene.end_of_run(machine) == {"others_cpus": 0.375, "load_end": 0.5}
    assert hygiene.end_of_run(machine) == {"others_cpus": 0.375, "load_end": 0.5}  # closed once
    # and `warnings` closes an account the caller left open, so the busy verdict never misses it
    machine = {"cpu_start": reading(100.0, 5.0, 10.0), "load_start": 0.0, "load_end": 1.0, "cores": 2}
    (got,) = hygiene.warnings(machine, None)
    assert "other processes kept 0.38 CPUs busy during the run, beyond 0.25" in got and machine["others_cpus"] == 0.375


@pytest.mark.parametrize("others,load_start,expected", [
    (0.1, 4.9, []),                       # the README's case: a high load average from work done before the run
    (0.24, 0.0, []),
    (0.3, 0.0, ["other processes kept 0.30 CPUs busy"]),
    (1.9, 3.0, ["other processes kept 1.90 CPUs busy"]),
])
def test_busy_is_judged_by_other_processes_cpu_time_not_the_load_average(others, load_start, expected):
    machine = {"others_cpus": others, "load_start": load_start, "load_end": load_start + 1, "cores": 2}
    got = hygiene.warnings(machine, None)
    assert len(got) == len(expected) and all(e in g and "machine was busy" in g for e, g in zip(expected, got))


# A second of the run as /proc/stat and os.times would count it: 1.8 busy CPU-seconds on our CPUs, 0.9 of them ours.
@pytest.mark.parametrize("busy_end,expected", [(101.8, ["machine was busy (other processes kept 0.90 CPUs"]),
                                               (100.95, [])])  # only 0.05 CPUs of others: quiet
def test_the_run_account_opened_by_machine_info_and_closed_by_warnings(monkeypatch, busy_end, expected):
    """The readings by hand (a fake CPU clock), so the verdict is the same on a quiet and a busy machine."""
    readings = iter([reading(100.0, 5.0, 10.0), reading(busy_end, 5.9, 11.0)])
    monkeypatch.setattr(hygiene, "cpu_clock", lambda cpus=None: next(readings))
    machine = hygiene.machine_info({"threads": 1}, "cpu", None)
    got = hygiene.warnings(machine, None)
    assert machine["others_cpus"] == (0.9 if expected else 0.05)
    assert len(got) == len(expected) and all(e in g for e, g in zip(expected, got))


def test_cpu_clock_reads_our_cpus_busy_time_and_our_own():
    """The real reading's shape (no figure that depends on the machine's load)."""
    start = hygiene.cpu_clock()
    assert set(start) == {"busy_s", "own_s", "wall_s", "cpus"} and start["cpus"] == sorted(os.sched_getaffinity(0))
    end = hygiene.cpu_clock(start["cpus"])
    assert end["busy_s"] >= start["busy_s"] > 0 and end["own_s"] >= start["own_s"] > 0
    assert end["wall_s"] >= start["wall_s"]


@pytest.mark.parametrize("start,end,width,drift,expected", [
    (0.1, 1.2, 0.02, 0.03, []),                              # quiet: ours is the only load at the end
    (1.5, 2.6, 0.02, 0.03, ["machine was busy"]),           # something else ran throughout
    (0.1, 2.4, 0.02, 0.03, ["machine was busy"]),           # something else started meanwhile
    (0.1, 1.1, 0.30, 0.03, ["noise floor is wide"]),
    (0.1, 1.1, 0.02, 0.06, ["machine drifted"]),
])
def test_warnings_for_a_busy_machine_a_wide_floor_or_drift(start, end, width, drift, expected):
    """Without /proc/stat's figure (others_cpus) the load average decides, as before."""
    machine = {"load_start": start, "load_end": end, "cores": 2}
    floor = {"median": 1.0, "ci_low": 1.0 - width / 2, "ci_high": 1.0 + width / 2, "drift": drift}
    got = hygiene.warnings(machine, floor)
    assert len(got) == len(expected) and all(e in g for e, g in zip(expected, got))
    assert all(g.startswith("WARNING: ") and "\n" not in g for g in got)


def test_state_shift_is_the_median_rows_step_change_from_the_cost_table_to_the_pairs():
    row = lambda before, after: {"before_terms_us": {"step": before}, "terms_us": {"step": after}}
    rows = [row(300.0, 210.0), row(320.0, 240.0), row(200.0, 200.0)]  # -30 %, -25 %, 0 %
    assert hygiene.state_shift(rows) == pytest.approx(-0.25)
    assert hygiene.state_shift([row(200.0, 230.0)]) == pytest.approx(0.15)
    assert hygiene.state_shift([]) is None


@pytest.mark.parametrize("shift,expected", [(None, None), (0.09, None), (-0.09, None), (0.12, "12% slower"),
                                            (-0.25, "25% faster")])
def test_warnings_when_the_machine_changed_speed_between_the_cost_table_and_the_pairs(shift, expected):
    machine = {"load_start": 0.1, "load_end": 1.1, "cores": 2}
    got = hygiene.warnings(machine, None, shift=shift)
    if expected is None:
        assert got == []
    else:
        assert len(got) == 1 and expected in got[0] and "prediction made before the run" in got[0]


def test_a_repeat_report_does_not_count_its_own_previous_run_as_other_load():
    machine = {"load_start": 1.01, "load_end": 1.0, "cores": 2}  # report 2 of --repeat 2, just after report 1
    assert hygiene.warnings(machine, None) and not hygiene.warnings(machine, None, after_own_run=True)
