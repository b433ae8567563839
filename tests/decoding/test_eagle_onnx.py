"""EAGLE's proposal as one ONNX Runtime graph (`eagle_onnx`) against the numpy step it unrolls (the oracle):
the same drafts from the same seeds, the same logits to float32 rounding, the same draws from the generator."""

import numpy as np
import pytest
import torch

import specdec
from specdec.model import sampling

pytest.importorskip("onnxruntime")

from specdec.decoding import eagle_onnx  # noqa: E402


def _numpy_proposal(step, f, tok, k, rng, temperature):
    out, logits = [], []
    for _ in range(k):
        f, z = step(f, tok)
        tok = sampling.sample(sampling.probs(z, temperature), rng)
        out.append(tok)
        logits.append(z)
    return out, np.stack(logits)


@pytest.mark.parametrize("temperature", [1.0, 0.7, 0.0])
@pytest.mark.parametrize("k", [1, 4])
def test_the_graph_drafts_what_the_numpy_steps_draft(target, temperature, k):
    draft = specdec.make_draft("eagle", target)
    proposer = eagle_onnx.Proposer(draft.step)
    states = np.random.default_rng(0).standard_normal((40, target.config.n_embd)).astype(np.float32)
    for seed, f in enumerate(states):
        tok = seed % target.config.vocab_size
        a, b = np.random.default_rng(seed), np.random.default_rng(seed)
        want, want_logits = _numpy_proposal(draft.step, f, tok, k, a, temperature)
        got, logits = proposer(f, tok, k, b.random(k), temperature)
        assert got == want
        np.testing.assert_allclose(logits, want_logits, rtol=0, atol=1e-4)
        assert a.random() == b.random()  # the same uniforms drawn: the rule's draws after it are the same


def test_the_draft_runs_the_graph_and_its_q_is_the_distributions_of_the_logits(target):
    draft = specdec.make_draft("eagle", target)
    assert isinstance(draft.proposer, eagle_onnx.Proposer)
    f = np.ones(target.config.n_embd, dtype=np.float32)
    draft.rows[0] = (6, f)
    drafted, q = draft.propose(list(range(8)), 3, np.random.default_rng(3), 1.0)
    tokens, logits = draft.proposer(f, 7, 3, np.random.default_rng(3).random(3), 1.0)
    assert drafted == tokens
    assert q.dtype == np.float64 and q.tolist() == sampling.probs(logits, 1.0).tolist()
    assert sorted(draft.proposer.sessions) == [(3, False)]
    before = torch.get_num_threads()
    try:  # a new thread count: sessions built again on it, as the onnx target's
        torch.set_num_threads(before + 1)
        draft.propose(list(range(8)), 3, np.random.default_rng(3), 1.0)
        assert draft.proposer.threads == before + 1 and sorted(draft.proposer.sessions) == [(3, False)]
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("temperature", [1.0, 0.0])
def test_without_the_runtime_the_draft_steps_in_numpy_to_the_same_drafts(target, temperature):
    graph_draft, numpy_draft = specdec.make_draft("eagle", target), specdec.make_draft("eagle", target)
    numpy_draft.proposer = None  # as where onnxruntime is not installed
    f = np.linspace(-1, 1, target.config.n_embd, dtype=np.float32)
    for d in (graph_draft, numpy_draft):
        d.rows[0] = (6, f)
    a, b = np.random.default_rng(11), np.random.default_rng(11)
    got, q_graph = graph_draft.propose(list(range(8)), 4, a, temperature)
    want, q_numpy = numpy_draft.propose(list(range(8)), 4, b, temperature)
    assert got == want and a.random() == b.random()
    np.testing.assert_allclose(q_graph, q_numpy, rtol=1e-4, atol=1e-7)
