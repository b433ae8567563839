"""The commands that make, describe and export models: `train` (the target, or the `small` draft), `train-draft`
(a draft that reads the target), `info`, `export-gguf` and `export-hf`. Dispatched by `commands.main`, under the
same rules: bad input one line and exit 2 before any work, results on stdout.
"""

from __future__ import annotations


from specdec.cli.checks import (UsageError, at_least, hf_extra, writable_dir, writable_file)
from specdec.cli import models


def cmd_train(args) -> int:
    from specdec.model import train as _train
    from specdec.model.gpt import GPTConfig

    given = {name: getattr(args, name) for name in ("steps", "batch", "threads") if getattr(args, name) is not None}
    for name, value in given.items():
        at_least(f"--{name}", value, 1)
    at_least("--seed", args.seed, 0)
    if args.teacher is not None and args.draft != "small":
        raise UsageError("--teacher needs --draft small (only the small draft is distilled from a teacher)")
    out = args.out or _train.default_out(args.draft or "target")
    writable_file("--out", out)
    tc = _train.TrainConfig(seed=args.seed, **given)
    teacher = None
    if args.draft == "small":
        cfg = _train.SMALL_CONFIG
        teacher = _train.load_target(args.teacher)
    else:
        cfg = GPTConfig()
    model, meta = _train.train(cfg, tc, teacher=teacher, log=models.log)
    sha = _train.save_checkpoint(model, meta, out)
    print(f"wrote {out} (sha256 {sha[:12]}, val loss {meta['val_loss']:.4f}, {meta['train_seconds']:.0f}s)")
    if args.out is None:
        models.log(f"the shipped {args.draft or 'target'} is unchanged; measure this one with --checkpoint {out}, "
                   f"or copy it over {_train.shipped_path(args.draft or 'target')} to ship it")
    return 0


def cmd_train_draft(args) -> int:
    """`specdec train-draft NAME`: a draft that reads the target, distilled from the shipped target (frozen)."""
    if args.steps is not None:
        at_least("--steps", args.steps, 1)
    at_least("--seed", args.seed, 0)
    at_least("--threads", args.threads, 1)
    import importlib

    import torch

    from specdec.decoding import head_weights
    from specdec.model import train as _train

    out = args.out or _train.default_out(args.name, head_weights.SUFFIX)
    writable_file("--out", out)
    module = importlib.import_module(f"specdec.decoding.{args.name}")
    torch.set_num_threads(args.threads)
    target = _train.load_target()
    steps = args.steps or module.STEPS
    if args.name == "medusa":
        net, meta = module.train_medusa(target, steps=steps, seed=args.seed, log=models.log)
        sha = module.save_heads(net, meta, out)
    else:
        net, meta = module.train_eagle(target, steps=steps, seed=args.seed, log=models.log)
        sha = module.save_net(net, meta, out)
    params = sum(p.numel() for p in net.parameters())
    print(f"wrote {out} (sha256 {sha[:12]}, {params:,} parameters, {meta['seconds']:.0f}s)")
    if args.out is None:
        models.log(f"the shipped {args.name} is unchanged; use this one with make_draft({args.name!r}, target, "
                   f"checkpoint={str(out)!r}), or copy it over {head_weights.shipped(args.name)} to ship it")
    return 0


def cmd_info(args) -> int:
    import json

    import torch

    target = models.load_target(args)
    if models.is_hf(models.target_spec(args)):
        info = _hf_info(target)
    else:
        info = _checkpoint_info(target)
    info.update({"torch_version": torch.__version__, "threads": torch.get_num_threads()})
    if args.json:
        print(json.dumps(info))
    else:
        for key, value in info.items():
            print(f"{key:22} {value}")
    return 0


def _checkpoint_info(target) -> dict:
    from specdec.model.quantize import float32_bytes

    meta = target.meta
    return {
        "params": target.num_params(),
        "weight_bytes_float32": float32_bytes(target),
        "vocab_size": target.config.vocab_size,
        "context": target.config.context,
        "config": target.config.to_dict(),
        "val_loss": meta.get("val_loss"),
        "train_steps": meta.get("steps"),
        "train_seconds": meta.get("train_seconds"),
        "checkpoint": meta["path"],
        "checkpoint_sha256": meta["sha256"],
    }


