"""The `numpy` backend: the target's inference forward as a few dozen numpy calls on weights folded ahead of time.

Why numpy: at this size a pass is per-call overhead, not arithmetic (the report's overhead table). A torch op
costs several µs of dispatch on the development VM; a numpy ufunc on a (1, 128) row about one, and
`numpy.matmul` of a row by a (128, 512) matrix calls the same BLAS gemv a floor model expects. So the same
weights run with fewer, cheaper calls. Weights and the KV cache are plain numpy arrays; the cache is exposed to
the rest of specdec as torch views of the same memory (`attn.k_cache`, `attn.v_cache`), so `keep_path`, the
trees and anything that reads the cache work unchanged.

What is folded, once per set of weights (`_Plan`), so that a pass does less:
- LayerNorm is linear up to a per-row scale: with xc = x (I - 11ᵀ/C) (centring is a matmul) and
  s = sqrt(|xc|² + C·eps), LN(x) W = √C · xc diag(w) W / s + b W. One matmul by [√C·P diag(w) W | P] gives both
  the pre-scaled product and xc; the per-row scale and the bias are two elementwise calls. Every LayerNorm
  feeds a matmul (qkv, MLP in, the LM head), so each becomes: one matmul, five elementwise calls.
- The attention scale 1/√head_size into q's columns. GELU (tanh form) is computed as x·σ(2u), the same
  function as 0.5·x·(1 + tanh u) in one call fewer.
Float rounding differs from eager by ~1e-6 in the logits (tests hold it to 1e-4; greedy texts are equal).

The cache of sequence b, per block, is one array (ctx, 2, n_head, head_size): k and v of a position side by
side, so writing a pass's keys and values is one contiguous copy out of the qkv matmul's output.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn as nn

from specdec.model.gpt import GPT

_GELU_C0 = math.sqrt(2.0 / math.pi)  # GELU (tanh): 0.5 x (1 + tanh(c0 (x + 0.044715 x³))) = x σ(2 c0 (...))
_GELU_C1 = _GELU_C0 * 0.044715


def _expit():
    """scipy's logistic function, imported where a plan is built: `import specdec` does not pay for scipy."""
    from scipy.special import expit

    return expit


class _Plan:
    """The weights as the numpy forward reads them, folded (see the module docstring); float32 numpy arrays."""

    def __init__(self, model: GPT):
        cfg = model.config
        C, hs = cfg.n_embd, cfg.n_embd // cfg.n_head
        center = np.eye(C) - 1.0 / C  # (C, C): x @ center = x - mean(x)

        def np64(t: torch.Tensor) -> np.ndarray:
            return t.detach().to(torch.float64).cpu().numpy()

        def ln_into(ln: nn.LayerNorm, w_t: np.ndarray) -> tuple[np.ndarray, np.ndarray, float]:
            # w_t: (C, N) the Linear's weight transposed -> ([√C·P diag(w) W | P] (C, N + C), b W (N,), C·eps)
            g, b = np64(ln.weight), np64(ln.bias)
            m = np.concatenate([math.sqrt(C) * center @ (g[:, None] * w_t), center], axis=1)
            return m.astype(np.float32), (b @ w_t).astype(np.float32), np.float32(C * ln.eps)

        self.layers = []
        for blk in model.blocks:
            qkv_t = np64(blk.attn.qkv.weight).T.copy()  # (C, 3C)
            qkv_t[:, :C] /= math.sqrt(hs)
            self.layers.append((
                *ln_into(blk.ln1, qkv_t),
                np64(blk.attn.proj.weight).T.astype(np.float32),  # (C, C)
                *ln_into(blk.ln2, np64(blk.mlp.fc.weight).T),
                np64(blk.mlp.proj.weight).T.astype(np.float32),  # (4C, C)
            ))
        self.head = ln_into(model.ln_f, np64(model.lm_head.weight).T)
        # ln_f unfolded, for the features a draft may ask for (the head above never forms the normed state)
        self.ln_f = (model.ln_f.weight.detach().float().cpu().numpy(), model.ln_f.bias.detach().float().cpu().numpy(),
                     np.float32(model.ln_f.eps))
        self.expit = _expit()
        self.wte = np64(model.wte.weight).astype(np.float32)
        self.wpe = np64(model.wpe.weight).astype(np.float32)
        # additive causal mask (ctx, ctx): 0 where attention is allowed, -inf elsewhere
        self.causal = np.where(np.tri(cfg.context, dtype=bool), 0.0, -np.inf).astype(np.float32)


def _layer_norm(x: np.ndarray, g: np.ndarray, b: np.ndarray, eps: np.float32) -> np.ndarray:
    """LayerNorm of x (T, C) with weight g and bias b, float32, as torch computes it (biased variance)."""
    xc = x - x.mean(axis=-1, keepdims=True)
    return xc / np.sqrt(np.mean(xc * xc, axis=-1, keepdims=True) + eps) * g + b


def _ln_matmul(x: np.ndarray, m: np.ndarray, bias: np.ndarray, eps_c: np.float32) -> np.ndarray:
    """LN(x) @ W for x (T, C), from the folded (m, bias, C·eps) of `_Plan`: (T, N)."""
    n = bias.shape[0]
    out = x @ m  # (T, N + C): the pre-scaled product, then x centred
    xc = out[:, n:]
    s = np.vecdot(xc, xc, keepdims=True)  # (T, 1): |xc|², one call
    s += eps_c
    np.sqrt(s, out=s)
    y = out[:, :n]
    y /= s
    y += bias
    return y


