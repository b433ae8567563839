"""What a report measures for its target: the drafts (the caller's, or every one the target can have), those
it skips and why (`doc["skipped"]`), and the sections a target other than the shipped GPT cannot have
(`doc["unavailable"]`). `build.measure` asks before anything is measured; the CLI asks for the default drafts.
"""

from __future__ import annotations

import torch

from specdec.decoding.drafts import Draft, UnknownDraftError
from specdec.decoding.names import READ_THE_TARGET
from specdec.decoding.registry import CPU_ONLY, DRAFTS, make_draft
from specdec.measure.anatomy import roofline
from specdec.model import protocol
from specdec.model.gpt import GPT
from specdec.util.errors import InputError


# The drafts that are copies of the shipped GPT's weights (make_draft refuses them for any other target), and
# what a target other than the shipped GPT cannot have, one line each as the report prints it.
SHIPPED_ONLY = ("int8", "int4", "int8-dynamic")
NOT_SHIPPED = {
    "write-up table": "needs the shipped model with its bigram/int8/int4 drafts at 'ROMEO:', seed 0",
    "backends": "the shipped GPT only (its eager, fused, numpy and onnx forwards of the same weights)",
    "quantized drafts": f"{', '.join(SHIPPED_ONLY)} are copies of the shipped GPT's weights",
}


def drafts_for(target, drafts, device: str, log) -> tuple[dict, dict]:
    """The drafts to measure (name -> name or Draft) and those skipped (name -> why), the skips logged; a
    ValueError naming every reason when nothing is left."""
    given = _given_drafts(target if drafts is None else drafts, drafts is None)
    skipped = _skipped(given, target, device)
    for name, why in skipped.items():
        log(f"[setup] skipping draft {name}: it {why}")
    given = {n: d for n, d in given.items() if n not in skipped}
    if not given:
        raise InputError(f"no draft to measure with this target on {device} (skipped: "
                         f"{'; '.join(f'{n}: {why}' for n, why in skipped.items())})")
    return given, skipped


def unavailable(target, knobs: dict) -> dict[str, str]:
    """What this target cannot have (section -> one line why); trees it cannot verify are dropped from knobs."""
    unavailable = {} if isinstance(target, GPT) else dict(NOT_SHIPPED)
    if protocol.tree_support(target) and knobs["trees"]:
        unavailable["trees"] = protocol.tree_support(target)
        knobs["trees"] = []
    if roofline.pass_shape(roofline.model_config(target)) is None:
        unavailable["overhead floor"] = (f"FLOPs and bytes per pass are counted for the shipped GPT, gpt2 and "
                                         f"{', '.join(roofline.LLAMA_FAMILY)} only; "
                                         f"{protocol.describe(target)['architecture']!r} reads unknown")
    return unavailable


def default_drafts(target) -> list[str]:
    """The drafts a report measures when none are named: every shipped draft for the shipped GPT, and the drafts
    that read it where their weights were trained for its checkpoint (`reading_drafts`); for any other target
    those `make_draft` can build for it -- bigram, ngram, small where its tokens are the corpus's characters (an
    exported copy of the shipped model), and prompt-lookup."""
    if isinstance(target, GPT):
        return list(DRAFTS) + reading_drafts(target)
    small = ["small"] if getattr(target, "corpus_vocabulary", False) else []
    return ["bigram", "ngram", *small, "prompt-lookup"]


def reading_drafts(target) -> list[str]:
    """The shipped drafts that read the target (`names.READ_THE_TARGET`) that this GPT can have: their weights
    name the checkpoint they were trained for, and another checkpoint refuses them (left out, not an error)."""
    out = []
    for name in READ_THE_TARGET:
        try:
            make_draft(name, target)
        except UnknownDraftError:
            continue
        out.append(name)
    return out


def _given_drafts(target_or_drafts, default: bool) -> dict[str, str | Draft]:
    """name -> the caller's name or Draft object, in order (a Draft object is named by its `.name`); the
    default set for the target when none were named. Two drafts of one name: a one-line ValueError."""
    items = default_drafts(target_or_drafts) if default else list(target_or_drafts)
    out: dict[str, str | Draft] = {}
    for d in items:
        if not isinstance(d, (str, Draft)):
            raise InputError(f"a draft must be a name or a Draft object, got {d!r}")
        name = d if isinstance(d, str) else d.name
        if name in out:
            raise InputError(f"two drafts are named {name!r}; give each draft its own name")
        out[name] = d
    return out


def _skipped(given: dict[str, str | Draft], target, device: str) -> dict[str, str]:
    """The drafts this report cannot run, name -> why (as `doc["skipped"]` records it): CPU-only kernels beside
    a target elsewhere, and the shipped GPT's quantized copies beside any other target."""
    out = {}
    for name, d in given.items():
        cpu_only = d.cpu_only if isinstance(d, Draft) else name in CPU_ONLY
        if cpu_only and torch.device(device).type != "cpu":
            out[name] = f"runs on the CPU only, not on {device}"
        elif isinstance(d, str) and name in SHIPPED_ONLY and not isinstance(target, GPT):
            out[name] = f"is a quantized copy of the shipped GPT, not of a {type(target).__name__} target"
    return out
