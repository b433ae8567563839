import numpy as np
import pytest
from scipy import stats as sstats

import specdec
from specdec.measure import exactness
from specdec.decoding import rule
from specdec.measure import stats

ALL_DRAFTS = list(specdec.DRAFTS)


def test_total_variation_by_hand():
    assert exactness.total_variation(np.array([5.0, 3.0, 2.0]), np.array([0.5, 0.3, 0.2])) == 0.0
    assert exactness.total_variation(np.array([10.0, 0.0]), np.array([0.5, 0.5])) == 0.5
    assert exactness.total_variation(np.array([3.0, 1.0]), np.array([0.5, 0.5])) == pytest.approx(0.25)


def test_chi_square_pools_sparse_cells():
    p = np.array([0.5, 0.49, 0.005, 0.005])
    # 2000 draws: cells 3 and 4 expect 10 each, kept. chi2 = 10²/10 + 10²/10 = 20 on 3 df.
    assert stats.chi_square_p(np.array([1000.0, 980.0, 20.0, 0.0]), p) == pytest.approx(
        sstats.chi2.sf(20.0, 3))
    # 400 draws: cells 3 and 4 expect 2 each -> pooled (10 seen, 4 expected), still under 5, so merged into
    # the smallest other cell: 190 + 10 seen against 196 + 4 expected -> a perfect fit.
    assert stats.chi_square_p(np.array([200.0, 190.0, 10.0, 0.0]), p) == pytest.approx(1.0)


def test_baseline_tv_shrinks_like_one_over_sqrt_n():
    p = np.full(84, 1 / 84)
    small = np.median(exactness.baseline_tv(p, 2_000, 0))
    large = np.median(exactness.baseline_tv(p, 32_000, 0))
    assert large == pytest.approx(small / 4, rel=0.25)


def _break(monkeypatch, broken):
    if broken == "always_accept":
        monkeypatch.setattr(rule, "accept_reject", lambda p, q, drafted, rng: (len(drafted), 0))
    else:
        monkeypatch.setattr(rule, "residual", lambda p, q: p / p.sum())


@pytest.mark.parametrize("broken", ["always_accept", "residual_is_p"])
def test_verify_catches_a_broken_rule(target, draft_factory, monkeypatch, broken):
    """Negative control: the counted character really goes through the draft and the rule."""
    _break(monkeypatch, broken)
    (row,) = specdec.verify(target, {"bigram": draft_factory("bigram")}, k=4, samples=20_000, seed=0)
    assert row["verdict"] == "CHECK" and row["tv"] > row["baseline_tv_max"]


@pytest.mark.parametrize("p_values,threshold,verdicts", [
    ([0.5, 0.0002, None], 0.0005, ["exact", "CHECK", "exact"]),  # two rows tested: 0.001 / 2
    ([0.0005, 0.00051], 0.0005, ["CHECK", "exact"]),  # at the threshold is CHECK
    ([1e-4] + [0.9] * 9, 0.0001, ["CHECK"] + ["exact"] * 9),
    ([None], 0.001, ["exact"]),  # the target sampled directly: the reference itself
])
def test_verdicts_hold_the_report_wide_false_alarm_rate_by_bonferroni(p_values, threshold, verdicts):
    rows = exactness.verdicts([{"draft": str(i), "p_value": p, "tv": 1.0, "baseline_tv_max": 0.0}
                               for i, p in enumerate(p_values)])
    assert [r["verdict"] for r in rows] == verdicts  # TV far above its baseline decides nothing
    assert all(r["p_threshold"] == pytest.approx(threshold) for r in rows)


ROWS, DRAWS = 6, 1_500  # exactness rows in a simulated report, draws per row
# 100 simulated reports: at most 1 % with a CHECK, and the broken rule flagged in every one. Seeded: the same
# counts every run.
REPORTS = [100]


@pytest.mark.parametrize("reports", REPORTS)
def test_the_report_wide_false_alarm_rate_is_at_most_one_percent(target, draft_factory, reports):
    """Reports of six exact rows (the bigram draft, each row its own seed: independent rows, the hardest case
    for Bonferroni): at most 1 % of them show a CHECK."""
    d = {"bigram": draft_factory("bigram")}
    alarms = 0
    for s in range(reports):
        rows = [specdec.verify(target, d, k=4, samples=DRAWS, seed=ROWS * s + j)[0] for j in range(ROWS)]
        alarms += any(r["verdict"] == "CHECK" for r in exactness.verdicts(rows))
    assert alarms <= reports // 100


@pytest.mark.parametrize("reports", REPORTS)
@pytest.mark.parametrize("broken", ["always_accept", "residual_is_p"])
def test_a_broken_rule_is_flagged_in_every_one_of_those_reports(target, draft_factory, monkeypatch, broken, reports):
    """The same reports' first rows with the rule broken, at a six-row report's threshold: CHECK every time."""
    _break(monkeypatch, broken)
    d = {"bigram": draft_factory("bigram")}
    rows = [specdec.verify(target, d, k=4, samples=DRAWS, seed=ROWS * s, family_alpha=exactness.FAMILY_ALPHA / ROWS)[0]
            for s in range(reports)]
    assert all(r["verdict"] == "CHECK" for r in rows)


def test_verify_says_exact_for_every_draft_at_each_seed(target, draft_factory):
    """What `specdec verify --seed S` runs, at its default 20,000 draws and k = 4, for seeds 0-4."""
    seeds = range(5)
    drafts = {name: draft_factory(name) for name in ALL_DRAFTS}
    rows = [(seed, r) for seed in seeds for r in specdec.verify(target, drafts, seed=seed)]
    assert len(rows) == len(seeds) * len(drafts)
    assert all(r["samples"] == 20_000 and r["p_threshold"] == exactness.FAMILY_ALPHA / len(drafts) for _, r in rows)
    assert [(seed, r["draft"], r["p_value"]) for seed, r in rows if r["verdict"] != "exact"] == []


def test_greedy_equality_catches_a_broken_rule(target, draft_factory, monkeypatch):
    expected = specdec.generate(target, "ROMEO:", 200, seed=0, temperature=0).text
    monkeypatch.setattr(rule, "accept_reject", lambda p, q, drafted, rng: (len(drafted), int(p[-1].argmax())))
    out = specdec.speculative_generate(target, draft_factory("bigram"), "ROMEO:", 200, k=4, seed=0, temperature=0)
    assert out.text != expected


def test_verify_is_deterministic(target, draft_factory):
    a = specdec.verify(target, {"int4": draft_factory("int4")}, k=2, samples=2_000, seed=7)
    b = specdec.verify(target, {"int4": draft_factory("int4")}, k=2, samples=2_000, seed=7)
    assert a == b and a[0]["samples"] == 2_000 and a[0]["k"] == 2
