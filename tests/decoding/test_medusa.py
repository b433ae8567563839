"""The shipped Medusa heads: a draft that reads the target's states, exact like every draft, trained
deterministically, loaded safely, refused in one line where it cannot serve."""

import copy

import numpy as np
import pytest
import torch

import specdec
from specdec.decoding import head_weights, medusa
from specdec.decoding.generate import generate, speculative_generate
from specdec.model import sampling
from specdec.model.backends import to_backend
from specdec.model.train import CheckpointError
from tests.model.test_protocol import Counter5

PROMPT = "ROMEO:\nWhat light through yonder window breaks?"


@pytest.fixture(scope="module")
def heads():
    return medusa.load_heads(head_weights.shipped("medusa"))


def test_the_shipped_heads_load_with_torch_alone_and_name_their_target(target, heads):
    h, meta = heads
    assert len(h.w_in) == 4 and h.w_in[0].in_features == target.config.n_embd
    assert meta["target_sha256"] == target.meta["sha256"]
    draft = specdec.make_draft("medusa", target)
    assert isinstance(draft, medusa.MedusaDraft) and draft.weight_bytes() == 4 * (2 * 128 * 128 + 128) * 4


@pytest.mark.parametrize("backend", specdec.BACKENDS)
def test_greedy_medusa_output_is_the_targets(target, backend):
    m = copy.deepcopy(target) if backend == "eager" else to_backend(target, backend)
    out = speculative_generate(m, specdec.make_draft("medusa", m), PROMPT, 80, k=4, seed=0, temperature=0)
    assert out.text == generate(m, PROMPT, 80, temperature=0).text
    assert out.stats.accepted > 0


def test_medusa_is_deterministic_given_the_seed_and_batches_as_alone(target):
    runs = [speculative_generate(target, specdec.make_draft("medusa", target), PROMPT, 80, k=3, seed=5)
            for _ in range(2)]
    assert runs[0].text == runs[1].text and runs[0].stats == runs[1].stats
    prompts = [PROMPT, "JULIET:\nO Romeo"]
    batch = speculative_generate(target, specdec.make_draft("medusa", target), prompts, 40, k=3, seed=5)
    for i, p in enumerate(prompts):
        alone = speculative_generate(target, specdec.make_draft("medusa", target), p, 40, k=3, seed=5 + i)
        assert batch[i].text == alone.text and batch[i].stats == alone.stats


def test_a_round_drafts_no_more_than_the_heads_reach(target):
    out = speculative_generate(target, specdec.make_draft("medusa", target), PROMPT, 60, k=7, seed=0)
    assert out.stats.drafted <= 4 * out.stats.draft_calls


def test_training_is_deterministic_given_its_seed_and_saves_and_loads(target, tmp_path):
    torch.set_num_threads(1)
    a, meta = medusa.train_medusa(target, n_heads=2, steps=2, batch=2, seed=3)
    b, _ = medusa.train_medusa(target, n_heads=2, steps=2, batch=2, seed=3)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        assert torch.equal(x, y), name
    assert meta["steps"] == 2 and meta["target_sha256"] == target.meta["sha256"]
    assert target.want_features is False and target.features is None  # the target's flag is left as it was
    medusa.save_heads(a, meta, tmp_path / "h.pt")
    back, back_meta = medusa.load_heads(tmp_path / "h.pt")
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), back.state_dict().values()))
    assert back_meta == meta


def test_an_untrained_head_is_the_targets_own_head(target):
    h = medusa.MedusaHeads(128, 3)
    x = torch.randn(5, 128)
    assert torch.equal(h(x), x[:, None].expand(5, 3, 128))


def test_a_corrupt_or_missing_file_is_one_line(tmp_path):
    (tmp_path / "bad.pt").write_bytes(b"not a checkpoint")
    for path, words in ((tmp_path / "bad.pt", "are corrupt"), (tmp_path / "none.pt", "not found")):
        with pytest.raises(CheckpointError) as info:
            medusa.load_heads(path)
        assert words in str(info.value) and "\n" not in str(info.value)


def test_medusa_is_refused_for_a_target_it_cannot_read(target):
    with pytest.raises(specdec.UnknownDraftError, match="^draft 'medusa' reads the shipped GPT's states; a "
                                                        "Counter5 target needs heads"):
        specdec.make_draft("medusa", Counter5())
    other = copy.deepcopy(target)
    other.meta = {**target.meta, "sha256": "0" * 64}
    with pytest.raises(specdec.UnknownDraftError, match=f"trained for target {target.meta['sha256'][:12]}"):
        specdec.make_draft("medusa", other)


def test_acceptance_per_position_is_recorded_like_any_drafts(target):
    out = speculative_generate(target, specdec.make_draft("medusa", target), PROMPT, 120, k=4, seed=1)
    hist = out.stats.accepted_per_position
    assert sum(hist) == out.stats.draft_calls and len(hist) == 5
    assert np.dot(hist, range(5)) == out.stats.accepted


@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_q_is_the_torch_heads_distribution_for_the_heads_a_round_reaches(target, k):
    """The drafting step runs in numpy: each q row equals softmax(head_i(h) @ lm_head.T) of the torch heads (to
    float32 rounding), for the min(k, K) heads a round drafts from, and the drafts are drawn from those rows."""
    draft = specdec.make_draft("medusa", target)
    ids = target.tokenize("ROMEO: what light")
    with torch.no_grad():
        target.want_features = True
        try:
            target(target.ids(ids))
            states = target.features[0].clone()
        finally:
            target.want_features, target.features = False, None
        want = torch.softmax(draft.heads(states[-1]) @ target.lm_head.weight.T, -1).double().numpy()
    draft.take_features(states, 0)
    drafted, q = draft.propose(ids + [0], k, np.random.default_rng(0), 1.0)
    n = min(k, draft.n_heads)
    assert len(drafted) == n and q.shape == (n, target.config.vocab_size)
    np.testing.assert_allclose(q, want[:n], rtol=1e-5, atol=1e-8)
    rng = np.random.default_rng(0)
    assert drafted == [sampling.sample(row, rng) for row in q]
