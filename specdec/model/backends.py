"""Backends for the target's forward: the same weights, run with fewer framework calls per pass.

At ~0.6 M parameters a target pass is dominated by per-operator overhead (dispatch, allocation, views), not
by arithmetic (the report's overhead table). A backend is a way of running the *same* `GPT` parameters:

- `eager`: `model.GPT` as it is.
- `fused`: `FusedGPT`, a hand-fused inference forward in the spirit of gpt-fast / llama.cpp: preallocated
  activation buffers written with `out=`, one matmul producing q, k and v straight into the KV-cache slots,
  residual adds fused into the projections (`addmm_`), attention over cache views, logits into a buffer.
- `numpy`: `backend_numpy.NumpyGPT`, the same forward as a few dozen numpy calls on weights folded ahead of
  time (LayerNorm into the next matmul): numpy's per-call cost is a fraction of torch's at this size.
- `onnx`: `backend_onnx.OnnxGPT`, the forward as one ONNX graph that ONNX Runtime runs with I/O binding, its
  attention the GroupQueryAttention kernel appending to the KV cache in place; a target-only step samples
  inside the same run. Needs the `onnx` extra (onnxruntime, onnx); without it it is not in BACKENDS.

`FusedGPT` subclasses `GPT` and only overrides `forward` and `setup_cache`, so its parameters, state dict and
`keep_path` are the eager model's. `copy.deepcopy` keeps the class, which is how the int8/int4 drafts are
built (`quantize.PackedModel.unpack` deep-copies the target and overwrites its weights in place): a draft made
from a fused target is fused too.

Tried and dropped: `compile` (torch.compile) and `torchscript`; `DROPPED` keeps one line each, and
docs/backends.md the measurements and errors with the commands that reproduce them.
"""

from __future__ import annotations

import copy

import torch
import torch.nn.functional as F

from specdec.model.names import BACKEND_NAMES
from specdec.model import backend_onnx
from specdec.model.backend_numpy import NumpyGPT
from specdec.model.backend_onnx import OnnxGPT  # onnx and onnxruntime load when it builds a session
from specdec.model.gpt import GPT
from specdec.util import versions
from specdec.util.errors import InputError


class UnknownBackendError(InputError):
    """A backend name that `to_backend` does not know."""


