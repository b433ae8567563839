"""The drafts by name: `make_draft("bigram", target)`, and which drafts a device can run.

The table maps each name to a factory taking the target (and options); each factory builds one of the draft
classes in `drafts`, `ngram`, `prompt_lookup` or a model draft around a copy of the target.

`DRAFTS` holds the six shipped drafts (a report's default set, with medusa and eagle: `names.READ_THE_TARGET`). By
name: prompt-lookup, shipped, medusa (heads on the target's states, `decoding.medusa`) and eagle (a network
extrapolating the target's states, `decoding.eagle`). More names are found on request, in this order:
`register_draft(name, factory)` from the Python API, then the `specdec.drafts` entry-point group of any installed
package (each entry point loads a factory), and "hf:PATH" (a Hugging Face causal LM as the draft, see
`model.hf`). `make_draft` also takes a `Draft` object and hands it back after the same device check.
"""

from __future__ import annotations

from importlib import metadata
from typing import Callable

import torch

from specdec.decoding.names import ON_REQUEST, SHIPPED_DRAFTS
from specdec.decoding.drafts import (BigramDraft, DeviceError, Draft, ModelDraft, UnknownDraftError, corpus_ids)
from specdec.decoding.ngram import DEFAULT_ORDER, NgramDraft
from specdec.decoding.prompt_lookup import PromptLookupDraft
from specdec.decoding import eagle3
from specdec.decoding.eagle3 import PREFIX as EAGLE3_PREFIX
from specdec.model import quantize
from specdec.model.backends import backend_of, to_backend
from specdec.model.gpt import GPT
from specdec.model.train import HF_PREFIX, load_checkpoint, shipped_path
from specdec.util.errors import InputError


def _needs_gpt(name: str, target) -> None:
    """The quantized drafts are copies of the shipped GPT's weights: refuse any other target by name."""
    if not isinstance(target, GPT):
        raise UnknownDraftError(
            f"draft {name!r} is a quantized copy of the shipped GPT and cannot be built from a "
            f"{type(target).__name__} target (available for it: bigram, ngram, prompt-lookup, small when it "
            f"reads the corpus's characters, hf:PATH)")


def _packed(name: str, target: GPT, bits: int) -> Draft:
    """The target stored at `bits` bits; the draft computes with the float32 weights unpacked from that."""
    _needs_gpt(name, target)
    stored = quantize.pack_model(target, bits)
    return ModelDraft(name, stored.unpack(), stored.nbytes, stored=stored)


def _int8(target: GPT, **_) -> Draft:
    return _packed("int8", target, 8)


def _int4(target: GPT, **_) -> Draft:
    return _packed("int4", target, 4)


def _int8_dynamic(target: GPT, **_) -> Draft:
    _needs_gpt("int8-dynamic", target)
    model = quantize.dynamic_int8(target)
    return ModelDraft("int8-dynamic", model, quantize.dynamic_bytes(model), cpu_only=True)


def _checkpoint_draft(name: str, target, checkpoint) -> Draft:
    """A GPT checkpoint as the draft of a target that reads the corpus's characters."""
    if not getattr(target, "corpus_vocabulary", False):
        raise UnknownDraftError(f"draft {name!r} reads the corpus's characters; the {type(target).__name__} "
                                f"target's vocabulary is another (available for it: bigram, ngram, "
                                f"prompt-lookup, hf:PATH)")
    model, _meta = load_checkpoint(checkpoint)
    if isinstance(target, GPT):  # not a copy of the target: give it the target's backend
        model = to_backend(model, backend_of(target))
    return ModelDraft(name, model.to(target.device), quantize.float32_bytes(model))


def _small(target: GPT, checkpoint=None, **_) -> Draft:
    return _checkpoint_draft("small", target, checkpoint or shipped_path("small"))


def _shipped(target: GPT, **_) -> Draft:
    """The shipped target as a draft: the truncated draft of a target grown from it (`model.grow`)."""
    return _checkpoint_draft("shipped", target, shipped_path("target"))


def _bigram(target: GPT, **_) -> Draft:
    ids = corpus_ids(target)  # None: the shipped characters, the shipped table
    return BigramDraft() if ids is None else BigramDraft(ids, target.config.vocab_size)


def _ngram(target: GPT, order: int | None = None, **_) -> Draft:
    ids = corpus_ids(target)
    if ids is None:
        return NgramDraft(order or DEFAULT_ORDER)
    return NgramDraft(order or DEFAULT_ORDER, token_ids=ids, vocab_size=target.config.vocab_size)


def _prompt_lookup(target, max_ngram: int | None = None, **_) -> Draft:
    return PromptLookupDraft(target.config.vocab_size, **({"max_ngram": max_ngram} if max_ngram else {}))


def _hf(path: str, target, device=None, dtype=None, allow_download: bool = False, **_) -> Draft:
    """A Hugging Face causal LM as a draft (on the target's device unless `device`), checked to share the
    target's vocabulary before any work; it proposes with its own DynamicCache, rolled back by crop."""
    from specdec.model import hf  # transformers is the optional [hf] extra: imported only when asked for

    model = hf.load_hf(path, device=device or target.device, dtype=dtype, allow_download=allow_download)
    hf.check_same_vocabulary(target, model)
    return ModelDraft(f"hf:{path}", model, model.weight_bytes())


