import math

import numpy as np
import pytest

from specdec import stats


def test_summarize_median_range_and_bootstrap_ci():
    s = stats.summarize([1.0, 1.2, 0.9, 1.1, 1.3])
    assert (s.median, s.min, s.max, s.n) == (1.1, 0.9, 1.3, 5)
    assert 0.9 <= s.ci_low <= s.median <= s.ci_high <= 1.3
    assert s.spread == pytest.approx(0.4 / 1.1)
    assert s.noisy


def test_summarize_tight_and_degenerate():
    s = stats.summarize([2.0, 2.0, 2.0])
    assert (s.ci_low, s.ci_high, s.noisy) == (2.0, 2.0, False)
    s = stats.summarize([1.00, 1.02, 1.05, 1.01, 1.03])
    assert not s.noisy
    with pytest.raises(ValueError):
        stats.summarize([])


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


def test_refined_reduces_to_writeup_formula_when_loop_costs_nothing_extra():
    # verify round = step = T, draft char = c·T, every round drafts k: refined = cpp / (1 + k c)
    chars, k, c, passes = 240, 4, 0.05, 80
    refined = stats.refined_speedup(chars, passes, k * passes, 1.0, 1.0, c)
    assert refined == pytest.approx(stats.predicted_speedup(chars / passes, k, c))
    assert not math.isnan(refined)
