"""measure/round_samplers.py: the samplers behind the refined model's terms, the replayed round, the filled cache."""

import numpy as np
import pytest
import torch

from specdec.measure import round_samplers
from specdec.model.gpt import GPT


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
    round_samplers._steps(fake, list(range(100, 120)), 5, 4, 1.0, np.random.default_rng(0), "cpu")()
    assert fake.seen == [([105], 5), ([106], 6), ([107], 7), ([108], 8)]


@pytest.mark.parametrize("k", [1, 8])
def test_loop_sampler_gives_five_costs_and_leaves_generation_intact(target, draft_factory, k):
    import specdec

    d = draft_factory("int4")
    before = specdec.speculative_generate(target, d, "ROMEO:", 40, k=k, seed=3)
    sample = round_samplers.loop_sampler(target, d, k, number=2, all_accepted=0.5, position=30, prompt_chars=12)
    got = sample()
    assert len(got) == len(round_samplers.TERMS) and all(np.isfinite(x) and x > 0 for x in got)
    assert specdec.speculative_generate(target, d, "ROMEO:", 40, k=k, seed=3) == before


@pytest.mark.parametrize("n, widths", [(1, [1]), (32, [32]), (33, [32, 1]), (70, [32, 32, 6])])
def test_fill_cache_runs_passes_no_wider_than_fill_width(n, widths):
    fake = FakeTarget()
    round_samplers.fill_cache(fake, list(range(n)))
    assert round_samplers.FILL_WIDTH == 32
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
    round_samplers.fill_cache(target, tokens[:-1])
    assert torch.allclose(target(target.ids(tokens[-1:]), 74)[0, -1], whole, atol=1e-4)
    assert all(torch.allclose(b.attn.k_cache[0, :, :75], c, atol=1e-5) for b, c in zip(target.blocks, cache))


@pytest.mark.parametrize("number", [1, 3])
@torch.inference_mode()  # see the fill test
def test_round_sampler_times_number_rounds_after_the_warm_up_rounds(target, draft_factory, monkeypatch, number):
    from specdec.model import corpus
    from specdec.decoding import rounds

    calls = []
    settle = rounds.settle_round
    monkeypatch.setattr(rounds, "settle_round", lambda *a: calls.append(1) or settle(*a))
    monkeypatch.setattr(round_samplers, "WARM_SECONDS", 0.0)
    context = corpus.split_ids("val")[:40].tolist()
    round_ = round_samplers.chain_round(target, draft_factory("bigram"), context, 2, np.random.default_rng(0), 1.0)
    run = round_samplers.round_sampler(target, round_, "cpu")
    char_s, round_s = run(number)
    assert len(calls) == round_samplers.WARM_ROUNDS + number and char_s > 0 and round_s > 0


def test_round_sampler_frames_any_round_and_divides_by_what_was_drafted(monkeypatch):
    """A fake clock ticking once a reading: each part of a round lasts one tick, so a sample of 2 rounds that
    draft 3 units each gives 1/3 tick a unit and 1 tick a round; every round starts from the context."""
    import itertools

    calls = []
    clock = itertools.count()
    monkeypatch.setattr(round_samplers, "measured", lambda: float(next(clock)))  # what the sampler measures
    monkeypatch.setattr(round_samplers, "WARM_SECONDS", 0.0)

    def rest(tokens, proposal):
        calls.append(("rest", proposal))
        tokens.append(9)  # the round emits a character: the next one must not see it

    round_ = round_samplers.Round([5, 6, 7], lambda tokens: (calls.append(("draft", list(tokens))), ("p", 3))[1], rest,
                          prime=lambda: calls.append("prime"), before=calls.append)
    fake = FakeTarget()
    assert round_samplers.round_sampler(fake, round_)(2) == (1 / 3, 1.0)
    assert fake.seen == [([5, 6, 7], 0)]  # the cache filled once, before the sample's rounds
    rounds = [[i, ("draft", [5, 6, 7]), ("rest", "p")] for i in range(round_samplers.WARM_ROUNDS + 2)]
    assert calls == ["prime"] + [c for r in rounds for c in r]
