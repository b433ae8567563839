"""Weight rounding to int8 / int4 and the bytes the weights would take stored packed.

As in the write-up, the rounded drafts keep computing in float32: each Linear weight is replaced by its
rounded value (integer level x scale), which changes the model's outputs exactly as real int8/int4 storage
would but saves no time. What it saves is memory, and `packed_bytes` reports that separately.

- int8: per-output-channel symmetric, scale = max|w_row| / 127, levels -127..127.
- int4: per-group symmetric along the input dimension, groups of INT4_GROUP weights sharing one scale,
  scale = max|w_group| / 7, levels -7..7 (two levels to a byte when packed).
Scales are counted as float16 (2 bytes), the usual storage for them; embeddings and layer norms stay float32.

`dynamic_int8` is the other kind: torch's dynamically quantized Linear (int8 weights, activations quantized
per call, an int8 GEMM from fbgemm/onednn) -- a real low-precision kernel, to show whether it lowers c here.
"""

from __future__ import annotations

import copy

import torch
import torch.nn as nn

INT4_GROUP = 32  # weights sharing one int4 scale (along the input dimension)
SCALE_BYTES = 2  # scales stored as float16


def round_weight(w: torch.Tensor, bits: int, group: int | None = None) -> torch.Tensor:
    """w (out, in) rounded to `bits`-bit symmetric levels, returned in w's dtype.

    group=None: one scale per output row. group=g: one scale per g consecutive inputs of a row.
    """
    if bits not in (4, 8):
        raise ValueError(f"bits must be 4 or 8, got {bits}")
    levels = 2 ** (bits - 1) - 1  # 127 or 7
    out_f, in_f = w.shape
    g = in_f if group is None else group
    if in_f % g:
        raise ValueError(f"input width {in_f} is not a multiple of the group size {g}")
    blocks = w.reshape(out_f, in_f // g, g)
    scale = blocks.abs().amax(dim=-1, keepdim=True).clamp_min(1e-12) / levels
    q = torch.clamp(torch.round(blocks / scale), -levels, levels)
    return (q * scale).reshape(out_f, in_f).to(w.dtype)


def _scheme(bits: int) -> int | None:
    return None if bits == 8 else INT4_GROUP


def rounded_copy(model: nn.Module, bits: int) -> nn.Module:
    """A deep copy of `model` with every Linear weight rounded to int8 (per channel) or int4 (grouped)."""
    out = copy.deepcopy(model)
    with torch.no_grad():
        for m in out.modules():
            if isinstance(m, nn.Linear):
                m.weight.copy_(round_weight(m.weight, bits, _scheme(bits)))
    return out.eval()


def float32_bytes(model: nn.Module) -> int:
    """Bytes of all parameters stored as float32."""
    return sum(p.numel() * 4 for p in model.parameters())


def packed_bytes(model: nn.Module, bits: int) -> int:
    """Bytes of the model with Linear weights packed at `bits` bits plus their scales; the rest float32."""
    total = 0
    for m in model.modules():
        for name, p in m.named_parameters(recurse=False):
            if isinstance(m, nn.Linear) and name == "weight":
                out_f, in_f = p.shape
                groups = 1 if bits == 8 else in_f // INT4_GROUP
                total += p.numel() * bits // 8 + out_f * groups * SCALE_BYTES
            else:
                total += p.numel() * 4
    return total


def dynamic_int8(model: nn.Module) -> nn.Module:
    """A copy whose Linear layers run torch's dynamically quantized int8 kernel (CPU)."""
    import warnings

    from torch.ao.quantization import quantize_dynamic

    with warnings.catch_warnings():  # torch.ao.quantization announces its move to torchao; it still works
        warnings.simplefilter("ignore")
        return quantize_dynamic(copy.deepcopy(model), {nn.Linear}, dtype=torch.qint8).eval()
