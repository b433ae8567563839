"""The crossover rule `specdec load` and `specdec batch` share (`measure.crossover`): verdicts, where along the
levels speculation stops paying for every order of verdicts, the crossing's interpolation, and the crossing's own
re-run interval (by hand where it is exact, and its coverage over simulated sweeps with a known crossing)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from specdec.measure.load import crossover as xo
from specdec.measure.load import load_stats
from specdec.measure.load.load_driver import Record
from specdec.report.batch import batch_section
from specdec.report.engines.load_render import crossover_line

VERDICTS = [xo.PAYS, xo.COSTS, xo.NOT_DISTINGUISHABLE, xo.TOO_FEW]
sequences = st.lists(st.sampled_from(VERDICTS), min_size=1, max_size=9)


def _check_found(verdicts, f):
    """What `find` promises, read off the sequence itself."""
    judged = [i for i, v in enumerate(verdicts) if v in xo.JUDGED]
    paid = [i for i in judged if verdicts[i] == xo.PAYS]
    assert f["answer"] in xo.ANSWERS
    if not judged:
        assert f == {"answer": "no level judged", "first_paid": None, "stop": None, "before": None}
        return
    if not paid:
        assert f == {"answer": "never pays here", "first_paid": None, "stop": None, "before": None}
        return
    assert f["first_paid"] == paid[0]
    after = [i for i in judged if i > paid[0]]
    if f["answer"] == "crossover":
        stop, before = f["stop"], f["before"]
        assert verdicts[stop] in (xo.COSTS, xo.NOT_DISTINGUISHABLE) and verdicts[before] == xo.PAYS
        assert paid[0] <= before < stop and all(verdicts[i] == xo.PAYS for i in judged if paid[0] <= i < stop)
        assert not any(before < i < stop for i in judged)  # the paying level judged just below it
    else:
        assert f["stop"] is None and f["before"] is None and all(verdicts[i] == xo.PAYS for i in after)
        below_pays = all(verdicts[i] == xo.PAYS for i in judged if i < paid[0])
        assert f["answer"] == ("pays at every level tried" if below_pays else "pays from a level on")


@given(sequences)
def test_every_order_of_verdicts_has_an_answer(verdicts):
    _check_found(verdicts, xo.find(verdicts))


@pytest.mark.parametrize("verdicts,answer,first,stop,before", [
    # the case: the lowest level within its noise, the ones above it paying (StopIteration before)
    (["not distinguishable", "pays", "pays"], "pays from a level on", 1, None, None),
    (["costs", "too few pairs", "pays"], "pays from a level on", 2, None, None),
    (["pays", "not distinguishable", "pays", "pays"], "crossover", 0, 1, 0),  # the first stop, whatever pays above
    (["pays", "too few pairs", "costs"], "crossover", 0, 2, 0),  # a level without a verdict is skipped
    (["not distinguishable", "pays", "pays", "costs"], "crossover", 1, 3, 2),
    (["too few pairs", "pays"], "pays at every level tried", 1, None, None),
    (["pays"], "pays at every level tried", 0, None, None),
    (["costs", "not distinguishable"], "never pays here", None, None, None),
    (["too few pairs", "too few pairs"], "no level judged", None, None, None),
])
def test_the_crossover_by_hand(verdicts, answer, first, stop, before):
    assert xo.find(verdicts) == {"answer": answer, "first_paid": first, "stop": stop, "before": before}


@pytest.mark.parametrize("speedup,aa,expected", [
    ({"ci_low": 1.10, "ci_high": 1.30, "n": 3}, {"ci_low": 0.95, "ci_high": 1.05}, "pays"),
    ({"ci_low": 1.04, "ci_high": 1.30, "n": 3}, {"ci_low": 0.95, "ci_high": 1.05}, "not distinguishable"),
    ({"ci_low": 1.04, "ci_high": 1.30, "n": 3}, None, "pays"),  # no A/A: against 1 alone
    ({"ci_low": 0.70, "ci_high": 0.94, "n": 3}, {"ci_low": 0.95, "ci_high": 1.05}, "costs"),
    ({"ci_low": 0.70, "ci_high": 0.96, "n": 3}, {"ci_low": 0.95, "ci_high": 1.05}, "not distinguishable"),
    # two pairs: the interval is their range widened by √2, no 95 % interval: no verdict, however far above 1
    ({"ci_low": 3.0, "ci_high": 4.0, "n": 2}, {"ci_low": 0.99, "ci_high": 1.01}, "too few pairs"),
    (None, None, "too few pairs"),
])
def test_the_verdict_by_hand(speedup, aa, expected):
    assert xo.verdict(speedup, aa) == expected


def _rec(done, tokens=10):
    return Record(0, 0, True, 0.0, 0.0, 0.1, done, tokens, text="x")


@pytest.mark.parametrize("visits,expected", [(2, "too few pairs"), (3, "pays")])
def test_a_load_level_needs_three_visits_for_a_verdict(visits, expected):
    # spec-on twice as fast in every visit; with two visits the "interval" is a range widened by √2, which can
    # lie above 1 and above the A/A, yet it is no 95 % interval: no verdict rests on it
    off = [[_rec(2.0 + 0.1 * v)] for v in range(visits)]
    on = [[_rec(1.0 + 0.05 * v)] for v in range(visits)]
    off2 = [[_rec(2.0 + 0.1 * v + 0.01 * (-1) ** v)] for v in range(visits)]
    s = load_stats.paired(off, on, load_stats.per_token_time)
    aa = load_stats.paired(off, off2, load_stats.per_token_time)
    assert s["ci_low"] > max(1.0, aa["ci_high"])  # the same test a verdict makes: it would read "pays"
    assert load_stats.verdict(s, aa) == expected
    assert s["pairs"] == [(pytest.approx((2.0 + 0.1 * v) / 10), pytest.approx((1.0 + 0.05 * v) / 10))
                          for v in range(visits)]


def test_a_crossing_is_interpolated_linearly_against_log_load():
    # 1.3 at 2, 0.9 at 4: 1 is 0.3 / 0.4 of the way from log 2 to log 4
    assert xo.crossing([1, 2, 4, 8], [1.6, 1.3, 0.9, 0.7]) == pytest.approx(2 ** 1.75)
    assert xo.crossing([1, 2, 4], [0.9, 1.3, 0.8]) == 1.0  # at or below 1 from the first level
    assert xo.crossing([1, 2, 4], [1.5, 1.2, 1.1]) is None  # beyond the levels tried
    assert xo.crossing([2, 4], [1.2, 1.0]) == 4.0
    np.testing.assert_allclose(xo.crossings([1, 2, 4], [[1.5, 1.2, 1.1], [1.2, 0.8, 0.7]]), [math.inf, 2 ** 0.5])


def _exact(speedups, visits=3):
    """Per level, visits whose every ratio is the level's speedup (the machine's state scaling both arms alike):
    every resample has the same ratio of totals, so the interval is the estimate's crossing exactly."""
    return [np.array([[s * (1 + 0.1 * v), 1 + 0.1 * v] for v in range(visits)]) for s in speedups]


