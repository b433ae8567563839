import pytest
import torch
import torch.nn as nn

from specdec.model import quantize
from specdec.model.gpt import GPT, GPTConfig
from tests import oracles

LINEAR = ("qkv.weight", "proj.weight", "fc.weight", "lm_head.weight")


def _f16(x: float) -> float:
    return torch.tensor(x, dtype=torch.float16).item()


def test_int8_per_channel_rounding_by_hand():
    w = torch.tensor([[1.27, -0.5, 0.004], [2.0, 1.0, -0.33]])
    q = oracles.round_weight(w, 8)
    # scales stored as float16: row 0 1.27/127 -> 0.0100021..., levels 127, -50, 0; row 1 2/127 -> 0.0157470...,
    # levels 127, 63.50->64, -20.96->-21
    s0, s1 = _f16(1.27 / 127), _f16(2.0 / 127)
    expected = torch.tensor([[127 * s0, -50 * s0, 0.0], [127 * s1, 64 * s1, -21 * s1]])
    torch.testing.assert_close(q, expected, rtol=0, atol=0)


def test_int4_grouped_rounding_by_hand():
    w = torch.tensor([[0.7, 0.35, -0.1, 0.05, 7.0, 1.0, -2.0, 0.4]])
    q = oracles.round_weight(w, 4, group=4)
    # group 1: scale float16(0.1) = 0.09997... -> 7.00, 3.50->4, -1.00, 0.50012->1; group 2: scale 1 -> 7, 1, -2, 0
    s = _f16(0.1)
    expected = torch.tensor([[7 * s, 4 * s, -1 * s, 1 * s, 7.0, 1.0, -2.0, 0.0]])
    torch.testing.assert_close(q, expected, rtol=0, atol=0)


def test_packed_layout_by_hand():
    w = torch.tensor([[0.7, -0.7, 0.1, 0.0]])
    p4 = quantize.pack(w, 4, group=4)
    # levels 7, -7, 1, 0 -> nibbles (level + 8) 15, 1, 9, 8 -> bytes low | high << 4 = 31, 137
    assert p4.values.dtype == torch.uint8 and p4.values.tolist() == [[31, 137]]
    assert p4.scales.dtype == torch.float16 and p4.scales.tolist() == [[_f16(0.1)]]
    p8 = quantize.pack(w, 8)
    assert p8.values.dtype == torch.int8 and p8.values.tolist() == [[127, -127, 18, 0]]  # 0.1/(0.7/127) = 18.1
    assert (p4.nbytes, p8.nbytes) == (2 + 2, 4 + 2)


@pytest.mark.parametrize("bits", [8, 4])
def test_pack_then_unpack_is_the_rounded_weight_bit_for_bit(target, bits):
    group = None if bits == 8 else quantize.INT4_GROUP
    n = 0
    for name, m in target.named_modules():
        if isinstance(m, nn.Linear):
            assert torch.equal(quantize.unpack(quantize.pack(m.weight, bits, group)),
                               oracles.round_weight(m.weight, bits, group)), name
            n += 1
    assert n == 3 * 4 + 1  # every block's qkv, proj, fc, proj and the head


@pytest.mark.parametrize("name,bits", [("int8", 8), ("int4", 4)])
def test_the_draft_computes_with_the_weights_unpacked_from_its_stored_form(target, draft_factory, name, bits):
    draft = draft_factory(name)
    stored = draft.stored
    assert draft.weight_bytes() == stored.nbytes
    target_params = dict(target.named_parameters())
    for pname, param in draft.model.named_parameters():
        if pname.endswith(LINEAR):
            packed = stored.linear[pname]
            assert packed.values.dtype == (torch.int8 if bits == 8 else torch.uint8)
            assert packed.values.shape[1] == param.shape[1] * bits // 8 and packed.scales.dtype == torch.float16
            assert torch.equal(param, quantize.unpack(packed)), pname
            group = None if bits == 8 else quantize.INT4_GROUP
            assert torch.equal(param, oracles.round_weight(target_params[pname], bits, group)), pname
        else:
            assert torch.equal(param, target_params[pname]), pname


def test_stored_bytes_by_hand():
    cfg = GPTConfig(n_layer=1, n_embd=64, n_head=2, context=16, vocab_size=84)
    m = GPT(cfg)
    linear = [(192, 64), (64, 64), (256, 64), (64, 256), (84, 64)]  # qkv, attn proj, fc, mlp proj, head
    others = 84 * 64 + 16 * 64 + 3 * 2 * 64  # embeddings + 3 layer norms, float32
    n_lin = sum(o * i for o, i in linear)
    assert quantize.float32_bytes(m) == 4 * (n_lin + others)
    assert quantize.pack_model(m, 8).nbytes == n_lin + 2 * sum(o for o, _ in linear) + 4 * others
    assert quantize.pack_model(m, 4).nbytes == n_lin // 2 + 2 * sum(o * i // 32 for o, i in linear) + 4 * others
    # torch's dynamic int8: one int8 per weight, one float64 scale and one int64 zero point per tensor
    assert quantize.dynamic_bytes(quantize.dynamic_int8(m)) == n_lin + 16 * len(linear) + 4 * others


def test_bad_bits_and_group():
    with pytest.raises(ValueError, match="bits must be 4 or 8"):
        oracles.round_weight(torch.ones(2, 4), 3)
    with pytest.raises(ValueError, match="multiple of the group size"):
        oracles.round_weight(torch.ones(2, 6), 4, group=4)
    with pytest.raises(ValueError, match="overflow a float16 scale"):
        quantize.pack(torch.full((1, 4), 1e7), 8)