class FusedGPT(GPT):
    """`GPT` with a hand-fused inference forward (pos given); training (pos=None) runs the eager forward.

    Per block and pass: one `layer_norm`, one `bmm` writing q (to scratch slots) and k, v (to the cache) for
    every head at once, one `scaled_dot_product_attention` over cache views, one `addmm_` that is the output
    projection and the residual add, one `layer_norm`, one `mm` into the MLP buffer, one `gelu`, one `addmm_`
    (projection + residual). The logits are written into a preallocated buffer: the returned tensor is valid
    until the next forward of this model overwrites it (every caller in specdec samples from it first).
    """

    def setup_cache(self, batch: int = 1) -> None:
        """Allocate, per block, one store (batch, 3 * n_head, context, head_size): q scratch, keys, values.

        `attn.k_cache` / `attn.v_cache` are views of it, shaped exactly as the eager cache, so `keep_path` and
        anything that reads the cache work unchanged; the shared store is what lets one matmul write all three.
        """
        cfg = self.config
        p = self.wte.weight
        store = getattr(self, "_stores", None)
        if store and store[0].shape[0] >= batch and store[0].dtype == p.dtype and store[0].device == p.device:
            return
        H, hs, ctx = cfg.n_head, cfg.n_embd // cfg.n_head, cfg.context
        # Plain attributes, not registered buffers: never in the state dict, never parameters. Allocated outside
        # inference mode so that a forward outside it may still write them.
        with torch.inference_mode(False):
            self._stores = [torch.zeros(batch, 3 * H, ctx, hs, dtype=p.dtype, device=p.device) for _ in self.blocks]
            rows = batch * ctx  # the most positions one pass can hold
            self._x = torch.empty(rows, cfg.n_embd, dtype=p.dtype, device=p.device)  # the residual stream
            self._fc = torch.empty(rows, 4 * cfg.n_embd, dtype=p.dtype, device=p.device)  # MLP hidden
            self._logits = torch.empty(rows, cfg.vocab_size, dtype=p.dtype, device=p.device)
        for block, s in zip(self.blocks, self._stores):
            block.attn.k_cache = s[:, H : 2 * H]
            block.attn.v_cache = s[:, 2 * H :]
        self.cache_batch = batch

    def _plan(self) -> list[torch.Tensor] | None:
        """The weights as the fused forward reads them (transposed views, no copies), rebuilt when they move.

        Views are kept because building them costs aten calls every pass; they are keyed on the storage they
        view, which changes after `.to(...)` or `copy.deepcopy` (a deep-copied Parameter is a fresh clone).
        None when a Linear is not a plain float `nn.Linear` (the int8-dynamic draft's quantized Linear keeps
        its weight packed for its own kernel): such a model runs the eager forward.
        """
        if not self.plain_linears():
            return None
        key = tuple(m.weight.data_ptr() for m in self.linears())
        plan = getattr(self, "_plan_cache", None)
        if plan is not None and plan[0] == key:
            return plan[1]
        cfg = self.config
        H, hs = cfg.n_head, cfg.n_embd // cfg.n_head
        views = []
        with torch.no_grad(), torch.inference_mode(False):
            for b in self.blocks:
                # qkv.weight (3C, C) -> (3H, C, hs): head j of q, k, v as a batch of (C, hs) matrices
                views.append(b.attn.qkv.weight.detach().view(3 * H, hs, cfg.n_embd).transpose(1, 2))
                views += [b.attn.proj.weight.detach().t(), b.mlp.fc.weight.detach().t(), b.mlp.proj.weight.detach().t()]
            views.append(self.lm_head.weight.detach().t())
        self._plan_cache = (key, views)
        return views

    def forward(self, idx: torch.Tensor, pos: int | None = None,
                tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        plan = self._plan() if pos is not None else None
        if plan is None:  # training window, or weights the fused kernels cannot read
            return super().forward(idx, pos, tree)
        B, T = idx.shape
        self._check_pass(B, T, pos)
        if torch.is_grad_enabled():  # out= and in-place writes take no gradients: inference only
            with torch.no_grad():
                return self._fused(idx, pos, tree, plan)
        return self._fused(idx, pos, tree, plan)

    def _fused(self, idx: torch.Tensor, pos: int, tree, plan: list[torch.Tensor]) -> torch.Tensor:
        B, T = idx.shape
        BT, C = B * T, self.config.n_embd
        H = self.config.n_head
        x = self._x[:BT]
        torch.index_select(self.wte.weight, 0, idx.reshape(-1), out=x)
        x3 = x.view(B, T, C)
        if tree is None:
            x3.add_(self.wpe.weight[pos : pos + T])
            # a single position may see every cached one: no mask lets SDPA skip reading one
            mask = None if T == 1 else self.causal[pos : pos + T, : pos + T]
        else:  # a tree's nodes share positions by depth and see only their own branch
            x3.add_(self.wpe.weight.index_select(0, tree[0]))
            mask = tree[1]
        fc = self._fc[:BT]
        for i, block in enumerate(self.blocks):
            w_qkv, w_proj, w_fc, w_fp = plan[4 * i : 4 * i + 4]
            h = F.layer_norm(x, (C,), block.ln1.weight, block.ln1.bias, block.ln1.eps)
            store = self._stores[i]
            for b in range(B):  # in decoding B is 1: one bmm of 3H heads, (T, C) @ (C, hs) each
                # out: the slots pos..pos+T of q scratch, keys and values of sequence b, as (3H, T, hs) views
                torch.bmm(h[b * T : (b + 1) * T].expand(3 * H, T, C), w_qkv, out=store[b, :, pos : pos + T])
            q = store[:B, :H, pos : pos + T]
            k = store[:B, H : 2 * H, : pos + T]
            v = store[:B, 2 * H :, : pos + T]
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)  # (B, H, T, hs)
            # (B, T, H*hs): a view when SDPA's output is laid out (B, T, H, hs) (CPU flash kernel), else a copy
            x.addmm_(y.transpose(1, 2).reshape(BT, C), w_proj)  # projection + residual
            h = F.layer_norm(x, (C,), block.ln2.weight, block.ln2.bias, block.ln2.eps)
            torch.mm(h, w_fc, out=fc)
            x.addmm_(F.gelu(fc, approximate="tanh"), w_fp)  # projection + residual
        h = F.layer_norm(x, (C,), self.ln_f.weight, self.ln_f.bias, self.ln_f.eps)
        if self.want_features:  # h is a fresh tensor, not a buffer: it stays valid after the next pass
            self.features = h.detach().view(B, T, C)
        logits = self._logits[:BT]
        torch.mm(h, plan[-1], out=logits)
        return logits.view(B, T, -1)


