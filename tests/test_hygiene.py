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


@pytest.mark.parametrize("start,end,width,drift,expected", [
    (0.1, 1.2, 0.02, 0.03, []),                              # quiet: ours is the only load at the end
    (1.5, 2.6, 0.02, 0.03, ["machine was busy"]),           # something else ran throughout
    (0.1, 2.4, 0.02, 0.03, ["machine was busy"]),           # something else started meanwhile
    (0.1, 1.1, 0.30, 0.03, ["noise floor is wide"]),
    (0.1, 1.1, 0.02, 0.06, ["machine drifted"]),
])
def test_warnings_for_a_busy_machine_a_wide_floor_or_drift(start, end, width, drift, expected):
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
