"""A user-sized target grown from the shipped one, with the shipped target as its truncated draft.

The shipped target (3 blocks of width 128, 0.6 M parameters) is so small that on llama.cpp a pass costs little
more than the server's bookkeeping, so its load figures say nothing about a model whose pass is real work. No
larger trained character model ships, and training one on two cores is out of reach; but a larger model with
the same text can be built from the shipped one:

- **Widen by r.** Every width-sized axis (the residual stream, q, k and v, the MLP's hidden layer) repeats
  each coordinate r times in place (`repeat_interleave`), so the wide stream is x' = R x with R the (r·D, D)
  repeat matrix. LayerNorm of R x is R LayerNorm(x) (same mean, same variance), elementwise GELU keeps the
  repetition, and a Linear W (out, in) becomes W' = R_out W R_inᵀ / r (Rᵀ R = r I). Heads keep their count,
  so a head's size grows by r and q'·k' = r (q·k): q's rows are scaled by 1/sqrt(r) so that attention's
  1/sqrt(head size) gives the narrow model's logits. The widened model computes the shipped target's
  function exactly (float rounding apart; tests/model/test_grow.py checks it) at r² times the blocks' cost.
- **Deepen to n_layer.** Blocks of the wide width are appended after the shipped three with GPT-2's random
  initialisation, their output projections (attention's and the MLP's, which write into the residual stream)
  multiplied by `mix`. They change the distribution the way a larger model's extra layers do: the truncated
  draft (the shipped target, i.e. the grown model without its added width and blocks) then disagrees with
  it sometimes. `mix` sets how often; the acceptance a run shows is measured, never set.

The result is an ordinary `GPT` (any backend, `specdec batch --target`, `export_gguf.write_gguf`), saved as a
checkpoint with the recipe in its meta.
"""

from __future__ import annotations

import math
from dataclasses import replace

import torch

from specdec.model.gpt import GPT

SHIPPED_LAYERS = 3  # the shipped target's blocks: the fewest a grown model has
DEFAULT_WIDEN = 4  # 128 -> 512 wide
DEFAULT_LAYERS = 8  # 3 shipped blocks (widened) + 5 added
DEFAULT_MIX = 4.0  # the added blocks' output projections at 4x GPT-2's init


def _rep(w: torch.Tensor, r: int, dims: tuple[int, ...]) -> torch.Tensor:
    for d in dims:
        w = w.repeat_interleave(r, dim=d)
    return w


def _linear(w: torch.Tensor, r: int) -> torch.Tensor:
    """W (out, in) acting on repeated inputs, giving repeated outputs: R_out W R_inᵀ / r."""
    return _rep(w, r, (0, 1)) / r


def widen(model: GPT, r: int) -> GPT:
    """The same function at r times the width (see the module docstring); `model` is left as it is."""
    if r < 1:
        raise ValueError(f"widen factor {r} must be a positive integer")
    c = model.config
    wide = GPT(replace(c, n_embd=c.n_embd * r))
    src = {k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()}
    D = c.n_embd
    out = {}
    for key, w in src.items():
        if key.endswith(("wte.weight", "wpe.weight")):  # values along the stream: repeated, not averaged
            out[key] = _rep(w, r, (1,))
        elif ".ln" in key or key.startswith("ln_f"):  # LayerNorm gains and biases
            out[key] = _rep(w, r, (0,))
        elif key.endswith("attn.qkv.weight"):  # (3D, D): q | k | v, each repeated on its own
            q, k, v = (_linear(part, r) for part in w.split(D, dim=0))
            out[key] = torch.cat([q / math.sqrt(r), k, v])
        elif key.endswith("lm_head.weight"):  # (V, D): only the input side is repeated
            out[key] = _rep(w, r, (1,)) / r
        elif w.dim() == 2:  # attn.proj, mlp.fc, mlp.proj
            out[key] = _linear(w, r)
        else:
            raise ValueError(f"widen does not know how to grow {key!r} of shape {tuple(w.shape)}")
    wide.load_state_dict(out)
    return wide


def deepen(model: GPT, n_layer: int, mix: float = DEFAULT_MIX, seed: int = 0) -> GPT:
    """`model` with blocks appended up to n_layer: GPT-2's random init (seeded), output projections x `mix`."""
    c = model.config
    if n_layer < c.n_layer:
        raise ValueError(f"n_layer {n_layer} is fewer than the model's {c.n_layer} blocks")
    torch.manual_seed(seed)
    deep = GPT(replace(c, n_layer=n_layer))  # its fresh blocks past c.n_layer are the added ones
    state = deep.state_dict()
    state.update({k: v.detach().to("cpu", torch.float32) for k, v in model.state_dict().items()})
    for i in range(c.n_layer, n_layer):
        for name in (f"blocks.{i}.attn.proj.weight", f"blocks.{i}.mlp.proj.weight"):
            state[name] = state[name] * mix
    deep.load_state_dict(state)
    return deep


def grow(model: GPT, r: int = DEFAULT_WIDEN, n_layer: int = DEFAULT_LAYERS, mix: float = DEFAULT_MIX,
         seed: int = 0) -> tuple[GPT, dict]:
    """The grown model and its recipe (for the checkpoint's meta): widened by r, then deepened to n_layer."""
    grown = deepen(widen(model, r), n_layer, mix=mix, seed=seed).eval()
    recipe = {"grown_from": "shipped target", "widen": r, "n_layer": n_layer, "mix": mix, "seed": seed,
              "parameters": sum(p.numel() for p in grown.parameters())}
    return grown, recipe
