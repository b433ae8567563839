import pytest
import torch

from specdec.model import corpus
from specdec.model.gpt import GPT, ContextOverflowError, GPTConfig

TEXT = corpus.load_text()[10_000:10_256]  # 256 characters: the whole context


@pytest.fixture()
def model(target):
    target.setup_cache(1)
    return target


def _ids(text=TEXT):
    return torch.tensor([corpus.encode(text)])


def test_default_config_is_about_0_6m_parameters():
    m = GPT(GPTConfig())
    # 3 blocks of 12·128² + embeddings 84·128 + 256·128 + head 128·84 + 7 layer norms of 2·128
    assert m.num_params() == 3 * 12 * 128 * 128 + 84 * 128 + 256 * 128 + 128 * 84 + 7 * 2 * 128 == 645_888


@torch.inference_mode()
def test_cached_forward_equals_uncached_at_every_position(model):
    ids = _ids()
    full = model(ids)  # (1, 256, V), no cache
    step = torch.cat([model(ids[:, t : t + 1], t) for t in range(ids.shape[1])], dim=1)
    assert step.shape == full.shape == (1, 256, 84)
    torch.testing.assert_close(step, full, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k", [1, 2, 4, 8])
@torch.inference_mode()
def test_multi_position_forward_equals_single_positions(model, k):
    ids = _ids()
    t = 100
    model(ids[:, :t], 0)
    many = model(ids[:, t : t + k + 1], t)
    model(ids[:, :t], 0)
    singles = torch.cat([model(ids[:, t + i : t + i + 1], t + i) for i in range(k + 1)], dim=1)
    torch.testing.assert_close(many, singles, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("k,j", [(4, 4), (4, 2), (8, 5), (1, 1)])
@torch.inference_mode()
def test_rollback_is_moving_the_position_back(model, k, j):
    """Write k positions, move back j, write other characters: same as never writing the rejected ones."""
    ids = _ids()
    t = 60
    model(ids[:, :t], 0)
    model(torch.full((1, k), corpus.encode("Z")[0]), t)  # k drafted positions, j of them to be rejected
    back = t + k - j
    fresh = ids[:, back : back + 3]
    after_rollback = model(fresh, back)
    model(ids[:, :back], 0)  # reference: the same prefix, never having written the rejected ones
    reference = model(fresh, back)
    if k - j:  # the kept drafts are part of the reference prefix too
        model(ids[:, :t], 0)
        model(torch.full((1, k - j), corpus.encode("Z")[0]), t)
        reference = model(fresh, back)
    torch.testing.assert_close(after_rollback, reference, rtol=1e-5, atol=1e-5)


@torch.inference_mode()
def test_forward_past_the_context_is_a_clear_error(model):
    with pytest.raises(ContextOverflowError, match="exceed the context of 256"):
        model(torch.zeros(1, 3, dtype=torch.long), 254)
    with pytest.raises(ContextOverflowError):
        model(torch.zeros(1, 257, dtype=torch.long))


def test_setup_cache_keeps_a_fitting_cache_and_reallocates_otherwise():
    m = GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, context=16))
    m.setup_cache(2)
    k = m.blocks[0].attn.k_cache
    m.setup_cache(1)  # two sequences already fit one
    assert m.blocks[0].attn.k_cache is k and m.cache_batch == 2
    m.to(torch.float64)
    m.setup_cache(1)  # weights changed dtype: the cache follows
    assert m.blocks[0].attn.k_cache.dtype == torch.float64 and m.cache_batch == 1
