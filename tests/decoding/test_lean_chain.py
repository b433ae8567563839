"""The lean chain round (issue 28): the rule in array operations, table drafts' one-call draws, the onnx round
without torch -- each against the reference code it replaces: the same ids, bitwise the same q, the same
generator state after, the same generations."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import specdec
from specdec.decoding import drafts, rule
from specdec.decoding import generate as decode
from specdec.model import corpus
from specdec.model.backends import to_backend
from tests import oracles

PROMPT = "ROMEO:\nWhat light through yonder window breaks?"


def _state(rng):
    return rng.bit_generator.state


# -- the stream: what the lean rule's rewinding relies on


def test_a_double_is_one_64_bit_step_and_advance_moves_back_modulo_2_to_the_128():
    a, b = np.random.default_rng(7), np.random.default_rng(7)
    block = a.random(5)
    assert [b.random() for _ in range(5)] == block.tolist()  # k calls == one call of k
    assert _state(a) == _state(b)
    a.bit_generator.advance(2**128 - 3)  # three steps back
    c = np.random.default_rng(7)
    c.random(2)
    assert _state(a) == _state(c)
    assert a.random(3).tolist() == block[2:].tolist()


def test_rewinding_keeps_a_buffered_32_bit_half():
    a, b = np.random.default_rng(3), np.random.default_rng(3)
    a.integers(0, 10, dtype=np.int32)  # leaves half of a 64-bit draw buffered
    b.integers(0, 10, dtype=np.int32)
    a.random(4)
    oracles._rewind(a.bit_generator, 3)
    b.random(1)
    assert _state(a) == _state(b) and _state(a)["has_uint32"] == 1
    assert a.integers(0, 1000, dtype=np.int32) == b.integers(0, 1000, dtype=np.int32)


# -- the rule


@st.composite
def rounds(draw):
    """(p, q, drafted): k in 0..6 over V in 2..7; rows random, one-hot (temperature 0) or p equal to q."""
    k, V = draw(st.integers(0, 6)), draw(st.integers(2, 7))
    seed = draw(st.integers(0, 2**32 - 1))
    g = np.random.default_rng(seed)
    kind = draw(st.sampled_from(["random", "one-hot", "equal", "sparse"]))
    p = g.dirichlet(np.ones(V), size=k + 1)
    q = g.dirichlet(np.ones(V), size=k)
    if kind == "one-hot":
        p, q = np.eye(V)[g.integers(0, V, k + 1)], np.eye(V)[g.integers(0, V, k)]
    elif kind == "equal":
        q = p[:k].copy()
    elif kind == "sparse":  # zeros where p or q has no mass
        p = p * (g.random(p.shape) < 0.5) + np.eye(V)[g.integers(0, V, k + 1)] * 1e-3
        p /= p.sum(1, keepdims=True)
    if kind == "one-hot" or draw(st.booleans()):
        drafted = [int(g.choice(V, p=row)) for row in q]  # what the draft really sampled
    else:
        drafted = [int(x) for x in g.integers(0, V, k)]  # any ids, q-probability 0 included
    return p, q, drafted


@settings(max_examples=400, deadline=None)
@given(rounds(), st.integers(0, 2**63 - 1), st.booleans())
def test_the_lean_rule_is_the_reference_rule_draw_for_draw(pqd, seed, dxsm):
    p, q, drafted = pqd
    make = (lambda: np.random.Generator(np.random.PCG64DXSM(seed))) if dxsm else (lambda: np.random.default_rng(seed))
    a, b = make(), make()
    assert oracles.accept_reject_lean(p, q, drafted, a) == rule.accept_reject(p, q, drafted, b)
    assert _state(a) == _state(b)
    assert a.random() == b.random()


def test_the_lean_rule_by_hand_rejects_a_draft_p_cannot_emit_and_draws_twice():
    # p(x=0) = 0 < q(x=0) = 1: one uniform rejects it whatever it is, a second samples the residual, which is p
    p, q = np.array([[0.0, 1.0, 0.0], [1 / 3, 1 / 3, 1 / 3]]), np.array([[1.0, 0.0, 0.0]])
    rng, fresh = np.random.default_rng(0), np.random.default_rng(0)
    assert oracles.accept_reject_lean(p, q, [0], rng) == (0, 1)
    fresh.random(2)
    assert _state(rng) == _state(fresh)


def test_the_lean_rule_by_hand_accepts_p_above_q_without_a_draw():
    # p >= q at both drafts: accepted outright, the only draw is the bonus's (u = first double of seed 0)
    p = np.array([[0.1, 0.9], [0.2, 0.8], [0.5, 0.5]])
    q = np.array([[0.5, 0.5], [0.5, 0.5]])
    rng = np.random.default_rng(0)
    u = np.random.default_rng(0).random()
    assert oracles.accept_reject_lean(p, q, [1, 1], rng) == (2, int(u >= 0.5))
    after = np.random.default_rng(0)
    after.random()
    assert _state(rng) == _state(after)


def test_a_generator_that_cannot_move_back_takes_the_reference_loop():
    p, q = np.array([[0.2, 0.8], [0.5, 0.5]]), np.array([[0.9, 0.1]])
    for seed in range(20):
        a, b = np.random.Generator(np.random.MT19937(seed)), np.random.Generator(np.random.MT19937(seed))
        assert oracles.accept_reject_lean(p, q, [0], a) == rule.accept_reject(p, q, [0], b)
        assert a.random() == b.random()


# -- the table drafts


@pytest.mark.parametrize("name", ["bigram", "ngram"])
@pytest.mark.parametrize("temperature", [0.0, 0.5, 1.0, 1.7])
def test_a_table_draft_proposes_what_its_reference_proposes(draft_factory, name, temperature):
    d = draft_factory(name)
    for seed in range(60):
        tokens = corpus.encode(PROMPT[: 1 + seed % len(PROMPT)])  # short contexts too: the n-gram backs off
        k = 1 + seed % 8
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        ids, q = d.propose(tokens, k, a, temperature)
        ref_ids, ref_q = oracles.propose_reference(d, tokens, k, b, temperature)
        assert ids == ref_ids and q.tobytes() == ref_q.tobytes()
        assert _state(a) == _state(b)


def test_the_sparse_bigram_over_other_ids_proposes_what_its_reference_proposes():
    ids = np.random.default_rng(0).integers(0, 50, 5000)
    d = drafts.BigramDraft(token_ids=ids, vocab_size=60)  # ids 50..59 never occur: uniform rows
    for seed in range(30):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        got, q = d.propose([seed % 60], 5, a, 0.8)
        ref, ref_q = oracles.propose_reference(d, [seed % 60], 5, b, 0.8)
        assert got == ref and q.tobytes() == ref_q.tobytes() and q.shape == (5, 60)


class _Halves(drafts.TableDraft):
    """A table draft implementing `_dist` only: half the mass on the last id + 1 (mod 3), the rest spread."""

    vocab_size = 3

    def _dist(self, tokens):
        row = np.full(3, 0.25)
        row[(tokens[-1] + 1) % 3] = 0.5
        return row


def test_a_table_draft_with_only_its_own_dist_proposes_what_its_reference_proposes():
    d = _Halves()
    for seed in range(30):
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        got, q = d.propose([seed % 3], 4, a, 1.0)
        ref, ref_q = oracles.propose_reference(d, [seed % 3], 4, b, 1.0)
        assert got == ref and q.tobytes() == ref_q.tobytes()
        np.testing.assert_array_equal(q[0], [0.5 if j == (seed + 1) % 3 else 0.25 for j in range(3)])


def test_the_kept_rows_start_over_past_their_budget(monkeypatch):
    d = drafts.BigramDraft()
    monkeypatch.setattr(d, "CACHE_BYTES", 84 * 16 * 3)  # three rows
    for x in range(5):
        d.tempered([x], 1.0)
    assert len(d._tempered) == 2  # cleared on the fourth row, then the fourth and fifth kept
    q, c = d.tempered([4], 1.0)
    assert q.tobytes() == drafts._bigram_table()[4].tobytes() and c.tobytes() == q.cumsum().tobytes()


# -- whole generations


@pytest.fixture(scope="module")
def onnx_target(target):
    pytest.importorskip("onnxruntime")
    m = to_backend(target, "onnx")
    m.setup_cache(1)
    return m


@pytest.mark.parametrize("backend", ["eager", "onnx"])
@pytest.mark.parametrize("name,k,temperature", [("bigram", 4, 1.0), ("ngram", 4, 0.7), ("ngram", 8, 0.0)])
def test_lean_and_reference_rounds_generate_the_same(target, onnx_target, draft_factory, monkeypatch, backend, name,
                                                     k, temperature):
    m = onnx_target if backend == "onnx" else target
    d = draft_factory(name)
    for seed in (0, 5):
        lean = decode.speculative_generate(m, d, PROMPT, 80, k=k, seed=seed, temperature=temperature)
        with monkeypatch.context() as patch:  # the draft proposes with its reference code
            patch.setattr(d, "propose", lambda *a: oracles.propose_reference(d, *a))
            ref = decode.speculative_generate(m, d, PROMPT, 80, k=k, seed=seed, temperature=temperature)
        assert lean.ids == ref.ids and lean.stats == ref.stats


@pytest.mark.parametrize("name", list(specdec.DRAFTS))
def test_greedy_speculative_on_onnx_equals_greedy_target_only(target, onnx_target, draft_factory, name):
    expected = decode.generate(target, PROMPT, 120, seed=0, temperature=0)
    out = decode.speculative_generate(onnx_target, draft_factory(name), PROMPT, 120, k=4, seed=3, temperature=0)
    assert out.ids == expected.ids
    assert decode.generate(onnx_target, PROMPT, 120, seed=1, temperature=0).ids == expected.ids


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_an_onnx_chain_round_makes_no_torch_input(onnx_target, draft_factory, monkeypatch, temperature):
    expected = decode.speculative_generate(onnx_target, draft_factory("ngram"), PROMPT, 60, k=4, seed=2,
                                           temperature=temperature)

    def no_tensor(tokens):
        raise AssertionError("a torch input was made")

    monkeypatch.setattr(onnx_target, "ids", no_tensor)
    out = decode.speculative_generate(onnx_target, draft_factory("ngram"), PROMPT, 60, k=4, seed=2,
                                      temperature=temperature)
    assert out.ids == expected.ids
    assert decode.generate(onnx_target, PROMPT, 20, seed=2, temperature=temperature).text


def test_onnx_pass_probs_at_temperature_0_is_the_one_hot_of_the_forwards_logits(onnx_target):
    import torch

    ids = corpus.encode(PROMPT)
    onnx_target.setup_cache(1)
    with torch.inference_mode():
        logits = onnx_target(onnx_target.ids(ids), 0)[0, -3:].numpy().copy()
    p = onnx_target.pass_probs(ids, 0, 3, 0.0)
    assert p.dtype == np.float64 and p.shape == (3, 84)
    np.testing.assert_array_equal(p, np.eye(84)[logits.argmax(-1)])
