"""Weight rounding to int8 / int4, the packed form those weights are stored in, and its size in bytes.

As in the write-up, the rounded drafts keep computing in float32: every Linear weight is stored packed
(integer levels and their scales) and unpacked to float32 -- integer level x scale -- to build the model that
runs. That changes the model's outputs exactly as int8/int4 storage does, and saves storage only: the model
that computes holds float32 weights, as large as the target's, and runs the same float32 kernels, so neither
compute memory nor time goes down. `PackedModel.nbytes` is the storage, measured from the packed tensors.

- int8: per-output-channel symmetric, scale = max|w_row| / 127, levels -127..127, one int8 per weight.
- int4: per-group symmetric along the input dimension, groups of INT4_GROUP weights sharing one scale,
  scale = max|w_group| / 7, levels -7..7 stored as level + 8 in a nibble, two weights to a byte.
Scales are stored as float16, the usual storage for them, and the rounding divides by that stored scale, so
unpacking reproduces the rounded weights bit for bit. Embeddings and layer norms stay float32.

`dynamic_int8` is the other kind: torch's dynamically quantized Linear (int8 weights packed for an int8 GEMM
from fbgemm/onednn, activations quantized per call) -- a real low-precision kernel, CPU only, to show whether
it lowers c here; `dynamic_bytes` counts what its packed weights hold.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
import torch.nn as nn

INT4_GROUP = 32  # weights sharing one int4 scale (along the input dimension)
SCALE_DTYPE = torch.float16  # how scales are stored
_TINY_SCALE = 2.0**-24  # the smallest positive float16: an all-zero row still gets a usable scale


def _levels(w: torch.Tensor, bits: int, group: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """Integer levels (out, in) as int8 and float16 scales (out, in // g) of w (out, in)."""
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    levels = 2 ** (bits - 1) - 1  # 127 or 7
    out_f, in_f = w.shape
    g = in_f if group is None else group
    if in_f % g:
        raise ValueError(f"input width {in_f} is not a multiple of the group size {g}")
    blocks = w.detach().float().reshape(out_f, in_f // g, g)
    scale = (blocks.abs().amax(dim=-1) / levels).to(SCALE_DTYPE).clamp_min(_TINY_SCALE)
    if not torch.isfinite(scale).all():
        raise ValueError(f"weights up to {blocks.abs().max().item():.3g} overflow a float16 scale")
    q = torch.clamp(torch.round(blocks / scale.float()[..., None]), -levels, levels)
    return q.reshape(out_f, in_f).to(torch.int8), scale


def _dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out_f, in_f = q.shape
    blocks = q.float().reshape(out_f, scale.shape[1], -1)
    return (blocks * scale.float()[..., None]).reshape(out_f, in_f)


@dataclass
class Packed:
    """One Linear weight as stored: int8 levels (out, in), or int4 levels two to a uint8 (out, in / 2)."""

    values: torch.Tensor
    scales: torch.Tensor  # float16 (out, groups)
    bits: int
    shape: tuple[int, int]

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in (self.values, self.scales))


def pack(w: torch.Tensor, bits: int, group: int | None = None) -> Packed:
    """w (out, in) stored at `bits` bits: its symmetric integer levels, packed, with their scales."""
    q, scale = _levels(w, bits, group)
    if bits == 4:
        if q.shape[1] % 2:
            raise ValueError(f"int4 packs two weights to a byte: input width {q.shape[1]} is odd")
        nib = (q + 8).to(torch.uint8)  # -7..7 -> 1..15
        q = nib[:, 0::2] | (nib[:, 1::2] << 4)
    return Packed(q.contiguous(), scale.contiguous(), bits, tuple(w.shape))


def unpack(p: Packed) -> torch.Tensor:
    """The float32 weight (out, in) that `p` stores: levels x scales."""
    q = p.values
    if p.bits == 4:
        low = (q & 0xF).to(torch.int8) - 8
        high = (q >> 4).to(torch.int8) - 8
        q = torch.stack([low, high], dim=-1).reshape(p.shape)
    return _dequantize(q, p.scales)


def _scheme(bits: int) -> int | None:
    return None if bits == 8 else INT4_GROUP


@dataclass
class PackedModel:
    """A model as stored at int8/int4: its Linear weights packed, every other tensor float32."""

    bits: int
    linear: dict[str, Packed]  # parameter name -> packed weight
    dense: dict[str, torch.Tensor]  # parameter name -> float32 tensor (embeddings, layer norms)
    template: nn.Module  # the architecture to unpack into (its weights are never read)

    @property
    def nbytes(self) -> int:
        """Bytes of the stored form: packed levels, scales and the float32 rest, measured from the tensors."""
        return (sum(p.nbytes for p in self.linear.values())
                + sum(t.numel() * t.element_size() for t in self.dense.values()))

    def unpack(self) -> nn.Module:
        """The float32 model that computes: a copy of the architecture with every weight from the stored form."""
        model = copy.deepcopy(self.template)
        state = {name: unpack(p) for name, p in self.linear.items()} | self.dense
        with torch.no_grad():
            for name, param in model.named_parameters():
                param.copy_(state[name])
        return model.eval()


def pack_model(model: nn.Module, bits: int) -> PackedModel:
    """`model` stored with every Linear weight packed at `bits` bits (int8 per channel, int4 grouped)."""
    linear, dense = {}, {}
    for mod_name, m in model.named_modules():
        for name, p in m.named_parameters(recurse=False):
            full = f"{mod_name}.{name}" if mod_name else name
            if isinstance(m, nn.Linear) and name == "weight":
                linear[full] = pack(p, bits, _scheme(bits))
            else:
                dense[full] = p.detach().float().clone()
    return PackedModel(bits, linear, dense, model)


def float32_bytes(model: nn.Module) -> int:
    """Bytes of all parameters stored as float32."""
    return sum(p.numel() * 4 for p in model.parameters())


def dynamic_int8(model: nn.Module) -> nn.Module:
    """A copy whose Linear layers run torch's dynamically quantized int8 kernel (CPU)."""
    import warnings

    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao; it still works
        warnings.simplefilter("ignore")
        return quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8).eval()


def dynamic_bytes(model: nn.Module) -> int:
    """Bytes of a `dynamic_int8` model's weights as torch holds them.

    Each quantized Linear keeps its weight in an opaque packed-params object; `linear_unpack` returns what it
    holds: the int8 weight (a quantized tensor) with its scale(s) and zero point(s), and the bias. The
    remaining parameters (embeddings, layer norms) are float32.
    """
    total = sum(p.numel() * p.element_size() for p in model.parameters())
    for m in model.modules():
        packed = getattr(m, "_packed_params", None)
        if packed is None or not hasattr(packed, "_packed_params"):
            continue
        weight, bias = torch.ops.quantized.linear_unpack(packed._packed_params)
        total += weight.numel() * weight.element_size()
        if weight.qscheme() in (torch.per_channel_affine, torch.per_channel_symmetric):
            scales, zeros = weight.q_per_channel_scales(), weight.q_per_channel_zero_points()
            total += scales.numel() * scales.element_size() + zeros.numel() * zeros.element_size()
        else:
            total += 8 + 8  # one float64 scale and one int64 zero point per tensor (torch's quantizer)
        if bias is not None:
            total += bias.numel() * bias.element_size()
    return total