def test_the_crossing_interval_of_noiseless_visits_is_the_crossing_itself():
    lo, hi = xo.crossing_interval([1, 2, 4], _exact([1.5, 1.2, 0.8]))
    assert lo == pytest.approx(2 ** 1.5) and hi == pytest.approx(2 ** 1.5)  # 0.2 / 0.4 of log 2 to log 4
    assert xo.crossing_interval([1, 2, 4], _exact([1.5, 1.2, 1.1])) == (None, None)  # beyond the levels tried


def test_the_crossing_interval_is_seeded():
    pairs = [np.random.default_rng(i).lognormal(0, 0.1, (4, 2)) * [s, 1] for i, s in enumerate([1.5, 1.1, 0.8])]
    first = xo.crossing_interval([1, 2, 4], pairs, seed=3)
    assert first == xo.crossing_interval([1, 2, 4], pairs, seed=3)
    assert first != xo.crossing_interval([1, 2, 4], pairs, seed=4)


LOADS = np.array([1.0, 2, 4, 8, 16, 32])
TRUE_CROSSING = 6.0


def _sweep(rng, visits):
    """A simulated sweep: the speedup falls linearly in log load, 1 at 6 clients (between the levels 4 and 8),
    so interpolation recovers the truth exactly; per visit the machine's state (20 %) scales both arms alike,
    and each arm's own noise is 5 %."""
    truth = 1 - 0.15 * np.log2(LOADS / TRUE_CROSSING)
    state = np.exp(rng.normal(0, 0.2, (len(LOADS), visits)))
    off = state * np.exp(rng.normal(0, 0.05, state.shape))
    on = state * np.exp(rng.normal(0, 0.05, state.shape)) / truth[:, None]
    return list(np.stack([off, on], axis=-1))


@pytest.mark.parametrize("visits", [3, 6])
def test_the_crossing_interval_covers_the_true_crossing_and_a_reruns(visits):
    rng = np.random.default_rng(47)
    sweeps = [_sweep(rng, visits) for _ in range(201)]
    est = [xo.crossings(LOADS, [p[:, 0].sum() / p[:, 1].sum() for p in s]) for s in sweeps]
    intervals = [xo.crossing_interval(LOADS, s, seed=i) for i, s in enumerate(sweeps[:200])]
    bounds = np.array([(lo, math.inf if hi is None else hi) for lo, hi in intervals])
    truth = np.mean((bounds[:, 0] <= TRUE_CROSSING) & (TRUE_CROSSING <= bounds[:, 1]))
    rerun = np.mean([lo <= est[i + 1] <= hi for i, (lo, hi) in enumerate(bounds)])  # the next, independent sweep
    assert truth >= 0.9 and rerun >= 0.9, (truth, rerun)
    # the check can fail: the same intervals cut to a quarter of their width about the estimate miss too often
    quarter = np.mean([e - (e - lo) / 4 <= TRUE_CROSSING <= e + (hi - e) / 4 for e, (lo, hi) in zip(est, bounds)])
    assert quarter < 0.9


