"""Batched generation: B sequences in one loop, each exactly what it would be alone (same seed, same prompt).

The per-sequence generators make the check exact: sequence i of a batch seeded s draws what a B = 1
generation seeded s + i draws, so texts and counts must be equal, not merely equally distributed (the joint
law at B > 1 then follows from B = 1's, and test_joint checks it directly too).
"""

import functools

import numpy as np
import pytest
import torch
from hypothesis import given, settings, strategies as st

import specdec
from specdec.decoding import batch as bt
from specdec.model import rows
from specdec.model.backends import to_backend
from specdec.util.errors import InputError

@pytest.fixture(scope="module")
def target():
    """A target of this module's own: a batch leaves the cache with B rows (and stale ones past the first),
    which the session's target must not carry into the tests that compare every row of its cache."""
    torch.set_num_threads(1)
    return specdec.load_target()


@pytest.fixture(scope="module")
def draft_factory(target):
    return functools.lru_cache(maxsize=None)(lambda name: specdec.make_draft(name, target))


PROMPTS = ["ROMEO:", "JULIET:\nO Romeo, Romeo", "K", "First Citizen:\nBefore we proceed"]  # ragged lengths


def _alone(fn, prompts, seed, **kw):
    return [fn(prompt=p, seed=seed + i, **kw) for i, p in enumerate(prompts)]


# int8-dynamic quantizes each pass's activations with one scale over the whole input tensor, so its drafts depend
# on the other rows of the batch: the output is still the target's (greedy texts equal, below), not the same draws.
ROW_EXACT = [d for d in specdec.DRAFTS if d != "int8-dynamic"] + ["prompt-lookup"]


@pytest.mark.parametrize("draft", ROW_EXACT)
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_each_sequence_of_a_batch_is_what_it_is_alone(target, draft_factory, draft, temperature):
    d = draft_factory(draft)
    kw = dict(chars=60, k=3, temperature=temperature)
    out = specdec.speculative_generate(target, d, PROMPTS, seed=5, **kw)
    alone = _alone(lambda **a: specdec.speculative_generate(target, d, **a), PROMPTS, 5, **kw)
    assert [g.text for g in out] == [g.text for g in alone]
    assert [g.stats.to_dict() for g in out] == [g.stats.to_dict() for g in alone]
    assert out.passes == max(g.stats.target_passes for g in alone)  # one batched pass per round of the longest
    assert out.rows == sum(g.stats.target_passes for g in alone)  # a finished sequence takes no more part


@pytest.mark.parametrize("draft", ["bigram", "int4", "small", "int8-dynamic"])
def test_greedy_batched_speculative_equals_greedy_target_per_sequence(target, draft_factory, draft):
    expected = specdec.generate(target, PROMPTS, 80, temperature=0).texts
    assert expected == [specdec.generate(target, p, 80, temperature=0).text for p in PROMPTS]
    for k in (1, 4):
        out = specdec.speculative_generate(target, draft_factory(draft), PROMPTS, 80, k=k, temperature=0)
        assert out.texts == expected


@pytest.mark.parametrize("backend", ["onnx", "fused", "numpy"])
def test_every_backend_batches_its_sequences_as_they_run_alone(target, backend):
    t = to_backend(target, backend)
    d = specdec.make_draft("int8", t)
    out = specdec.speculative_generate(t, d, PROMPTS[:3], 50, k=4, seed=1)
    assert out.texts == [specdec.speculative_generate(t, d, p, 50, k=4, seed=1 + i).text
                         for i, p in enumerate(PROMPTS[:3])]
    plain = specdec.generate(t, PROMPTS[:3], 40, seed=2)
    assert plain.texts == [specdec.generate(t, p, 40, seed=2 + i).text for i, p in enumerate(PROMPTS[:3])]


def test_adaptive_k_adapts_per_sequence(target, draft_factory):
    d = draft_factory("int4")
    out = specdec.speculative_generate(target, d, PROMPTS, 70, k=2, seed=3, adaptive=True, k_max=8)
    alone = _alone(lambda **a: specdec.speculative_generate(target, d, **a), PROMPTS, 3, chars=70, k=2,
                   adaptive=True, k_max=8)
    assert [g.stats.to_dict() for g in out] == [g.stats.to_dict() for g in alone]


def test_batch_b_is_b_sequences_of_one_prompt_seeded_in_turn(target, draft_factory):
    out = specdec.speculative_generate(target, draft_factory("bigram"), "ROMEO:", 30, k=2, seed=7, batch=3)
    assert len(out) == 3 and [g.prompt for g in out] == ["ROMEO:"] * 3
    assert out.texts == [specdec.speculative_generate(target, draft_factory("bigram"), "ROMEO:", 30, k=2,
                                                      seed=s).text for s in (7, 8, 9)]
    listed = specdec.generate(target, ["ROMEO:", "ROMEO:"], 20, seed=[4, 4])  # explicit seeds: the same twice
    assert listed[0].text == listed[1].text == specdec.generate(target, "ROMEO:", 20, seed=4).text


