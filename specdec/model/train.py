"""Deterministic training of the target (and of the `small` draft), checkpoint save and safe load.

Every batch is a set of windows exactly `context` characters long, drawn with a seeded numpy generator from
the training split, so every position a generation can reach has a trained position embedding. The same
seed, step count and thread count give the same weights. Checkpoints are plain dicts of tensors and numbers,
written to a temporary file and renamed into place (an interrupted run never leaves half a checkpoint), and
read with `torch.load(weights_only=True)`, which refuses to unpickle code.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
import time
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from specdec.model.names import HF_PREFIX  # noqa: F401 (train.HF_PREFIX: the older spelling)
from specdec.model import corpus
from specdec.model.gpt import GPT, GPTConfig
from specdec.util.files import atomic_path
from specdec.util.errors import InputError

SMALL_CONFIG = GPTConfig(n_layer=1, n_head=2, n_embd=64)  # the `small` draft: 1 block, 64 wide


class CheckpointError(InputError, RuntimeError):
    """A checkpoint that is missing or cannot be read; the message says how to make a new one."""


@dataclass(frozen=True)
class TrainConfig:
    steps: int = 3000  # optimiser steps
    batch: int = 32  # windows per step, each `context` characters long
    lr: float = 3e-3  # peak learning rate (AdamW), reached after warm-up, cosine-decayed to lr/10
    warmup: int = 100  # linear warm-up steps
    weight_decay: float = 0.1  # on matrices only, as in nanoGPT
    seed: int = 0  # seeds the weights and the batch order
    eval_batches: int = 40  # validation windows = eval_batches * batch, at fixed offsets
    threads: int = 2  # torch threads while training (recorded in the checkpoint)
    distill: bool = False  # train against the target's distribution (KL) rather than the next character


TRAIN_DIR = Path("specdec-train")  # where `specdec train` writes without --out: never over the shipped files


def default_out(name: str = "target", suffix: str = ".pt") -> Path:
    """Where `specdec train` (and `train-draft`) writes checkpoint `name` when no --out is given: TRAIN_DIR under
    the working directory. The shipped checkpoints, which every report and the asv history measure, are replaced
    only on purpose (--out naming them, or a copy)."""
    return TRAIN_DIR / f"{name}{suffix}"


def shipped_path(name: str = "target", suffix: str = ".pt") -> Path:
    """Path of a file shipped in the package: checkpoint 'target' or 'small', or a draft's heads (their suffix)."""
    return Path(str(resources.files("specdec").joinpath(f"data/{name}{suffix}")))


def _batch(data: np.ndarray, rng: np.random.Generator, batch: int, context: int):
    starts = rng.integers(0, len(data) - context - 1, size=batch)
    idx = starts[:, None] + np.arange(context + 1)[None, :]
    window = torch.from_numpy(data[idx].astype(np.int64))  # (batch, context + 1)
    return window[:, :-1], window[:, 1:]


@torch.no_grad()
def evaluate(model: GPT, batches: int = 40, batch: int = 32) -> float:
    """Mean next-character cross-entropy (nats) on the validation split, over evenly spaced windows."""
    model.eval()
    data = corpus.split_ids("val")
    ctx = model.config.context
    starts = np.linspace(0, len(data) - ctx - 2, batches * batch).astype(np.int64)
    total = 0.0
    for chunk in np.array_split(starts, batches):
        idx = chunk[:, None] + np.arange(ctx + 1)[None, :]
        window = torch.from_numpy(data[idx].astype(np.int64))
        logits = model(window[:, :-1])
        total += F.cross_entropy(logits.flatten(0, 1), window[:, 1:].flatten()).item() * len(chunk)
    model.train()
    return total / len(starts)


def _lr(step: int, tc: TrainConfig) -> float:
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    progress = (step - tc.warmup) / max(1, tc.steps - tc.warmup)
    return tc.lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * progress)))


