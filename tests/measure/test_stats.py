import math

import numpy as np
import pytest

from specdec.measure import stats


def test_summarize_median_range_and_a_symmetric_rerun_interval():
    s = stats.summarize([1.0, 1.2, 0.9, 1.1, 1.3])
    assert (s.median, s.min, s.max, s.n) == (1.1, 0.9, 1.3, 5)
    assert s.ci_low < s.median < s.ci_high
    assert s.median - s.ci_low == pytest.approx(s.ci_high - s.median)
    assert s.width == pytest.approx((s.ci_high - s.ci_low) / 1.1)
    doubled = stats.summarize([2.0, 2.4, 1.8, 2.2, 2.6])  # a relative width does not depend on the scale
    assert doubled.width == pytest.approx(s.width)


def test_summarize_tight_few_and_empty():
    s = stats.summarize([2.0, 2.0, 2.0])
    assert (s.ci_low, s.ci_high, s.width) == (2.0, 2.0, 0.0)
    two = stats.summarize([1.0, 2.0])  # nothing to resample: the range, widened by √2 about the median
    assert (two.ci_low, two.ci_high) == pytest.approx((1.5 - 0.5 * math.sqrt(2), 1.5 + 0.5 * math.sqrt(2)))
    assert two.width == math.inf  # below three values an interval says nothing
    with pytest.raises(ValueError):
        stats.summarize([])


def test_a_rerun_interval_is_a_95_percent_interval_from_three_values_on():
    # below MIN_INTERVAL the bounds are a range widened by √2 (no confidence: no verdict rests on them, see
    # test_crossover.py); from it on, a bootstrap: the same three values give another, finite-width interval
    assert stats.MIN_INTERVAL == 3
    r = math.sqrt(2)
    assert stats.rerun_interval([1.0, 2.0]) == pytest.approx((1.5 - 0.5 * r, 1.5 + 0.5 * r))
    three = stats.summarize([1.0, 2.0, 1.5])
    assert math.isfinite(three.width) and (three.ci_low, three.ci_high) != pytest.approx((1.5 - 0.5 * r, 1.5 + 0.5 * r))
    assert stats.summarize([1.0, 2.0]).width == math.inf


@pytest.mark.parametrize("n,b", [(1, 1), (7, 1), (8, 2), (26, 2), (27, 3), (64, 4)])
def test_block_length_is_the_cube_root_rounded_down(n, b):
    assert stats._block_length(n) == b


def test_rerun_interval_covers_an_independent_reruns_median():
    """What the interval promises: 200 pairs of independent runs of 15 noisy ratios each; run one's interval
    contains run two's median about 95 % of the time (a CI of the median alone would give ~83 %)."""
    rng = np.random.default_rng(7)
    hits = 0
    for trial in range(200):
        a, b = rng.normal(1.0, 0.05, 15), rng.normal(1.0, 0.05, 15)
        lo, hi = stats.rerun_interval(a, seed=trial)
        hits += lo <= np.median(b) <= hi
    assert 0.88 <= hits / 200 <= 0.995


def test_rerun_interval_widens_when_neighbours_are_correlated():
    """A slow drift across the run (neighbouring pairs alike) must not look like precision."""
    rng = np.random.default_rng(3)
    noise = rng.normal(0, 0.02, 27)
    drift = 1.0 + 0.1 * np.sin(np.linspace(0, 3, 27)) + noise
    shuffled = rng.permutation(drift)
    lo_d, hi_d = stats.rerun_interval(drift)
    lo_s, hi_s = stats.rerun_interval(shuffled)
    assert hi_d - lo_d > hi_s - lo_s


def test_drift_by_hand():
    # halves [0, 0] | [1, 1]: d = 1, no spread within -> tau^2 = 1
    assert stats.drift([np.array([0.0, 0.0, 1.0, 1.0])]) == (1.0, 1)
    # the second row: halves [0, 2] | [0, 2], d = 0, v = 2/2 + 2/2 -> term -2; mean(1, -2) < 0 -> tau 0
    assert stats.drift([np.array([0.0, 0.0, 1.0, 1.0]), np.array([0.0, 2.0, 0.0, 2.0])]) == (0.0, 2)
    # too short to split: not pooled
    assert stats.drift([np.array([0.0, 1.0, 2.0])]) == (0.0, 0)


