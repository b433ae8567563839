"""The engines' acceptance figures from a histogram, by hand, and their bootstrap intervals over prompts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.measure import acceptance_engines as ae


def test_every_engines_figure_from_one_histogram_by_hand():
    """k = 3; rounds that accepted 0, 0, 1 and 3 drafts: 4 rounds, 4 accepted of 12 drafted."""
    got = ae.figures([2, 1, 0, 1])
    assert (got["rounds"], got["accepted"], got["drafted"]) == (4, 4, 12)
    assert got["acceptance"] == pytest.approx(1 / 3)  # vLLM's and llama.cpp's acceptance rate
    assert got["acceptance_length"] == 2.0  # 1 + 4 accepted / 4 rounds: SGLang's accept_length
    assert got["per_position"] == [0.5, 0.25, 0.25]  # vLLM: rounds accepting draft i / rounds
    assert got["conditional"] == [0.5, 0.5, 1.0]  # of the rounds that reached draft i
    assert ae.figures([0, 0, 0])["conditional"] == [None, None] and ae.figures([0, 0])["acceptance"] is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=2, max_size=9).filter(lambda h: sum(h) > 0))
def test_the_per_position_rates_sum_to_the_acceptance_length_less_one(hist):
    got = ae.figures(hist)
    assert sum(got["per_position"]) == pytest.approx(got["acceptance_length"] - 1)
    k = len(hist) - 1
    assert got["acceptance"] == pytest.approx((got["acceptance_length"] - 1) / k)  # every round drafted k
    assert all(a >= b for a, b in zip(got["per_position"], got["per_position"][1:]))


def _run(prompt, hist, seed=0):
    return {"prompt_id": prompt, "seed": seed, "histogram": hist, "drafted": sum(hist) * (len(hist) - 1)}


def test_the_interval_resamples_prompts_and_is_seeded():
    same = [_run("a", [1, 1, 2]), _run("b", [1, 1, 2])]
    got = ae.with_intervals(same, boot=200)
    assert got["intervals"]["acceptance_length"] == [got["acceptance_length"]] * 2  # no prompt differs: no width
    runs = [_run("a", [4, 0, 0]), _run("a", [3, 1, 0], seed=1), _run("b", [0, 0, 4]), _run("c", [2, 1, 1])]
    got = ae.with_intervals(runs, seed=3, boot=300)
    assert got["intervals"]["prompts"] == 3 and got == ae.with_intervals(runs, seed=3, boot=300)
    lo, hi = got["intervals"]["acceptance"]
    assert lo < got["acceptance"] < hi and 0.0 <= lo and hi <= 1.0
    # the pooled figure: 16 rounds, 0+1+8+1+2 = 12 accepted of 32 drafted
    assert got["acceptance"] == pytest.approx(12 / 32) and got["rounds"] == 16


def test_each_category_is_judged_on_its_own_prompts():
    runs = [_run("verse-1", [0, 0, 4]), _run("prose-1", [4, 0, 0]), _run("odd", [2, 2, 0])]
    got = ae.by_category(runs, {"verse-1": "verse", "prose-1": "prose"}, boot=50)
    assert sorted(got) == ["all", "other", "prose", "verse"]
    assert (got["verse"]["acceptance"], got["prose"]["acceptance"], got["other"]["acceptance"]) == (1.0, 0.0, 0.25)