# name -> the GPT subclass that runs it; the order is KNOWN's order, "eager" first.
_ALL: dict[str, type[GPT]] = {"eager": GPT, "fused": FusedGPT, "numpy": NumpyGPT, "onnx": OnnxGPT}


def _missing() -> dict[str, str]:
    """What each backend needs beyond the core dependencies, when it is not installed or too old to run."""
    if not backend_onnx.AVAILABLE:
        return {"onnx": "it needs onnxruntime and onnx: pip install 'specdec-bench[onnx]'"}
    old = versions.too_old("onnxruntime")
    return {"onnx": old} if old else {}


_MISSING: dict[str, str] = _missing()
_CLASSES: dict[str, type[GPT]] = {n: c for n, c in _ALL.items() if n not in _MISSING}

# Backends tried on this installation and dropped, with why (see the module docstring).
DROPPED: dict[str, str] = {
    "compile": "torch.compile builds one graph per pass length T (26.7 s for T=1, 14.8 s for T=5 here) and a "
               "decode meets many T (prefills, k+1, cut rounds, tree sizes, per draft model)",
    "torchscript": "torch.jit.script cannot type GPT.config (a GPTConfig) and torch.jit.trace cannot take the "
                   "int position (a trace would freeze it as a constant)",
}

KNOWN: tuple[str, ...] = BACKEND_NAMES  # every backend this package implements (the parser reads it torch-free)
assert tuple(_ALL) == KNOWN, "model.names.BACKEND_NAMES must name _ALL's backends in order"
BACKENDS: tuple[str, ...] = tuple(_CLASSES)  # the ones installed here

# The fastest on a CPU first, by tools/backend_race.py on the development VM (a single-position pass at position
# 100: onnx about 0.28x eager's time, numpy 0.39x, fused 0.82x; a 5-position pass 0.29x, 0.58x, 0.94x).
# `fastest` is what the CLI's default `--backend auto` runs: the first of these installed; off the CPU (numpy
# and the onnx session are CPU-only here; fused is untested on CUDA) it is eager.
FASTEST_ON_CPU = ("onnx", "numpy")


def fastest(device: str = "cpu") -> str:
    """The backend `--backend auto` picks on `device`."""
    if torch.device(device).type != "cpu":
        return "eager"
    return next(name for name in FASTEST_ON_CPU + ("eager",) if name in _CLASSES)


# The backends that run off the CPU as themselves. numpy and onnx compute on the CPU (a model moved to CUDA
# runs eager under their name), and fused has not been tried on CUDA: anything else with a CUDA device is
# refused (`check_device`) rather than measured under a name it did not run.
OFF_CPU = ("eager",)


def check_device(name: str, device: str) -> str:
    """name when backend `name` runs on `device` as itself; else a one-line InputError naming the allowed ones."""
    if torch.device(device).type != "cpu" and name not in OFF_CPU:
        raise InputError(f"backend {name!r} runs on the CPU only, not on {device} (allowed on {device}: "
                         f"{', '.join(OFF_CPU)})")
    return name


def backend_of(model: GPT) -> str:
    """The backend name a model runs (its class); 'eager' for anything not converted."""
    for name, cls in _CLASSES.items():
        if type(model) is cls:
            return name
    return "eager"


def check_backend(name: str) -> str:
    if name not in _CLASSES:
        dropped = f"; {name!r} was tried and dropped here: {DROPPED[name]}" if name in DROPPED else ""
        dropped += f"; {name!r} is not installed: {_MISSING[name]}" if name in _MISSING else ""
        raise UnknownBackendError(f"unknown backend {name!r} (available: {', '.join(BACKENDS)}){dropped}")
    return name


def to_backend(model: GPT, name: str) -> GPT:
    """A copy of `model` (same weights, same meta, its own KV cache) that runs backend `name`.

    The copy leaves `model` usable as it was; the cache is set up for the same batch when `model` had one.
    """
    cls = _CLASSES[check_backend(name)]
    if type(model) is cls:
        return model
    out = copy.deepcopy(model)
    for block in out.blocks:  # the new class lays out its own cache
        block.attn.k_cache = block.attn.v_cache = None
    for attr in ("_stores", "_x", "_fc", "_logits", "_plan_cache", "_kv", "_np_cache"):
        out.__dict__.pop(attr, None)
    out.__class__ = cls
    out.cache_batch = 0
    if model.cache_batch:
        out.setup_cache(model.cache_batch)
    return out