def test_drift_finds_a_shift_between_stretches_and_not_in_a_steady_machine():
    rng = np.random.default_rng(1)
    steady = [rng.normal(0.0, 0.05, 10) for _ in range(200)]
    shifted = [x + np.repeat(rng.normal(0.0, 0.04, 2), 5) for x in steady]  # each half moved by N(0, 0.04)
    tau_steady, _ = stats.drift(steady)
    tau_shifted, rows = stats.drift(shifted)
    assert rows == 200
    assert tau_steady < 0.015
    assert 0.04 < tau_shifted < 0.07  # the halves' difference has sd 0.04·√2 ≈ 0.057


def test_intervals_with_drift_cover_a_rerun_in_another_stretch():
    """Two runs of 20 rows, 10 pairs each; the machine's state moves every row's ratio by N(0, 0.04) from one
    half-run to the next. The plain interval misses the other run's median far more often than 5 %; with τ
    estimated from the run's own halves it covers about 95 %."""
    rng = np.random.default_rng(11)

    def one_run():
        return [np.exp(rng.normal(0.0, 0.04, 10) + np.repeat(rng.normal(0.0, 0.04, 2), 5)) for _ in range(20)]

    plain = widened = total = 0
    for _ in range(40):
        first, second = one_run(), one_run()
        tau, _ = stats.drift([np.log(x) for x in first])
        for x, y in zip(first, second):
            s = stats.summarize(x)
            w = stats.with_drift(s, tau)
            plain += s.ci_low <= np.median(y) <= s.ci_high
            widened += w.ci_low <= np.median(y) <= w.ci_high
            total += 1
    assert plain / total < 0.88
    assert widened / total >= 0.9


def test_with_drift_adds_in_quadrature_by_hand():
    s = stats.Summary(2.0, 2.0, 1.5, 2.6, 1.7, 2.4, 5)
    w = stats.with_drift(s, 0.1)
    extra = 1.959963984540054 * 0.1 * 2.0
    assert w.ci_low == pytest.approx(2.0 - math.hypot(0.3, extra))
    assert w.ci_high == pytest.approx(2.0 + math.hypot(0.4, extra))
    assert (w.estimate, w.median, w.min, w.max, w.n) == (2.0, 2.0, 1.5, 2.6, 5)
    assert stats.with_drift(s, 0.0) == s


def test_alpha_by_maximum_likelihood_by_hand():
    # k = 2: rounds with 0, 1, 2 accepted = 2, 1, 1 -> accepted 1 + 2 = 3, rounds with a rejection 3: α = 3/6
    fit = stats.acceptance_alpha([2, 1, 1], 2)
    assert fit.alpha == pytest.approx(0.5)
    # accepted / drafted (3 of 8) is not α: it counts the drafts discarded after a rejection
    assert fit.alpha > 3 / 8


def test_bunched_only_when_the_histogram_rejects_the_geometric_model():
    # all-or-nothing rounds: α = 200 / 250 = 0.8, the model expects 20, 16, 12.8, 10.2, 41 -> bunched
    fit = stats.acceptance_alpha([50, 0, 0, 0, 50], 4)
    assert fit.alpha == pytest.approx(0.8) and fit.bunched and fit.p_value < 1e-6
    # the model's own expected counts at α = 0.8 fit it
    geometric = stats.acceptance_alpha([20, 16, 13, 10, 41], 4)
    assert geometric.alpha == pytest.approx(0.8, abs=0.01) and not geometric.bunched and geometric.p_value > 0.5
    # too few rejections to test: no verdict
    assert stats.acceptance_alpha([0, 0, 0, 0, 9], 4) == stats.AlphaFit(1.0, None, False)