def _level(value, speedup, verdict, visits=3):
    pairs = _exact([speedup], visits)[0].tolist()
    return {"value": value, "verdict": verdict, "speedup": {"estimate": speedup, "ci_low": speedup - 0.1,
                                                            "ci_high": speedup + 0.1, "n": visits, "pairs": pairs}}


@given(sequences)
@settings(max_examples=60, deadline=None)
def test_a_load_sweep_concludes_whatever_order_its_verdicts_come_in(verdicts):
    speedup = {xo.PAYS: 1.4, xo.COSTS: 0.7, xo.NOT_DISTINGUISHABLE: 1.0, xo.TOO_FEW: 1.2}
    rows = [_level(2 ** i, speedup[v], v) for i, v in enumerate(verdicts)]
    c = load_stats.crossover(rows)
    f = xo.find(verdicts)
    assert c["answer"] == f["answer"]
    if c["answer"] == "crossover":
        assert (c["level"], c["verdict"]) == (2 ** f["stop"], verdicts[f["stop"]])
    elif c["answer"] == "pays from a level on":
        assert c["level"] == 2 ** f["first_paid"]
    else:
        assert c["level"] is None


def test_the_load_crossover_gives_the_crossing_and_its_own_interval():
    rows = [_level(1, 1.6, "pays"), _level(2, 1.3, "pays"), _level(4, 0.9, "not distinguishable"),
            _level(8, 0.7, "costs")]
    c = load_stats.crossover(rows)
    assert (c["answer"], c["level"], c["verdict"]) == ("crossover", 4, "not distinguishable")
    # noiseless visits: the crossing's interval is the crossing itself, where the pointwise bounds' crossings
    # (ci_low 1.2 → 0.8, ci_high 1.4 → 1.0) would have read 2^1.5 to 4
    assert (c["estimate"], c["ci_low"], c["ci_high"]) == pytest.approx((2 ** 1.75,) * 3)


def test_the_load_crossover_reads_only_past_the_first_paying_level():
    # 2/s is within its noise, 6/s pays, 16/s does not: it stops at 16; the curve starts at 6/s, and above 1
    # there, it crosses nowhere in the levels tried
    rows = [_level(2, 1.13, "not distinguishable"), _level(6, 1.32, "pays"), _level(16, 1.29, "not distinguishable")]
    c = load_stats.crossover(rows)
    assert c == {"answer": "crossover", "level": 16, "verdict": "not distinguishable", "estimate": None,
                 "ci_low": None, "ci_high": None}
    assert load_stats.crossover(rows[:2]) == {"answer": "pays from a level on", "level": 6}
    assert load_stats.crossover([]) == {"answer": "no level judged", "level": None}


def test_the_crossover_line_names_the_crossings_interval_and_where_it_pays_from():
    c = {"answer": "crossover", "level": 2, "verdict": "not distinguishable", "estimate": None, "ci_low": 7.36,
         "ci_high": None}
    assert crossover_line("concurrency", {**c, "ci_low": None}).endswith(
        "95 % re-run interval of that crossing beyond the levels tried to beyond the levels tried.")
    assert crossover_line("concurrency", c) == (
        "**concurrency**: speculation stops paying at 2 clients (the first level tried after a paying one that does "
        "not pay: not distinguishable); its speedup's estimate crosses 1 beyond the levels tried, 95 % re-run "
        "interval of that crossing 7.36 to beyond the levels tried.")
    assert crossover_line("rate", {"answer": "pays from a level on", "level": 6.0}) == (
        "**rate**: pays from 6 requests/s on (it does not pay below that).")


FLOOR = {"measured": 1.0, "ci_low": 0.97, "ci_high": 1.03, "pairs": 6}
INTERVAL = {xo.PAYS: (1.4, 1.2, 1.6, 5), xo.COSTS: (0.7, 0.6, 0.8, 5), xo.NOT_DISTINGUISHABLE: (1.0, 0.9, 1.1, 5),
            xo.TOO_FEW: (1.4, 1.2, 1.6, 2)}


@given(sequences)
def test_batch_and_load_decide_by_the_same_rule(verdicts):
    # the same intervals against the same A/A: the batch section's verdicts and answer are the shared rule's
    rows = [{"draft": "d", "batch": 2 ** i, "measured": m, "ci_low": lo, "ci_high": hi, "pairs": n}
            for i, (m, lo, hi, n) in enumerate(INTERVAL[v] for v in verdicts)]
    c = batch_section.crossover(rows, FLOOR)
    assert c["verdicts"] == {str(2 ** i): v for i, v in enumerate(verdicts)}
    assert [load_stats.verdict({"ci_low": r["ci_low"], "ci_high": r["ci_high"], "n": r["pairs"]}, FLOOR)
            for r in rows] == verdicts  # what `specdec load` would say of the same intervals
    f = xo.find(verdicts)
    assert c["answer"] == f["answer"]
    judged = [i for i, v in enumerate(verdicts) if v in xo.JUDGED]
    expected = {"crossover": f["stop"], "never pays here": judged[0] if judged else None}.get(c["answer"])
    assert c["batch"] == (None if expected is None else 2 ** expected)