def _hf_info(target) -> dict:
    """A Hugging Face target: who it is (as report.json records it), its size, and how it was loaded."""
    from specdec.model.protocol import describe

    return {**describe(target), "params": sum(p.numel() for p in target.parameters()),
            "weight_bytes": target.weight_bytes(), "dtype": str(target.dtype).removeprefix("torch."),
            "device": str(target.device)}


def _grow_recipe(args) -> tuple[int, int, float] | None:
    """export-gguf's --grow knobs as (widen, layers, mix), or None without --grow; a bad one is a UsageError."""
    from specdec.model import grow

    knobs = {"--widen": args.widen, "--layers": args.layers, "--mix": args.mix}
    if not args.grow:
        given = [k for k, v in knobs.items() if v is not None]
        if given:
            raise UsageError(f"export-gguf: {given[0]} shapes the grown target; give it with --grow")
        return None
    r = grow.DEFAULT_WIDEN if args.widen is None else args.widen
    layers = grow.DEFAULT_LAYERS if args.layers is None else args.layers
    mix = grow.DEFAULT_MIX if args.mix is None else args.mix
    if not 1 <= r <= 16:
        raise UsageError(f"export-gguf --widen {r}: give an integer from 1 to 16")
    if not grow.SHIPPED_LAYERS <= layers <= 64:
        raise UsageError(f"export-gguf --layers {layers}: give an integer from {grow.SHIPPED_LAYERS} (the shipped "
                         f"blocks) to 64")
    if not (mix >= 0 and mix < float("inf")):
        raise UsageError(f"export-gguf --mix {mix}: give a finite number >= 0")
    return r, layers, mix


def cmd_export_gguf(args) -> int:
    """The shipped target and small draft as GGUF files OUT/target.gguf and OUT/small.gguf (llama.cpp's gpt2
    graph, a character vocabulary whose ids are the corpus's), and with --grow the user-sized grown target
    (OUT/grown.gguf, OUT/grown.pt); what it wrote on stderr."""
    import importlib.util
    from pathlib import Path

    from specdec.model.export_gguf import EXPORTED, GROWN, export_gguf, export_grown

    out = Path(args.out)
    recipe = _grow_recipe(args)
    names = [f"{n}.gguf" for n in EXPORTED] + ([f"{GROWN}.gguf", f"{GROWN}.pt"] if recipe else [])
    for path in [out] + [out / n for n in names]:
        if path.exists() and path.is_dir() != (path == out):
            what = "a file, not a folder" if path == out else "a folder, not a file"
            raise UsageError(f"export-gguf {args.out}: {path} is {what} (export-gguf writes "
                             f"{', '.join(str(out / n) for n in names)})")
    writable_dir("export-gguf OUT", args.out)
    if importlib.util.find_spec("gguf") is None:
        raise UsageError("export-gguf: writing GGUF needs the llamacpp extra (pip install 'specdec-bench[llamacpp]')")
    for name, path in export_gguf(out).items():
        models.log(f"wrote {path} ({name})")
    if recipe:
        r, layers, mix = recipe
        models.log(f"growing the shipped target: width x{r}, {layers} blocks, mix {mix:g}")
        for kind, path in export_grown(out, r, layers, mix).items():
            models.log(f"wrote {path} (grown target, {kind})")
    return 0


def cmd_export_hf(args) -> int:
    """The shipped target and small draft as transformers folders OUT/target and OUT/small; their paths on
    stdout, one a line (`--target hf:OUT/target --draft hf:OUT/small` runs the pair through the adapter)."""
    from pathlib import Path

    from specdec.model.export_hf import EXPORTED, export_hf

    hf_extra("export-hf")
    out = Path(args.out)
    for path in [out] + [out / name for name in EXPORTED]:
        if path.exists() and not path.is_dir():
            raise UsageError(f"export-hf {args.out}: {path} is a file, not a folder (export-hf writes "
                             f"{', '.join(str(out / n) for n in EXPORTED)})")
    writable_dir("export-hf OUT", args.out)
    for path in export_hf(out).values():
        print(path)
    return 0
