import numpy as np
import pytest
from scipy import stats as sstats

import specdec
from specdec import exactness, sampling

ALL_DRAFTS = list(specdec.DRAFTS)


def test_total_variation_by_hand():
    assert exactness.total_variation(np.array([5.0, 3.0, 2.0]), np.array([0.5, 0.3, 0.2])) == 0.0
    assert exactness.total_variation(np.array([10.0, 0.0]), np.array([0.5, 0.5])) == 0.5
    assert exactness.total_variation(np.array([3.0, 1.0]), np.array([0.5, 0.5])) == pytest.approx(0.25)


def test_chi_square_pools_sparse_cells():
    p = np.array([0.5, 0.49, 0.005, 0.005])
    # 2000 draws: cells 3 and 4 expect 10 each, kept. chi2 = 10²/10 + 10²/10 = 20 on 3 df.
    assert exactness.chi_square_p(np.array([1000.0, 980.0, 20.0, 0.0]), p) == pytest.approx(
        sstats.chi2.sf(20.0, 3))
    # 400 draws: cells 3 and 4 expect 2 each -> pooled (10 seen, 4 expected), still under 5, so merged into
    # the smallest other cell: 190 + 10 seen against 196 + 4 expected -> a perfect fit.
    assert exactness.chi_square_p(np.array([200.0, 190.0, 10.0, 0.0]), p) == pytest.approx(1.0)


def test_baseline_tv_shrinks_like_one_over_sqrt_n():
    p = np.full(84, 1 / 84)
    small = np.median(exactness.baseline_tv(p, 2_000, 0))
    large = np.median(exactness.baseline_tv(p, 32_000, 0))
    assert large == pytest.approx(small / 4, rel=0.25)


@pytest.mark.parametrize("draft", ALL_DRAFTS)
def test_verify_passes_for_every_draft(target, draft_factory, draft):
    row = specdec.verify(target, {draft: draft_factory(draft)}, k=4, samples=20_000, seed=0)[0]
    assert row["p_value"] > 1e-3
    assert row["tv"] <= row["baseline_tv_max"] * 1.2


@pytest.mark.parametrize("broken", ["always_accept", "residual_is_p"])
def test_verify_catches_a_broken_rule(target, draft_factory, monkeypatch, broken):
    """Negative control: the counted character really goes through the draft and the rule."""
    if broken == "always_accept":
        monkeypatch.setattr(sampling, "accept_reject", lambda p, q, drafted, rng: (len(drafted), 0))
    else:
        monkeypatch.setattr(sampling, "residual", lambda p, q: p / p.sum())
    row = specdec.verify(target, {"bigram": draft_factory("bigram")}, k=4, samples=20_000, seed=0)[0]
    assert row["p_value"] < 1e-3
    assert row["tv"] > row["baseline_tv_max"]


def test_greedy_equality_catches_a_broken_rule(target, draft_factory, monkeypatch):
    expected = specdec.generate(target, "ROMEO:", 200, seed=0, temperature=0).text
    monkeypatch.setattr(sampling, "accept_reject", lambda p, q, drafted, rng: (len(drafted), int(p[-1].argmax())))
    out = specdec.speculative_generate(target, draft_factory("bigram"), "ROMEO:", 200, k=4, seed=0, temperature=0)
    assert out.text != expected


def test_verify_is_deterministic(target, draft_factory):
    a = specdec.verify(target, {"int4": draft_factory("int4")}, k=2, samples=2_000, seed=7)
    b = specdec.verify(target, {"int4": draft_factory("int4")}, k=2, samples=2_000, seed=7)
    assert a == b and a[0]["samples"] == 2_000 and a[0]["k"] == 2