def test_a_one_prompt_call_still_returns_one_generation(target, draft_factory):
    assert isinstance(specdec.generate(target, "ROMEO:", 5), specdec.Generation)
    one = specdec.generate(target, ["ROMEO:"], 5)
    assert isinstance(one, list) and len(one) == 1 and one.passes == 5 == one.rows


def test_target_only_batch_pays_one_pass_per_character(target):
    out = specdec.generate(target, PROMPTS, 25, seed=0)
    assert out.passes == 25 and out.rows == 100 and all(g.stats.target_passes == 25 for g in out)


@pytest.mark.parametrize("kw,message", [
    ({"batch": 0}, "at least 1 sequence"),
    ({"batch": 3, "prompt": ["a", "b"]}, "batch=3 but 2 prompts"),
    ({"seed": [1, 2, 3], "prompt": ["a", "b"]}, "3 seeds for 2 sequences"),
    ({"prompt": ["ROMEO:", ""]}, "the prompt is empty"),
])
def test_bad_batches_are_one_line_errors(target, draft_factory, kw, message):
    args = {"prompt": "ROMEO:", "chars": 5, **kw}
    with pytest.raises(InputError, match=message) as e:
        specdec.speculative_generate(target, draft_factory("bigram"), k=2, **args)
    assert "\n" not in str(e.value)


def test_a_target_or_draft_that_cannot_batch_says_so():
    class Plain:  # any object that is not the shipped GPT
        pass

    assert bt.target_support(Plain()).startswith("unavailable: batched only for the shipped GPT")

    class Stateful(specdec.Draft):
        name = "mine"

    assert bt.draft_support(Stateful()).startswith("unavailable: draft 'mine' batched only for")
    from specdec.model import hf
    assert "DynamicCache" in hf.BATCH_UNSUPPORTED


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 40), st.integers(0, 6)), min_size=1, max_size=4), st.integers(0, 2**31))
@torch.inference_mode()
def test_the_row_forward_is_each_row_alone_at_its_own_position(target, shapes, seed):
    """Rows of n_b new tokens at pos_b (after pos_b tokens already in their cache rows): the same logits as one
    sequence's forward at that position, and the same keys in the cache."""
    rng = np.random.default_rng(seed)
    B = len(shapes)
    target.setup_cache(B)
    seqs = [rng.integers(0, target.config.vocab_size, p + n).tolist() for p, n in shapes]
    for b, ((p, _), s) in enumerate(zip(shapes, seqs)):  # fill row b's cache with its first p tokens
        if p:
            rows.forward_rows(target, [[] if j != b else s[:p] for j in range(B)], [0] * B)
    logits = rows.forward_rows(target, [s[p:] for (p, _), s in zip(shapes, seqs)], [p for p, _ in shapes]).clone()
    keys = [target.blocks[-1].attn.k_cache[b, :, : len(s)].clone() for b, s in enumerate(seqs)]
    for b, ((p, n), s) in enumerate(zip(shapes, seqs)):
        if n == 0:
            continue
        ref = target(target.ids(s), 0)[0, p:]  # row 0 of the cache, from position 0
        assert torch.allclose(logits[b, :n], ref, atol=1e-4)
        assert torch.allclose(keys[b], target.blocks[-1].attn.k_cache[0, :, : len(s)], atol=1e-5)


@torch.inference_mode()
def test_keep_rows_moves_the_rows_still_generating_down():
    cfg = specdec.GPTConfig(vocab_size=5, context=4, n_layer=1, n_head=1, n_embd=2)
    m = specdec.GPT(cfg)
    m.setup_cache(4)
    a = m.blocks[0].attn
    for b in range(4):
        a.k_cache[b] = b
        a.v_cache[b] = 10 + b
    rows.keep_rows(m, [1, 3])
    assert a.k_cache[:, 0, 0, 0].tolist() == [1, 3, 2, 3] and a.v_cache[:2, 0, 0, 0].tolist() == [11, 13]


def test_the_ab_workers_batched_row_runs_the_public_api_or_says_why(target, draft_factory):
    from specdec.measure import ab_rows

    cfg = {"prompt": "ROMEO:", "chars": 12, "seed": 0, "temperature": 1.0}
    ((name, (call, facts)),) = ab_rows._batch_row(specdec, target, draft_factory("bigram"), "bigram", 2, cfg).items()
    out = call()
    assert name == "spec-batch8 bigram k=2" and len(out) == 8 and facts["target_passes"] == out.passes

    class Old:  # a revision whose speculative_generate has no batch
        @staticmethod
        def speculative_generate(target, draft, prompt, chars, k, seed=0, temperature=1.0):
            raise AssertionError("never called")

    ((_, (none, reason)),) = ab_rows._batch_row(Old, target, None, "bigram", 2, cfg).items()
    assert none is None and "no batched generation" in reason
