"""turns: the one way things are timed side by side (the report's timers, asv's harness, a user's suite)."""

import gc

import pytest

from specdec.measure import method, turns


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self) -> float:
        return self.t

    def costs(self, seconds: float):
        def fn():
            self.t += seconds
        return fn


def test_pair_is_b_over_a_in_either_order():
    clock = FakeClock()
    a, b = clock.costs(2.0), clock.costs(3.0)
    timer = lambda fn: turns.timed(fn, clock)
    assert turns.pair(a, b, timer) == 1.5 == turns.pair(a, b, timer, b_first=True)


def test_pair_runs_b_first_when_asked_with_the_collector_off():
    order, enabled = [], []
    fn = lambda name: (lambda: (order.append(name), enabled.append(gc.isenabled())))
    turns.pair(fn("a"), fn("b"), lambda f: (f(), 1.0)[1], b_first=True)
    assert order == ["b", "a"] and enabled == [False, False] and gc.isenabled()


def test_round_robin_rotates_over_every_round_warm_up_included():
    order = []
    got = turns.round_robin({n: (lambda n=n: order.append(n) or 1.0) for n in "abc"}, samples=3, number=1, warmup=1)
    assert "".join(order) == "abc" + "bca" + "cab" + "abc"  # the first round is the discarded warm-up
    assert got == {"a": [1.0] * 3, "b": [1.0] * 3, "c": [1.0] * 3}


def test_round_robin_keeps_a_turns_smallest_value_over_a_samples_rounds():
    values = iter([5.0, 7.0, 3.0, 4.0, 9.0, 6.0,  # warm-up sample: 3 rounds of (a, b), b first in round 2
                   2.0, 8.0, 1.0, 9.0, 4.0, 3.0])
    order = []
    def turn(name):
        def fn():
            order.append(name)
            return next(values)
        return fn
    got = turns.round_robin({"a": turn("a"), "b": turn("b")}, samples=1, number=3, warmup=1)
    # rounds: ab, ba, ab (warm-up); then ba, ab, ba: b=2, a=8; a=1, b=9; b=4, a=3
    assert "".join(order) == "ab" "ba" "ab" "ba" "ab" "ba"
    assert got == {"a": [1.0], "b": [2.0]}


def test_round_robin_without_rotation_keeps_the_order():
    order = []
    turns.round_robin({n: (lambda n=n: order.append(n) or 0.0) for n in "xy"}, samples=2, number=2, rotate=False)
    assert "".join(order) == "xy" * 6


def test_round_robin_keeps_what_a_turn_returns_with_one_round():
    got = turns.round_robin({"s": lambda: (1, "any")}, samples=2)
    assert got == {"s": [(1, "any"), (1, "any")]}


def test_round_robin_stops_when_asked_and_keeps_what_it_has():
    asked = []
    got = turns.round_robin({"x": lambda: 1.0}, samples=10, warmup=1, stop=lambda i: asked.append(i) or i >= 3)
    assert asked == [0, 1, 2, 3] and got == {"x": [1.0, 1.0]}


def test_round_robin_pauses_the_collector_over_a_sample_when_asked():
    seen = []
    turns.round_robin({"x": lambda: seen.append(gc.isenabled()) or 0.0}, samples=1, number=2, paused=True)
    turns.round_robin({"x": lambda: seen.append(gc.isenabled()) or 0.0}, samples=1, number=1)
    assert seen == [False] * 4 + [True] * 2 and gc.isenabled()


def test_gc_paused_collects_first_unless_told_not_to():
    starts = []
    count = lambda phase, info: starts.append(phase) if phase == "start" else None
    gc.callbacks.append(count)
    try:
        with turns.gc_paused():
            assert not gc.isenabled()
        collected = len(starts)
        with turns.gc_paused(collect=False):
            assert not gc.isenabled()
    finally:
        gc.callbacks.remove(count)
    assert collected >= 1 and len(starts) == collected and gc.isenabled()


def test_sampled_flattens_to_asvs_sampled_form():
    assert turns.sampled([[1, 2], (3, 4)]) == {"samples": [1.0, 2.0, 3.0, 4.0], "number": 1}
    with pytest.raises(ValueError, match="at least one sample"):
        turns.sampled([])


def test_the_file_loads_by_path_as_the_harness_loads_it():
    """asv's harness takes turns.py through the method's loader (an old commit's package cannot lend it): the
    file must import nothing of specdec."""
    loaded = method.load("turns.py")
    assert loaded is not turns and loaded.__name__ == "specdec_turns_method"
    assert loaded.pair(lambda: None, lambda: None, lambda fn: 2.0) == 1.0
