"""A trained draft's own weights (Medusa's heads, EAGLE's network) as one file: config, the module's state dict
and meta, written atomically and read safely, any failure one line. A `.safetensors` file (the shipped heads',
and what `specdec train-draft` writes) holds the tensors and, as its string metadata, the config and meta as
JSON; any other name is a torch file ({config, the state dict under `key`, meta}) read with
`torch.load(weights_only=True)`, as heads trained before were written. One implementation for every draft that
reads the target, so their files are made and checked alike; and the float32 numpy copies their drafting steps
run on (`numpy32`, `last_state`)."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn

from specdec.model.train import CheckpointError, file_sha256, shipped_path
from specdec.util.files import atomic_path


def numpy32(t: torch.Tensor) -> np.ndarray:
    """A float32 numpy copy of `t` on the CPU: the weights a draft's numpy step runs on, or a handed state the
    draft keeps (the loop reuses the tensor it hands)."""
    return t.detach().to("cpu", torch.float32).numpy().copy()


def last_state(features: torch.Tensor) -> np.ndarray:
    """A float32 numpy copy of the last of the handed states `features` (n, C): the one that predicted the pending
    token. A CPU float32 tensor (every shipped backend's) is read through numpy: each torch op here runs inside a
    round, after the target's pass has evicted torch's dispatch code, and costs several microseconds there."""
    if features.dtype is torch.float32 and features.device.type == "cpu" and not features.requires_grad:
        return features.numpy()[-1].copy()
    return numpy32(features[-1])


SUFFIX = ".safetensors"  # the shipped heads' files, and what `specdec train-draft` writes


def shipped(name: str) -> Path:
    """The shipped weights of draft `name` (medusa, eagle): specdec/data/NAME.safetensors."""
    return shipped_path(name, SUFFIX)


def save(module: nn.Module, config: dict, key: str, meta: dict, path: str | os.PathLike) -> str:
    """Write config, the module's weights and meta atomically (its folder made): safetensors where the name ends
    in .safetensors, else a torch file with the weights under `key`; returns the file's sha256."""
    path = Path(path)
    weights = {k: v.detach().clone().contiguous() for k, v in module.state_dict().items()}
    with atomic_path(path) as tmp:
        if path.suffix == SUFFIX:
            from safetensors.torch import save_file

            save_file(weights, str(tmp), metadata={"config": json.dumps(config), "meta": json.dumps(dict(meta))})
        else:
            torch.save({"config": config, key: weights, "meta": dict(meta)}, tmp)
    return file_sha256(path)


def _read(path: Path, key: str) -> tuple[dict, dict, dict]:
    """(config, state dict, meta) of a file `save` wrote."""
    if path.suffix == SUFFIX:
        from safetensors import safe_open

        with safe_open(str(path), framework="pt") as f:
            header = f.metadata() or {}
            weights = {k: f.get_tensor(k) for k in f.keys()}
        return json.loads(header["config"]), weights, json.loads(header.get("meta", "{}"))
    payload = torch.load(path, map_location="cpu", weights_only=True)
    return payload["config"], payload[key], dict(payload.get("meta", {}))


def load(path: str | os.PathLike, key: str, build: Callable[[dict], nn.Module], name: str, verb: str,
         hint: str) -> tuple[nn.Module, dict]:
    """(module in eval mode, meta): `build(config)` made and given the file's weights under `key`. A missing or
    unreadable file is a one-line CheckpointError: "{name} 'PATH' not found; {hint}", or "... {verb} corrupt"."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(f"{name} {str(path)!r} not found; {hint}")
    try:
        config, weights, meta = _read(path, key)
        module = build(config)
        module.load_state_dict(weights)
    except Exception as exc:  # an unreadable file: one line, not a torch traceback
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise CheckpointError(f"{name} {str(path)!r} {verb} corrupt ({first[:120]}); {hint}") from None
    return module.eval(), meta