class NumpyGPT(GPT):
    """`GPT` whose cached inference forward (pos given, CPU, plain float Linears) runs in numpy.

    Training windows (pos=None), models on another device and the int8-dynamic draft's quantized Linears run
    the eager forward. The returned logits are a torch view of a numpy array (no copy).
    """

    def setup_cache(self, batch: int = 1) -> None:
        """Allocate per block one (batch, ctx, 2, n_head, head_size) float32 array; k_cache / v_cache are torch
        views of it shaped as eager's (batch, n_head, ctx, head_size). Also (re)folds the weights when they
        changed since the last call: every generation calls this first, so a pass never checks them."""
        self._plan()
        cfg = self.config
        kv = getattr(self, "_kv", None)
        # a deep copy (a draft built from this model) copies the arrays and the torch views apart: re-link them
        linked = kv and self.blocks[0].attn.k_cache.data_ptr() == kv[0].ctypes.data
        if linked and kv[0].shape[0] >= batch:
            return
        H, hs = cfg.n_head, cfg.n_embd // cfg.n_head
        self._kv = [np.zeros((batch, cfg.context, 2, H, hs), dtype=np.float32) for _ in self.blocks]
        with torch.inference_mode(False):  # views a later forward outside inference mode may write (as eager's)
            for block, a in zip(self.blocks, self._kv):
                t = torch.from_numpy(a)
                block.attn.k_cache = t[:, :, 0].permute(0, 2, 1, 3)
                block.attn.v_cache = t[:, :, 1].permute(0, 2, 1, 3)
        self.cache_batch = batch

    def _plan(self) -> _Plan | None:
        """The folded weights, rebuilt when the weights changed (`GPT.weights_key`). None when the eager forward
        must run: another device, or quantized Linears."""
        key = self.weights_key()
        cached = self.__dict__.get("_plan_cache")
        if cached is not None and cached[0] == key and cached[2] == id(self):
            return cached[1]
        plan = _Plan(self) if self.plain_linears() and self.device.type == "cpu" else None
        self._plan_cache = (key, plan, id(self))  # id: a deep copy must fold its own weights
        return plan

    def forward(self, idx: torch.Tensor, pos: int | None = None,
                tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        cached = self.__dict__.get("_plan_cache")
        plan = cached[1] if cached is not None and pos is not None and cached[2] == id(self) else None
        if plan is None:  # a training window, weights the numpy forward cannot read, or no cache set up yet
            return super().forward(idx, pos, tree)
        B, T = idx.shape
        self._check_pass(B, T, pos)
        ids = idx.numpy(force=True)
        if tree is None:
            wpe = plan.wpe[pos : pos + T]
            mask = None if T == 1 else plan.causal[pos : pos + T, : pos + T]
        else:  # a tree's nodes share positions by depth and see only their own branch
            wpe = plan.wpe[tree[0].numpy(force=True)]
            mask = np.where(tree[1].numpy(force=True), np.float32(0.0), np.float32(-np.inf))
        xs = [self._sequence(plan, b, ids[b], pos, wpe, mask) for b in range(B)]  # residual streams (T, C)
        if self.want_features:  # formed only when asked: the head's fold skips the normed state
            self.features = torch.from_numpy(np.stack([_layer_norm(x, *plan.ln_f) for x in xs]))
        out = [_ln_matmul(x, *plan.head) for x in xs]
        return torch.from_numpy(out[0][None] if B == 1 else np.stack(out))

    def _sequence(self, plan: _Plan, b: int, ids: np.ndarray, pos: int, wpe: np.ndarray,
                  mask: np.ndarray | None) -> np.ndarray:
        """The residual stream (T, C) after the last block for one sequence's T new positions, its cache filled
        at pos..pos+T-1 (the caller applies the folded head)."""
        T, end = len(ids), pos + len(ids)
        C = self.config.n_embd
        H, hs = self.config.n_head, C // self.config.n_head
        x = plan.wte[ids] + wpe  # (T, C), the residual stream
        expit = plan.expit
        for (m1, b1, e1, w_proj, m2, b2, e2, w_out), kv in zip(plan.layers, self._kv):
            qkv = _ln_matmul(x, m1, b1, e1)  # (T, 3C), q already scaled by 1/√hs
            cache = kv[b]
            cache[pos:end] = qkv[:, C:].reshape(T, 2, H, hs)  # one copy: k and v of every new position
            q = qkv[:, :C].reshape(T, H, hs).transpose(1, 0, 2)  # (H, T, hs)
            att = q @ cache[:end, 0].transpose(1, 2, 0)  # (H, T, end)
            if mask is not None:
                att += mask
            att -= np.maximum.reduce(att, axis=-1, keepdims=True)
            np.exp(att, out=att)
            att /= np.add.reduce(att, axis=-1, keepdims=True)
            y = att @ cache[:end, 1].transpose(1, 0, 2)  # (H, T, hs)
            x += y.transpose(1, 0, 2).reshape(T, C) @ w_proj
            f = _ln_matmul(x, m2, b2, e2)  # (T, 4C)
            g = f * f  # GELU (tanh) as f·σ(2u): 0.5·f·(1 + tanh u) = f·σ(2u), u = c0·(f + 0.044715·f³)
            g *= 2 * _GELU_C1
            g += 2 * _GELU_C0
            g *= f
            expit(g, out=g)
            g *= f
            x += g @ w_out
        return x
