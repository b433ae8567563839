import pytest

from specdec.measure import schedule


def test_sections_share_the_time_left_and_fixed_work_just_runs(clock):
    seen = {}

    def section(name, took=0.0):
        def run(seconds):
            seen[name] = seconds
            clock.advance(took)
            return {name: True}

        return run

    budget = schedule.Budget(10.0)
    doc, spent = schedule.run_sections([
        schedule.Section("fixed", section("fixed", 2.0)),
        schedule.Section("a", section("a", 1.0), share=0.25),
        schedule.Section("b", section("b"), share=0.75),
    ], budget, log=lambda s: None)
    assert doc == {"fixed": True, "a": True, "b": True}
    # after 2 s of fixed work, a gets a quarter of the 8 s left; b, the last, all that is left after a's 1 s
    assert (seen["fixed"], seen["a"], seen["b"]) == (10.0, 2.0, 7.0)
    assert [s["section"] for s in spent] == ["fixed", "a", "b"]
    assert [(s["seconds"], s["allotted"]) for s in spent] == [(2.0, None), (1.0, 2.0), (0.0, 7.0)]


def test_budget_refuses_nonpositive_seconds_and_keeps_its_reserve(clock):
    with pytest.raises(ValueError, match="positive number of seconds, got 0"):
        schedule.Budget(0)
    budget = schedule.Budget(10.0, reserve=4.0)
    assert budget.left() == 6.0
    clock.advance(7.0)
    assert budget.left() == 0.0  # past the reserve: nothing left, never a negative allotment


def test_a_visit_rotates_the_order_and_keeps_between():
    order = []
    r = schedule.Runs("row", {n: (lambda item, n=n: order.append(n + item)) for n in "abc"}, ("a", "b"),
                      between=lambda: len(order), items=["1", "2"])
    for _ in range(3):
        r.visit()
    assert order == ["a1", "b1", "c1", "b2", "c2", "a2", "c1", "a1", "b1"]  # items cycle, the order rotates
    assert r.extra == [3, 6, 9] and r.visits == 3 and r.visit_items == [0, 1, 0]
    assert all(len(t) == 3 for t in r.times.values()) and len(r.ratios()) == 3


def _row(key, clock, seconds=0.0, calls=None):
    """A row whose one call "takes" `seconds` on the fake clock (and notes its key in `calls`)."""
    def fn(_):
        clock.advance(seconds)
        if calls is not None:
            calls.append(key)

    return schedule.Runs(key, {"a": fn}, ("a", "a"), warm_seconds=0.0)


def test_interleave_gives_every_row_its_minimum_then_stops_when_precise(clock):
    rows = [_row(i, clock) for i in range(3)]
    for r in rows:  # as if every ratio were 1.0 exactly: an interval of zero width once there are three
        r.width = lambda r=r: 0.0 if r.visits >= 3 else float("inf")
    rounds = schedule.interleave(rows, seconds=5.0, min_visits=4, precision=0.05, log=lambda s: None)
    assert rounds == 4 and [r.visits for r in rows] == [4, 4, 4]


def test_interleave_rotates_rows_and_ends_on_time(clock):
    calls = []
    rows = [_row(i, clock, 1.0, calls) for i in range(3)]
    schedule.interleave(rows, seconds=50.0, min_visits=1000, precision=0.0, log=lambda s: None)
    # a visit takes 1 s: the 50th ends exactly at the deadline, and a 51st would end past it
    assert clock.t == 150.0 and sum(r.visits for r in rows) == 50
    assert calls[:9] == [0, 1, 2, 1, 2, 0, 2, 0, 1]  # each round starts one row later
    # 16 whole rounds, then round 17 starts at row 1 (shift 16 % 3 = 1): rows 1 and 2 fit before it
    assert [r.visits for r in rows] == [16, 17, 17]


def test_the_first_round_runs_whatever_the_clock_says(clock):
    rows = [_row(i, clock, 1.0) for i in range(3)]
    assert schedule.interleave(rows, seconds=0.0, min_visits=5, precision=0.0, log=lambda s: None) == 1
    assert [r.visits for r in rows] == [1, 1, 1]


def test_after_the_minimum_the_widest_rows_get_the_time(clock):
    quiet, loud = _row("quiet", clock, 1.0), _row("loud", clock, 1.0)
    quiet.width = lambda: 0.0 if quiet.visits >= 3 else float("inf")
    loud.width = lambda: 0.5
    schedule.interleave([quiet, loud], seconds=30.0, min_visits=3, precision=0.01, log=lambda s: None)
    # three rounds of both (6 s), then loud alone until the deadline: 24 more visits
    assert (quiet.visits, loud.visits) == (3, 27)


def test_a_budget_counts_from_the_start_it_is_given(clock):
    """`specdec report` passes the moment the package was imported: start-up is spent out of the budget."""
    budget = schedule.Budget(10.0, reserve=1.0, start=clock.t - 3.0)
    assert (budget.elapsed(), budget.left()) == (3.0, 6.0)
    assert schedule.Budget(2.0, start=clock.t - 3.0).left() == 0.0
