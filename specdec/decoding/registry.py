"""The drafts by name: `make_draft("bigram", target)`, and which drafts a device can run.

The table maps each name to a factory taking the target (and options); each factory builds one of the draft
classes in `drafts`, `ngram` or a model draft around a copy of the target.
"""

from __future__ import annotations

import torch

from specdec.decoding.drafts import BigramDraft, DeviceError, Draft, ModelDraft, UnknownDraftError
from specdec.decoding.ngram import DEFAULT_ORDER, NgramDraft
from specdec.model import quantize
from specdec.model.backends import backend_of, to_backend
from specdec.model.gpt import GPT
from specdec.model.train import load_checkpoint, shipped_path


def _packed(name: str, target: GPT, bits: int) -> Draft:
    """The target stored at `bits` bits; the draft computes with the float32 weights unpacked from that."""
    stored = quantize.pack_model(target, bits)
    return ModelDraft(name, stored.unpack(), stored.nbytes, stored=stored)


def _int8(target: GPT, **_) -> Draft:
    return _packed("int8", target, 8)


def _int4(target: GPT, **_) -> Draft:
    return _packed("int4", target, 4)


def _int8_dynamic(target: GPT, **_) -> Draft:
    model = quantize.dynamic_int8(target)
    return ModelDraft("int8-dynamic", model, quantize.dynamic_bytes(model), cpu_only=True)


def _small(target: GPT, checkpoint=None, **_) -> Draft:
    model, _meta = load_checkpoint(checkpoint or shipped_path("small"))
    model = to_backend(model, backend_of(target))  # not a copy of the target: give it the target's backend
    return ModelDraft("small", model.to(target.device), quantize.float32_bytes(model))


def _bigram(target: GPT, **_) -> Draft:
    return BigramDraft()


def _ngram(target: GPT, order: int | None = None, **_) -> Draft:
    return NgramDraft(order or DEFAULT_ORDER)


# name -> factory(target, **options). The first three are the write-up's; the rest go beyond it.
DRAFTS = {
    "bigram": _bigram,
    "int8": _int8,
    "int4": _int4,
    "ngram": _ngram,
    "small": _small,
    "int8-dynamic": _int8_dynamic,
}
WRITEUP_DRAFTS = ("bigram", "int8", "int4")
CPU_ONLY = frozenset({"int8-dynamic"})  # drafts whose kernels exist on the CPU only (their `cpu_only` is True)


def available_on(device: str | torch.device) -> list[str]:
    """The drafts that can run beside a target on `device`: all of them on the CPU, the rest elsewhere."""
    on_cpu = torch.device(device).type == "cpu"
    return [n for n in DRAFTS if on_cpu or n not in CPU_ONLY]


def make_draft(name: str, target: GPT, **options) -> Draft:
    """A fresh draft by name for `target`, on the target's device; options: `order` for ngram, `checkpoint`
    for small. A CPU-only draft beside a target elsewhere is a DeviceError."""
    try:
        factory = DRAFTS[name]
    except KeyError:
        raise UnknownDraftError(
            f"unknown draft {name!r} (available: {', '.join(DRAFTS)})"
        ) from None
    device = target.device
    if name not in available_on(device):
        raise DeviceError(f"draft {name!r} runs on the CPU only, the target is on {device.type} "
                          f"(available there: {', '.join(available_on(device))})")
    return factory(target, **options)
