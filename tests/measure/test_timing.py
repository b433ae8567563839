import numpy as np
import pytest
import torch

from specdec.measure import timing
from specdec.model.gpt import GPT

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


def test_measure_costs_covers_every_piece(target, draft_factory):
    drafts = {"bigram": draft_factory("bigram")}
    costs = timing.measure_costs(target, drafts, [1, 4], samples=2, number=2, term_calls=1)  # 1 thread: conftest
    assert set(costs.verify_pass_us) == {2, 5} and set(costs.round_us) == {1, 4}
    assert costs.threads == 1 and costs.device == "cpu" and costs.samples == 2
    lo, hi = costs.c_range("bigram")
    assert 0 < lo <= costs.c("bigram") <= hi and len(costs.c_samples["bigram"]) == 2
    assert set(costs.verify_ratio_samples) == {2, 5} and all(len(v) == 2 for v in costs.verify_ratio_samples.values())
    assert set(costs.loop_char_us["bigram"]) == {1, 4} == set(costs.loop_round_us["bigram"])  # ks ∪ {draft_k}
    assert costs.loop_samples["bigram", 4].shape == (2, len(timing.TERMS)) == (2, 5)


def test_measure_costs_takes_the_terms_from_the_samplers_given(target, draft_factory):
    """c is the drafted character at draft_k over the single pass of the same sample."""
    fake = lambda: (500.0, 10.0, 700.0)  # step, drafted character, round (µs)
    costs = timing.measure_costs(target, {"bigram": draft_factory("bigram")}, [1], samples=1, number=2,
                                 samplers={("bigram", 1): fake, ("bigram", 4): fake})
    assert costs.loop_samples["bigram", 4].tolist() == [[500.0, 10.0, 700.0]]
    assert costs.loop_char_us["bigram"] == {1: 10.0, 4: 10.0} and costs.draft_char_us["bigram"] == 10.0
    assert costs.c("bigram") == pytest.approx(10.0 / costs.target_pass_us)


class FakeTarget:
    """Records every pass as (ids, position) and returns uniform logits."""

    ids = GPT.ids
    device = torch.device("cpu")

    def __init__(self):
        self.seen = []

    def __call__(self, idx, pos):
        self.seen.append((idx.tolist()[0], pos))
        return torch.zeros(1, idx.shape[1], 84)


def test_steps_advance_the_cache_like_generate():
    fake = FakeTarget()
    timing._steps(fake, list(range(100, 120)), 5, 4, 1.0, np.random.default_rng(0), "cpu")()
    assert fake.seen == [([105], 5), ([106], 6), ([107], 7), ([108], 8)]


@pytest.mark.parametrize("k", [1, 8])
def test_loop_sampler_gives_five_costs_and_leaves_generation_intact(target, draft_factory, k):
    import specdec

    d = draft_factory("int4")
    before = specdec.speculative_generate(target, d, "ROMEO:", 40, k=k, seed=3)
    sample = timing.loop_sampler(target, d, k, number=2, all_accepted=0.5, position=30, prompt_chars=12)
    got = sample()
    assert len(got) == len(timing.TERMS) and all(np.isfinite(x) and x > 0 for x in got)
    assert specdec.speculative_generate(target, d, "ROMEO:", 40, k=k, seed=3) == before


@pytest.mark.parametrize("n, widths", [(1, [1]), (32, [32]), (33, [32, 1]), (70, [32, 32, 6])])
def test_fill_cache_runs_passes_no_wider_than_fill_width(n, widths):
    fake = FakeTarget()
    timing.fill_cache(fake, list(range(n)))
    assert timing.FILL_WIDTH == 32
    assert [(len(ids), pos) for ids, pos in fake.seen] == [(w, 32 * i) for i, w in enumerate(widths)]


# The samplers run under inference mode; so do these tests: a pass with autograd on leaves the session's shared
# target's cache with a history that copying the model later refuses (test_report_trees failed after them).
@torch.inference_mode()
def test_fill_cache_leaves_the_cache_one_whole_pass_leaves(target):
    from specdec.model import corpus

    tokens = corpus.split_ids("val")[:75].tolist()
    target.setup_cache(1)
    whole = target(target.ids(tokens), 0)[0, -1].clone()
    cache = [b.attn.k_cache[0, :, :75].clone() for b in target.blocks]
    target.setup_cache(1)
    timing.fill_cache(target, tokens[:-1])
    assert torch.allclose(target(target.ids(tokens[-1:]), 74)[0, -1], whole, atol=1e-4)
    assert all(torch.allclose(b.attn.k_cache[0, :, :75], c, atol=1e-5) for b, c in zip(target.blocks, cache))


@pytest.mark.parametrize("number", [1, 3])
@torch.inference_mode()  # see the fill test
def test_round_sampler_times_number_rounds_after_the_warm_up_rounds(target, draft_factory, monkeypatch, number):
    from specdec.model import corpus
    from specdec.decoding import generate as decode

    calls = []
    settle = decode.settle_round
    monkeypatch.setattr(decode, "settle_round", lambda *a: calls.append(1) or settle(*a))
    monkeypatch.setattr(timing, "WARM_SECONDS", 0.0)
    context = corpus.split_ids("val")[:40].tolist()
    round_ = timing.chain_round(target, draft_factory("bigram"), context, 2, np.random.default_rng(0), 1.0)
    run = timing.round_sampler(target, round_, "cpu")
    char_s, round_s = run(number)
    assert len(calls) == timing.WARM_ROUNDS + number and char_s > 0 and round_s > 0


def test_round_sampler_frames_any_round_and_divides_by_what_was_drafted(monkeypatch):
    """A fake clock ticking once a reading: each part of a round lasts one tick, so a sample of 2 rounds that
    draft 3 units each gives 1/3 tick a unit and 1 tick a round; every round starts from the context."""
    import itertools

    calls = []
    clock = itertools.count()
    monkeypatch.setattr(timing, "measured", lambda: float(next(clock)))  # what the sampler measures
    monkeypatch.setattr(timing, "WARM_SECONDS", 0.0)

    def rest(tokens, proposal):
        calls.append(("rest", proposal))
        tokens.append(9)  # the round emits a character: the next one must not see it

    round_ = timing.Round([5, 6, 7], lambda tokens: (calls.append(("draft", list(tokens))), ("p", 3))[1], rest,
                          prime=lambda: calls.append("prime"), before=calls.append)
    fake = FakeTarget()
    assert timing.round_sampler(fake, round_)(2) == (1 / 3, 1.0)
    assert fake.seen == [([5, 6, 7], 0)]  # the cache filled once, before the sample's rounds
    rounds = [[i, ("draft", [5, 6, 7]), ("rest", "p")] for i in range(timing.WARM_ROUNDS + 2)]
    assert calls == ["prime"] + [c for r in rounds for c in r]
