"""measure/timing.py: timers, warm-ups sized by time, round-robin samples."""

from specdec.measure import timing

from tests.conftest import FakeClock


def test_timed_runs_with_the_garbage_collector_off_and_divides_by_the_calls():
    import gc

    seen = []
    fake = FakeClock()  # each call "takes" 2 s of the clock handed in
    assert timing.timed(lambda: (seen.append(gc.isenabled()), fake.advance(2.0)), number=3, clock=fake) == 2.0
    assert seen == [False] * 3 and gc.isenabled()


def test_warm_up_is_sized_by_time_with_a_minimum_of_calls(clock):
    """On the decision clock (here the fake one): each call "takes" 1 s, so the count is the same on a fast
    and on a loaded machine."""
    calls = []
    assert timing.warm_up(lambda: calls.append(1), seconds=0.0, min_calls=3) == 3
    assert timing.warm_up(lambda: clock.advance(1.0), seconds=5.0) == 5
    assert timing.warm_up(lambda: clock.advance(1.0), seconds=5.0, min_calls=8) == 8


def test_round_robin_interleaves_samples():
    order = []
    res = timing.round_robin({"x": lambda: order.append("x"), "y": lambda: order.append("y")}, samples=3, number=2)
    assert order == ["x", "x", "y", "y"] * 4  # one warm-up round, then three
    assert set(res) == {"x", "y"} and all(len(v) == 3 for v in res.values())


def test_round_robin_rotate_starts_each_round_one_turn_later():
    order = []
    res = timing.round_robin({n: (lambda n=n: order.append(n)) for n in "abc"}, samples=3, number=1, rotate=True)
    assert "".join(order) == "abc" + "bca" + "cab" + "abc"  # the first round is the discarded warm-up
    assert all(len(v) == 3 for v in res.values())


def test_round_robin_stops_at_its_deadline_after_the_minimum(clock):
    res = timing.round_robin({"x": lambda: None}, samples=50, number=1, deadline=clock.t - 1, min_samples=2)
    assert len(res["x"]) == 2