def train(
    cfg: GPTConfig = GPTConfig(),
    tc: TrainConfig = TrainConfig(),
    teacher: GPT | None = None,
    log=print,
) -> tuple[GPT, dict]:
    """Train a model from scratch; returns it with its metadata (val loss, steps, wall time, ...).

    With `teacher`, the loss is the KL divergence from the teacher's next-character distribution
    (distillation), which is what a draft is judged by: how closely q matches the target's p.
    """
    torch.set_num_threads(tc.threads)
    torch.manual_seed(tc.seed)
    rng = np.random.default_rng(tc.seed)
    model = GPT(cfg)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": tc.weight_decay}, {"params": no_decay, "weight_decay": 0.0}],
        lr=tc.lr,
        betas=(0.9, 0.99),
    )
    data = corpus.split_ids("train")
    if teacher is not None:
        teacher.eval()
    t0 = time.perf_counter()
    every = max(1, tc.steps // 20)
    for step in range(tc.steps):
        for group in opt.param_groups:
            group["lr"] = _lr(step, tc)
        x, y = _batch(data, rng, tc.batch, cfg.context)
        logits = model(x)
        if teacher is None:
            loss = F.cross_entropy(logits.flatten(0, 1), y.flatten())
        else:
            with torch.no_grad():
                target_logp = F.log_softmax(teacher(x), dim=-1)
            loss = F.kl_div(F.log_softmax(logits, -1), target_logp, log_target=True, reduction="batchmean")
            loss = loss / cfg.context
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % every == 0 or step == tc.steps - 1:
            elapsed = time.perf_counter() - t0
            log(f"step {step + 1}/{tc.steps}  loss {loss.item():.4f}  lr {_lr(step, tc):.2e}  {elapsed:.0f}s")
    wall = time.perf_counter() - t0
    val = evaluate(model, tc.eval_batches, tc.batch)
    log(f"validation loss {val:.4f} nats/char after {tc.steps} steps, {wall:.0f}s")
    meta = {
        "val_loss": val,
        "steps": tc.steps,
        "batch": tc.batch,
        "lr": tc.lr,
        "seed": tc.seed,
        "threads": tc.threads,
        "distilled": teacher is not None,
        "train_seconds": wall,
        "torch_version": str(torch.__version__),  # a plain str: weights_only loading refuses TorchVersion
    }
    return model.eval(), meta


def save_checkpoint(model: GPT, meta: dict, path: str | os.PathLike) -> str:
    """Write {config, model, meta} atomically (temp file in the same folder, then rename); returns sha256."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    payload = {"config": model.config.to_dict(), "model": state, "meta": meta}
    with atomic_path(path) as tmp:
        torch.save(payload, tmp)
    return file_sha256(path)


def file_sha256(path: str | os.PathLike) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def load_checkpoint(path: str | os.PathLike) -> tuple[GPT, dict]:
    """Load (model, meta) safely; any failure is a one-line CheckpointError saying how to retrain."""
    path = Path(path)
    hint = "retrain it with `specdec train --out <path>`"
    if not path.is_file():
        raise CheckpointError(f"checkpoint {str(path)!r} not found; {hint}")
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
        cfg = GPTConfig(**payload["config"])
        model = GPT(cfg)
        model.load_state_dict(payload["model"])
        meta = dict(payload.get("meta", {}))
    except Exception as exc:  # any unreadable file: report it in one line, not a torch traceback
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(exc)).strip()  # torch colours some of its messages
        first = text.splitlines()[0] if text else type(exc).__name__
        raise CheckpointError(f"checkpoint {str(path)!r} is corrupt ({first[:120]}); {hint}") from None
    meta["sha256"] = file_sha256(path)
    meta["path"] = str(path)
    model.eval()
    model.setup_cache(1)  # ready to decode: one sequence
    model.meta = meta
    return model, meta




def load_target(path: str | os.PathLike | None = None, backend: str = "eager", *, device=None, dtype=None,
                allow_download: bool = False):
    """The trained target: the checkpoint shipped in the package unless `path` names another, run by
    `backend` (one of `backends.BACKENDS`; an unknown name is a one-line `UnknownBackendError`, raised before
    the checkpoint is read). `path` "hf:FOLDER" (or "hf:MODEL-ID" already in the local cache) loads a Hugging
    Face transformers causal LM instead (`model.hf.load_hf`: the [hf] extra), on `device` in `dtype`; it runs
    as transformers runs it, so only the default backend applies to it. `device` moves a shipped target too."""
    from specdec.model import backends

    backends.check_backend(backend)
    if str(path or "").startswith(HF_PREFIX):
        if backend != "eager":
            raise backends.UnknownBackendError(f"backend {backend!r} is for the shipped model; a Hugging Face "
                                               "target runs as transformers runs it (allowed: eager)")
        from specdec.model.hf import load_hf

        return load_hf(str(path)[len(HF_PREFIX):], device=device or "cpu", dtype=dtype,
                       allow_download=allow_download)
    if dtype not in (None, "float32", torch.float32):
        raise InputError(f"dtype {dtype!r} is for Hugging Face targets; the shipped model computes in float32")
    model, _ = load_checkpoint(shipped_path("target") if path is None else path)
    model = backends.to_backend(model, backend)
    return model if device is None else model.to(device)
