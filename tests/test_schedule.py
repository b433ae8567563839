import time

import pytest

from specdec.measure import schedule


def test_sections_share_the_time_left_and_fixed_work_just_runs():
    seen = {}

    def section(name, sleep=0.0):
        def run(seconds):
            seen[name] = seconds
            time.sleep(sleep)
            return {name: True}

        return run

    budget = schedule.Budget(10.0)
    doc, spent = schedule.run_sections([
        schedule.Section("fixed", section("fixed", 0.2)),
        schedule.Section("a", section("a"), share=0.25),
        schedule.Section("b", section("b"), share=0.75),
    ], budget, log=lambda s: None)
    assert doc == {"fixed": True, "a": True, "b": True}
    # after 0.2 s of fixed work, a gets a quarter of the ~9.8 s left; b, the last, all that a left unused
    assert seen["a"] == pytest.approx(9.8 * 0.25, abs=0.05) and seen["b"] == pytest.approx(9.8, abs=0.05)
    assert [s["section"] for s in spent] == ["fixed", "a", "b"] and spent[0]["allotted"] is None
    assert spent[0]["seconds"] >= 0.2


def test_budget_refuses_nonpositive_seconds_and_keeps_its_reserve():
    with pytest.raises(ValueError, match="positive number of seconds, got 0"):
        schedule.Budget(0)
    assert schedule.Budget(10.0, reserve=4.0).left() == pytest.approx(6.0, abs=0.01)


def test_a_visit_rotates_the_order_and_keeps_between():
    order = []
    r = schedule.Runs("row", {n: (lambda item, n=n: order.append(n + item)) for n in "abc"}, ("a", "b"),
                      between=lambda: len(order), items=["1", "2"])
    for _ in range(3):
        r.visit()
    assert order == ["a1", "b1", "c1", "b2", "c2", "a2", "c1", "a1", "b1"]  # items cycle, the order rotates
    assert r.extra == [3, 6, 9] and r.visits == 3 and r.visit_items == [0, 1, 0]
    assert all(len(t) == 3 for t in r.times.values()) and len(r.ratios()) == 3


def _row(key, a_seconds, b_seconds):
    return schedule.Runs(key, {"a": lambda _: time.sleep(a_seconds), "b": lambda _: time.sleep(b_seconds)},
                         ("a", "b"))


def test_interleave_gives_every_row_its_minimum_then_stops_when_precise():
    rows = [_row(i, 0.0, 0.0) for i in range(3)]
    for r in rows:  # as if every ratio were 1.0 exactly: an interval of zero width once there are three
        r.width = lambda r=r: 0.0 if r.visits >= 3 else float("inf")
    rounds = schedule.interleave(rows, seconds=5.0, min_visits=4, precision=0.05, log=lambda s: None)
    assert rounds == 4 and [r.visits for r in rows] == [4, 4, 4]


def test_interleave_rotates_rows_and_ends_on_time():
    calls = []
    rows = [schedule.Runs(i, {"a": (lambda _, i=i: (calls.append(i), time.sleep(0.01)))}, ("a", "a"))
            for i in range(3)]
    t0 = time.perf_counter()
    schedule.interleave(rows, seconds=0.5, min_visits=1000, precision=0.0, log=lambda s: None)
    assert time.perf_counter() - t0 < 0.5 + 0.05
    assert calls[:9] == [0, 1, 2, 1, 2, 0, 2, 0, 1]  # each round starts one row later
    assert max(r.visits for r in rows) - min(r.visits for r in rows) <= 1


def test_the_first_round_runs_whatever_the_clock_says():
    rows = [_row(i, 0.0, 0.0) for i in range(3)]
    assert schedule.interleave(rows, seconds=0.0, min_visits=5, precision=0.0, log=lambda s: None) == 1
    assert [r.visits for r in rows] == [1, 1, 1]


def test_after_the_minimum_the_widest_rows_get_the_time():
    import numpy as np

    quiet, loud = _row("quiet", 0, 0), _row("loud", 0, 0)
    quiet.width = lambda: 0.0 if quiet.visits >= 3 else np.inf
    loud.width = lambda: 0.5
    schedule.interleave([quiet, loud], seconds=0.3, min_visits=3, precision=0.01, log=lambda s: None)
    assert quiet.visits == 3 and loud.visits > 3


def test_a_budget_counts_from_the_start_it_is_given():
    """`specdec report` passes the moment the package was imported: start-up is spent out of the budget."""
    budget = schedule.Budget(10.0, reserve=1.0, start=time.perf_counter() - 3.0)
    assert budget.elapsed() == pytest.approx(3.0, abs=0.05)
    assert budget.left() == pytest.approx(6.0, abs=0.05)
    assert schedule.Budget(2.0, start=time.perf_counter() - 3.0).left() == 0.0
