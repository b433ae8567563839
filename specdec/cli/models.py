"""The target and the drafts a command names: a checkpoint or hf:PATH, draft names, prompt-lookup or hf:PATH.

Every check here runs before a model loads, so a bad spec is one line and exit 2 before any work; a model that
cannot load (HFModelError) or a draft that does not fit the target is caught at `commands.main`.
"""

from __future__ import annotations

import os
import sys

from specdec.cli.checks import UsageError, hf_extra
from specdec.model.names import HF_PREFIX  # torch-free: the model loads (train) only when a command needs it


def log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- the target and the drafts by spec: a checkpoint, or hf:PATH --------------------------------


def is_hf(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(HF_PREFIX)


def target_spec(args) -> str | None:
    """--target or --checkpoint (None: the shipped checkpoint); both at once is an error."""
    spec, checkpoint = getattr(args, "target", None), getattr(args, "checkpoint", None)
    if spec is not None and checkpoint is not None:
        raise UsageError(f"give --target or --checkpoint, not both (got --target {spec} and --checkpoint "
                         f"{checkpoint}; --target is the general form)")
    return checkpoint if spec is None else spec


def draft_specs(args) -> list[str]:
    """Every draft the command was given (generate's one --draft, verify's repeated --draft, report's --drafts)."""
    given = getattr(args, "drafts", None) or getattr(args, "draft", None) or []
    return [given] if isinstance(given, str) else list(given)


def check_model_args(args) -> None:
    """--target, --backend, --dtype and --allow-download agree, before anything is loaded: an hf: target runs
    as transformers runs it (auto means eager), and the two loading options mean something only for hf: models."""
    spec, drafts = target_spec(args), draft_specs(args)
    for option, s in [("--target", spec)] + [("--draft", d) for d in drafts]:
        if is_hf(s):
            if len(s) == len(HF_PREFIX):
                raise UsageError(f"{option} {s}: name the model after the prefix (hf:FOLDER or hf:MODEL-ID)")
            hf_extra(f"{option} {s}")
    backend = getattr(args, "backend", "auto")
    if is_hf(spec) and backend not in ("auto", "eager"):
        raise UsageError(f"--backend {backend} is for the shipped model; a Hugging Face target runs as "
                         f"transformers runs it (allowed with --target {spec}: auto, eager)")
    device = getattr(args, "device", "cpu")
    if device != "cpu" and backend not in ("auto", "eager"):  # numpy and onnx would run eager under their name
        from specdec.model.backends import OFF_CPU

        raise UsageError(f"--backend {backend} runs on the CPU only (allowed with --device {device}: auto, "
                         f"{', '.join(OFF_CPU)})")
    if is_hf(spec) or any(is_hf(d) for d in drafts):
        return
    if args.dtype is not None:
        raise UsageError(f"--dtype {args.dtype} is for Hugging Face models (--target hf:PATH or --draft "
                         "hf:PATH); the shipped model computes in float32")
    if args.allow_download:
        raise UsageError("--allow-download is for Hugging Face model ids (--target hf:ID or --draft hf:ID); "
                         "nothing else is downloaded")


def backend_name(args) -> str:
    """--backend as a name: auto is the fastest on the command's device (eager for a Hugging Face target)."""
    from specdec.model.backends import fastest

    if is_hf(target_spec(args)):
        return "eager"
    name = getattr(args, "backend", "eager")
    return fastest(getattr(args, "device", "cpu")) if name == "auto" else name


def load_target(args, backend: str | None = None):
    """The target the command names. A Hugging Face model loads on --device in --dtype; every failure to load
    is a one-line HFModelError (a ValueError: exit 2 in `main`)."""
    from specdec.model import train as _train

    spec = target_spec(args)
    if is_hf(spec):
        return _train.load_target(spec, device=getattr(args, "device", "cpu"), dtype=args.dtype,
                                  allow_download=args.allow_download)
    return _train.load_target(spec, backend=backend or backend_name(args))


def check_draft_names(names: list[str], device: str = "cpu") -> None:
    """Every name is a draft make_draft knows (or hf:PATH, eagle3:PATH, or the user's MODULE:CALLABLE, whose
    module and top-level callable must exist in the current folder), and runs on `device`: checked before
    loading."""
    from specdec.decoding.registry import DRAFTS, EAGLE3_PREFIX, available_on, draft_names
    from specdec.measure import entry

    here, known = available_on(device), draft_names()
    for n in names:
        if entry.is_entry(n):
            entry.check_static(n, "the current folder", folder=os.getcwd())
            continue
        if n not in known and not is_hf(n) and not (n.startswith(EAGLE3_PREFIX) and len(n) > len(EAGLE3_PREFIX)):
            raise UsageError(f"unknown draft {n!r} (available: {', '.join(known)}, hf:PATH, eagle3:PATH, "
                             "MODULE:CALLABLE)")
        if n in DRAFTS and n not in here:
            raise UsageError(f"draft {n!r} runs on the CPU only, not on {device} (available there: "
                             f"{', '.join(here)})")


def drafts_arg(names: list[str] | None, device: str = "cpu") -> list[str]:
    """The drafts asked for; by default every shipped one that runs on `device` (a one-line note names the rest)."""
    from specdec.decoding.registry import DRAFTS, available_on

    if names:
        check_draft_names(names, device)
        return names
    here = available_on(device)
    for n in DRAFTS:
        if n not in here:
            log(f"note: skipping draft {n!r}: it runs on the CPU only, not on {device}")
    return here


def draft_for(args, name: str, target):
    """One draft for `target`; an hf: draft loads in --dtype (on the target's device) and must share the
    target's vocabulary. A draft the target cannot have is a one-line ValueError naming why. A user's
    MODULE:CALLABLE is imported from the current folder (first on the path, as `python -m` puts it) and called
    with the target."""
    from specdec.decoding.registry import make_draft
    from specdec.measure import entry

    if entry.is_entry(name):
        here = os.getcwd()
        if here not in sys.path:
            sys.path.insert(0, here)
        return entry.make_draft(name, target)

    options = {"dtype": args.dtype, "allow_download": args.allow_download} if is_hf(name) else {}
    return make_draft(name, target, **options)


def default_draft_names(args, target) -> list[str]:
    """The drafts a command runs when none are named: for the shipped model's checkpoints every shipped draft
    that runs on the device; for a Hugging Face target those it can have, as a report chooses them."""
    from specdec.report.lineup import default_drafts

    if is_hf(target_spec(args)):
        return default_drafts(target)
    return drafts_arg(None, getattr(args, "device", "cpu"))


def build_drafts(args, target, names: list[str] | None) -> dict:
    """The drafts asked for (by default `default_draft_names`), built for `target`."""
    return {n: draft_for(args, n, target) for n in names or default_draft_names(args, target)}


def check_trees(option: str, target) -> None:
    from specdec.model.protocol import tree_support

    reason = tree_support(target)
    if reason:
        raise UsageError(f"{option}: {reason}")


def unit_words(target) -> tuple[str, str]:
    """The target's unit, plural and singular: characters for the shipped model, tokens otherwise."""
    from specdec.model.protocol import units

    plural = units(target)
    return plural, plural[:-1]


def ks_arg(ks: list[int] | None, default) -> list[int]:
    ks = ks or list(default)
    for k in ks:
        if k < 1:
            raise UsageError(f"k must be at least 1, got {k}")
    return ks
