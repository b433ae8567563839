import numpy as np
import pytest
import torch

from specdec import timing
from specdec.model import GPT


def test_paired_alternates_order_and_discards_warmup():
    calls = []
    res = timing.paired(lambda: calls.append("A"), lambda: calls.append("B"), pairs=5, warmup=1)
    assert calls == ["A", "B", "B", "A", "A", "B", "B", "A", "A", "B", "B", "A"]
    assert len(res.a) == len(res.b) == len(res.ratios) == 5


def test_paired_ratio_is_a_over_b(monkeypatch):
    seq = iter([2.0, 1.0, 0.5, 1.5, 4.0, 2.0])  # (A, B), then (B, A), then (A, B)
    monkeypatch.setattr(timing, "timed", lambda fn, device="cpu", number=1: next(seq))
    res = timing.paired(lambda: None, lambda: None, pairs=3, warmup=0)
    assert res.ratios == [2.0, 3.0, 2.0]


def test_paired_rejects_zero_pairs():
    with pytest.raises(ValueError, match="pairs must be at least 1"):
        timing.paired(lambda: None, lambda: None, pairs=0)


def test_threads_is_set_and_restored():
    before = torch.get_num_threads()
    with timing.threads(1) as n:
        assert n == 1 and torch.get_num_threads() == 1
    assert torch.get_num_threads() == before
    with pytest.raises(ValueError, match="threads must be at least 1"):
        with timing.threads(0):
            pass


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


def test_measure_costs_covers_every_piece(target, draft_factory):
    drafts = {"bigram": draft_factory("bigram")}
    with timing.threads(1):
        costs = timing.measure_costs(target, drafts, [1, 4], samples=2, number=2)
    assert set(costs.verify_pass_us) == {2, 5} and set(costs.round_us) == {1, 4}
    assert costs.threads == 1 and costs.device == "cpu"
    lo, hi = costs.c_range["bigram"]
    assert 0 < lo <= costs.c("bigram") <= hi
    assert costs.c_fastest("bigram") == costs.char_range["bigram"][0] / costs.target_range[0]
    assert set(costs.loop_char_us["bigram"]) == {1, 4} == set(costs.loop_round_us["bigram"])  # ks ∪ {draft_k}


def test_steps_advance_the_cache_like_generate():
    seen = []

    class FakeTarget:
        ids = GPT.ids
        device = torch.device("cpu")

        def __call__(self, idx, pos):
            seen.append((idx.tolist(), pos))
            return torch.zeros(1, idx.shape[1], 84)

    timing._steps(FakeTarget(), list(range(100, 120)), 5, 4, 1.0, np.random.default_rng(0), "cpu")()
    assert seen == [([[105]], 5), ([[106]], 6), ([[107]], 7), ([[108]], 8)]


@pytest.mark.parametrize("k", [1, 8])
def test_loop_sampler_gives_three_costs_and_leaves_generation_intact(target, draft_factory, k):
    import specdec

    d = draft_factory("int4")
    before = specdec.speculative_generate(target, d, "ROMEO:", 40, k=k, seed=3)
    sample = timing.loop_sampler(target, d, k, number=2, all_accepted=0.5, position=30)
    step, char, rnd = sample()
    assert all(np.isfinite(x) and x > 0 for x in (step, char, rnd))
    assert specdec.speculative_generate(target, d, "ROMEO:", 40, k=k, seed=3) == before