def _medusa(target, checkpoint=None, **_) -> Draft:
    """Medusa heads on the shipped target's states (`decoding.medusa`; a draft that reads the target)."""
    from specdec.decoding.medusa import make_medusa

    return make_medusa(target, checkpoint)


def _eagle(target, checkpoint=None, **_) -> Draft:
    """An EAGLE-style network on the shipped target's states (`decoding.eagle`; a draft that reads the target)."""
    from specdec.decoding.eagle import make_eagle

    return make_eagle(target, checkpoint)


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
# Drafts by name (medusa and eagle in a report of the shipped model too): prompt lookup, ..., then register_draft's.
REGISTERED: dict[str, Callable[..., Draft]] = {"prompt-lookup": _prompt_lookup, "shipped": _shipped,
                                               "medusa": _medusa, "eagle": _eagle}
ENTRY_POINTS = "specdec.drafts"  # an installed package's entry point here names a factory(target, **options)
assert tuple(DRAFTS) == SHIPPED_DRAFTS and tuple(REGISTERED) == ON_REQUEST, "decoding.names must name them"
TREE_DRAFTS = ("bigram", "ngram")  # the shipped drafts that draft token trees: the table drafts


def register_draft(name: str, factory: Callable[..., Draft], replace: bool = False) -> None:
    """Make `make_draft(name, target, **options)` call `factory(target, **options)` (which returns a Draft).

    A name already taken (a shipped draft, or registered before without replace=True) is a ValueError naming
    it; so is a name that is not a non-empty string without spaces or the "hf:" prefix.
    """
    if not isinstance(name, str) or not name or any(c.isspace() for c in name) or name.startswith(HF_PREFIX):
        raise InputError(f"a draft name must be a non-empty string without spaces or the {HF_PREFIX!r} "
                         f"prefix, got {name!r}")
    if not callable(factory):
        raise InputError(f"the factory for draft {name!r} must be callable, got {factory!r}")
    if name in DRAFTS or (name in REGISTERED and not replace):
        raise InputError(f"draft name {name!r} is taken (taken: {', '.join(draft_names())}); "
                         f"pass replace=True to replace a registered one")
    REGISTERED[name] = factory


def draft_names() -> list[str]:
    """Every name make_draft knows now: the shipped drafts, the registered ones, installed entry points."""
    names = list(DRAFTS) + list(REGISTERED)
    return names + [n for n in _entry_points() if n not in names]


def _entry_points() -> dict:
    try:
        return {ep.name: ep for ep in metadata.entry_points(group=ENTRY_POINTS)}
    except Exception:  # a broken installed distribution must not break the shipped drafts
        return {}


def _factory(name: str) -> Callable[..., Draft]:
    if name in DRAFTS:
        return DRAFTS[name]
    if name in REGISTERED:
        return REGISTERED[name]
    ep = _entry_points().get(name)
    if ep is not None:
        return ep.load()
    if name.startswith(HF_PREFIX) and len(name) > len(HF_PREFIX):
        path = name[len(HF_PREFIX):]
        return lambda target, **options: _hf(path, target, **options)
    if name.startswith(EAGLE3_PREFIX) and len(name) > len(EAGLE3_PREFIX):
        path = name[len(EAGLE3_PREFIX):]
        return lambda target, **options: eagle3.load(path, target)
    raise UnknownDraftError(f"unknown draft {name!r} (available: {', '.join(draft_names())}, hf:PATH, eagle3:PATH)")


def available_on(device: str | torch.device) -> list[str]:
    """The drafts that can run beside a target on `device`: all of them on the CPU, the rest elsewhere."""
    on_cpu = torch.device(device).type == "cpu"
    return [n for n in DRAFTS if on_cpu or n not in CPU_ONLY]


def make_draft(name: str | Draft, target: GPT, **options) -> Draft:
    """A fresh draft by name for `target` (any `model.protocol.Target`), on the target's device; options:
    `order` for ngram, `checkpoint` for small, `max_ngram` for prompt-lookup, `device`/`dtype`/
    `allow_download` for hf:PATH. A Draft object is returned as it is. A CPU-only draft beside a target
    elsewhere is a DeviceError."""
    device = target.device
    if isinstance(name, Draft):
        _check_device(name.name, name.cpu_only, device)
        return name
    factory = _factory(name)
    _check_device(name, name in CPU_ONLY, device)
    draft = factory(target, **options)
    if not isinstance(draft, Draft):
        raise UnknownDraftError(f"the factory of draft {name!r} returned a {type(draft).__name__}, not a Draft")
    if name not in CPU_ONLY:
        _check_device(name, draft.cpu_only, device)
    return draft


def _check_device(name: str, cpu_only: bool, device: torch.device) -> None:
    if cpu_only and torch.device(device).type != "cpu":
        raise DeviceError(f"draft {name!r} runs on the CPU only, the target is on {torch.device(device).type} "
                          f"(available there: {', '.join(available_on(device))})")
