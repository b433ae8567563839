import pytest
import torch

from specdec import quantize
from specdec.model import GPT, GPTConfig


def test_int8_per_channel_rounding_by_hand():
    w = torch.tensor([[1.27, -0.5, 0.004], [2.0, 1.0, -0.33]])
    q = quantize.round_weight(w, 8)
    # row 0: scale 1.27/127 = 0.01 -> levels 127, -50, 0; row 1: scale 2/127 -> 127, 63.5->64, -20.955->-21
    expected = torch.tensor([[1.27, -0.50, 0.0], [2.0, 64 * 2 / 127, -21 * 2 / 127]])
    torch.testing.assert_close(q, expected)


def test_int4_grouped_rounding_by_hand():
    w = torch.tensor([[0.7, 0.35, -0.1, 0.05, 7.0, 1.0, -2.0, 0.4]])
    q = quantize.round_weight(w, 4, group=4)
    # group 1: scale 0.1 -> 7, 3.5->4 (round half to even gives 4), -1, 0.5->0; group 2: scale 1 -> 7, 1, -2, 0
    expected = torch.tensor([[0.7, 0.4, -0.1, 0.0, 7.0, 1.0, -2.0, 0.0]])
    torch.testing.assert_close(q, expected)


def test_rounding_changes_only_linear_weights():
    m = GPT(GPTConfig(n_layer=1, n_embd=64, n_head=2, context=16))
    r = quantize.rounded_copy(m, 4)
    for (name, a), (_, b) in zip(m.named_parameters(), r.named_parameters()):
        same = torch.equal(a, b)
        assert same == (not name.endswith(("qkv.weight", "proj.weight", "fc.weight", "lm_head.weight"))), name


def test_packed_bytes_by_hand():
    cfg = GPTConfig(n_layer=1, n_embd=64, n_head=2, context=16, vocab_size=84)
    m = GPT(cfg)
    linear = {(192, 64), (64, 64), (256, 64), (64, 256), (84, 64)}  # qkv, attn proj, fc, mlp proj, head
    others = 84 * 64 + 16 * 64 + 3 * 2 * 64  # embeddings + 3 layer norms, float32
    n_lin = sum(o * i for o, i in linear)
    assert quantize.float32_bytes(m) == 4 * (n_lin + others)
    assert quantize.packed_bytes(m, 8) == n_lin + 2 * sum(o for o, _ in linear) + 4 * others
    assert quantize.packed_bytes(m, 4) == n_lin // 2 + 2 * sum(o * i // 32 for o, i in linear) + 4 * others


def test_target_shrinks_about_four_and_five_fold(target):
    f32, b8, b4 = (quantize.float32_bytes(target), quantize.packed_bytes(target, 8),
                   quantize.packed_bytes(target, 4))
    assert f32 == 645_888 * 4
    assert 3.0 < f32 / b8 < 4.0 and 4.5 < f32 / b4 < 5.5


def test_bad_bits_and_group():
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        quantize.round_weight(torch.ones(2, 4), 3)
    with pytest.raises(ValueError, match="multiple of the group size"):
        quantize.round_weight(torch.ones(2, 6), 4, group=4)
