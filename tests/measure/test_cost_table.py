"""measure/cost_table.py: the cost table covers every piece, and takes its terms from the samplers given."""

import pytest

from specdec.measure import cost_table, round_samplers


def test_measure_costs_covers_every_piece(target, draft_factory):
    import torch

    drafts = {"bigram": draft_factory("bigram")}
    before = torch.get_num_threads()
    torch.set_num_threads(1)  # whatever an earlier test in this process left: the table records the count it ran at
    try:
        costs = cost_table.measure_costs(target, drafts, [1, 4], samples=2, number=2, term_calls=1)
    finally:
        torch.set_num_threads(before)
    assert set(costs.verify_pass_us) == {2, 5} and set(costs.round_us) == {1, 4}
    assert costs.threads == 1 and costs.device == "cpu" and costs.samples == 2
    lo, hi = costs.c_range("bigram")
    assert 0 < lo <= costs.c("bigram") <= hi and len(costs.c_samples["bigram"]) == 2
    assert set(costs.verify_ratio_samples) == {2, 5} and all(len(v) == 2 for v in costs.verify_ratio_samples.values())
    assert set(costs.loop_char_us["bigram"]) == {1, 4} == set(costs.loop_round_us["bigram"])  # ks ∪ {draft_k}
    assert costs.loop_samples["bigram", 4].shape == (2, len(round_samplers.TERMS)) == (2, 5)


def test_measure_costs_takes_the_terms_from_the_samplers_given(target, draft_factory):
    """c is the drafted character at draft_k over the single pass of the same sample."""
    fake = lambda: (500.0, 10.0, 700.0)  # step, drafted character, round (µs)
    costs = cost_table.measure_costs(target, {"bigram": draft_factory("bigram")}, [1], samples=1, number=2,
                                 samplers={("bigram", 1): fake, ("bigram", 4): fake})
    assert costs.loop_samples["bigram", 4].tolist() == [[500.0, 10.0, 700.0]]
    assert costs.loop_char_us["bigram"] == {1: 10.0, 4: 10.0} and costs.draft_char_us["bigram"] == 10.0
    assert costs.c("bigram") == pytest.approx(10.0 / costs.target_pass_us)