@pytest.mark.parametrize("cpp,k,c,expected", [
    (1.29, 1, 0.004, 1.29 / 1.004),
    (5.88, 8, 1.059, 5.88 / 9.472),
    (3.0, 4, 0.0, 3.0),
    (1.0, 2, 0.5, 0.5),
])
def test_predicted_speedup_is_the_writeup_formula(cpp, k, c, expected):
    assert stats.predicted_speedup(cpp, k, c) == pytest.approx(expected)


@pytest.mark.parametrize("alpha,k,expected", [
    (0.5, 1, 1.5),          # 1 + α
    (0.5, 2, 1.75),         # 1 + α + α²
    (0.0, 8, 1.0),          # nothing accepted: one character per round
    (1.0, 4, 5.0),          # everything accepted: k + 1
    (0.9, 0, 1.0),          # k = 0 is target-only
    (0.8, 3, 1 + 0.8 + 0.64 + 0.512),
])
def test_expected_length_by_hand(alpha, k, expected):
    assert stats.expected_length(alpha, k) == pytest.approx(expected)


def test_expected_length_is_continuous_as_alpha_goes_to_1():
    assert stats.expected_length(1 - 1e-9, 4) == pytest.approx(5.0, rel=1e-6)


def test_expected_length_rejects_bad_input():
    with pytest.raises(ValueError):
        stats.expected_length(1.5, 2)
    with pytest.raises(ValueError):
        stats.expected_length(0.5, -1)


def test_optimal_k_by_hand():
    # α = 0.5, c = 0.1: E/(1+kc) = 1.5/1.1=1.364, 1.75/1.2=1.458, 1.875/1.3=1.442 -> k = 2
    assert stats.optimal_k(0.5, 0.1) == 2
    assert stats.optimal_k(0.9, 1.0) == 1      # a draft as costly as the target: smallest k
    assert stats.optimal_k(1.0, 0.0, k_max=8) == 8  # free and perfect: as many as allowed


def test_refined_speedup_by_hand():
    # 200 chars; target-only step 500 µs -> 100 000 µs. Speculative: 50 rounds of 700 µs + 200 drafted x 20 µs
    # = 35 000 + 4 000 = 39 000 µs -> 2.5641x.
    assert stats.refined_speedup(200, 50, 200, 500.0, 700.0, 20.0) == pytest.approx(100_000 / 39_000)
    t = stats.refined_terms(200, 50, 200, 500.0, 700.0, 20.0)
    assert t["verify_share"] == pytest.approx(35 / 39) and t["draft_share"] == pytest.approx(4 / 39)
    assert t["first_share"] == 0 and t["speedup"] == pytest.approx(100_000 / 39_000)


def test_refined_speedup_prices_each_generations_first_pass_apart():
    # The same counts over 2 generations; a first step costs 2 000 µs, a first round 3 000 µs with its 4 drafts.
    # Target-only: 198·500 + 2·2 000 = 103 000. Speculative: 48·700 + (200 - 2·4)·20 + 2·3 000
    # = 33 600 + 3 840 + 6 000 = 43 440.
    got = stats.refined_speedup(200, 50, 200, 500.0, 700.0, 20.0, runs=2, first_step_us=2000.0,
                                first_round_us=3000.0, first_drafted=4)
    assert got == pytest.approx(103_000 / 43_440)
    t = stats.refined_terms(200, 50, 200, 500.0, 700.0, 20.0, 2, 2000.0, 3000.0, 4)
    assert (t["target_only_us"], t["speculative_us"]) == pytest.approx((103_000, 43_440))
    assert t["first_share"] == pytest.approx(6_000 / 43_440)
    assert t["verify_share"] + t["draft_share"] + t["first_share"] == pytest.approx(1.0)


def test_refined_reduces_to_writeup_formula_when_loop_costs_nothing_extra():
    # verify round = step = T, draft char = c·T, every round drafts k: refined = cpp / (1 + k c)
    chars, k, c, passes = 240, 4, 0.05, 80
    refined = stats.refined_speedup(chars, passes, k * passes, 1.0, 1.0, c)
    assert refined == pytest.approx(stats.predicted_speedup(chars / passes, k, c))
    assert not math.isnan(refined)
