"""The shipped GPT's batched forward: B sequences in one pass, each at its own position (per-row positions).

Why per-row positions and not left-padding: speculative rounds accept a different number of drafts in every
row, so after the first round no two sequences are at the same length again; left-padding would only line up
the prompts. Here row b's n_b new tokens sit at positions pos_b .. pos_b + n_b - 1 of its own sequence and
the pass is right-padded to T = max n_b:

- position embeddings are per row (positions (B, T) = pos_b + t, clamped into the table for padding);
- keys and values go to cache row b, slots pos_b + t, for the real positions only (one scatter per block and
  k/v), so padding never writes a slot -- in particular never one past the context;
- attention reads the cache rows 0..B-1 up to S = max(pos_b + n_b) under a per-row mask (B, 1, T, S): query t
  of row b sees slots <= pos_b + t, so it never reads another row's length, a stale slot past its own end, or
  a padded position. A padded query sees slot 0 only (a finite row of softmax); its output is never read.

Rollback per row is what it is for one sequence: the next pass starts row b at an earlier pos_b and writes
over the rejected drafts' slots before anything reads them. A sequence that leaves the batch is dropped by
`keep_rows`, which moves the remaining rows' caches down so the active ones are always rows 0..A-1 (a pass
reads a view of the cache, never a gathered copy).

Every backend's model is a `GPT` whose `attn.k_cache` / `attn.v_cache` are torch tensors over its cache
memory (eager, fused's store views, numpy's and onnx's numpy arrays), so this one forward runs all of them:
their own kernels (fused's per-row bmm, numpy's rows, onnx's single-sequence graph) are the B = 1 path.
The submodules are called as modules, so the int8-dynamic draft's quantized Linears run their own kernel.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from specdec.model.gpt import GPT, ContextOverflowError


def forward_rows(model: GPT, rows: list[list[int]], pos: list[int]) -> torch.Tensor:
    """Logits (B, T, V) for B rows of new tokens: row b's `rows[b]` (n_b >= 0 ids) at positions pos[b]..,
    its cache row b holding positions < pos[b]. Row b's logits are [b, :n_b]; the rest is padding.

    A row with no new tokens (n_b = 0) takes part without writing anything: a draft step in which some rows
    have already drafted their k.
    """
    B, ctx = len(rows), model.config.context
    if B > model.cache_batch:
        raise RuntimeError(f"batch {B} exceeds the KV cache's {model.cache_batch}: call setup_cache")
    n = [len(r) for r in rows]
    for p, m in zip(pos, n):
        if p + m > ctx:
            raise ContextOverflowError(f"positions {p}..{p + m - 1} exceed the context of {ctx}")
    T, dev = max(max(n), 1), model.device
    idx = torch.zeros(B, T, dtype=torch.long)
    for b, r in enumerate(rows):
        idx[b, : n[b]] = torch.as_tensor(r, dtype=torch.long)
    t = torch.arange(T)
    positions = torch.as_tensor(pos, dtype=torch.long)[:, None] + t  # (B, T)
    valid = t[None, :] < torch.as_tensor(n)[:, None]  # (B, T): real positions
    S = max(p + m for p, m in zip(pos, n)) or 1
    slots = torch.arange(S)
    mask = slots[None, None, :] <= positions[:, :, None]  # (B, T, S)
    mask &= valid[:, :, None] | (slots == 0)[None, None, :]  # padding: slot 0 only, never an empty row
    b_idx, t_idx = valid.nonzero(as_tuple=True)  # (N,) each: the real positions, in row order
    write = (b_idx.to(dev), t_idx.to(dev), positions[b_idx, t_idx].to(dev))
    x = model.wte(idx.to(dev)) + model.wpe(positions.clamp(max=ctx - 1).to(dev))  # (B, T, C)
    mask = mask[:, None].to(dev)  # (B, 1, T, S): broadcast over heads
    for block in model.blocks:
        x = x + _attention(block.attn, block.ln1(x), write, S, mask)
        x = x + block.mlp(block.ln2(x))
    h = model.ln_f(x)
    if model.want_features:  # row b's states at [b, :n_b], as its logits
        model.features = h
    return model.lm_head(h)


def _attention(attn, x: torch.Tensor, write: tuple, S: int, mask: torch.Tensor) -> torch.Tensor:
    """One block's attention over per-row positions: x (B, T, C); write (rows, steps, slots) of the real
    positions; the cache rows 0..B-1 read up to S under `mask` (B, 1, T, S)."""
    B, T, C = x.shape
    H = attn.n_head
    q, k, v = attn.qkv(x).split(C, dim=2)
    # (B, T, C) -> (B, H, T, hs)
    q, k, v = (y.view(B, T, H, C // H).transpose(1, 2) for y in (q, k, v))
    b_idx, t_idx, slot = write
    # advanced indices around a slice: the (N,) indexed dims come first, (N, H, hs) on both sides
    attn.k_cache[b_idx, :, slot] = k[b_idx, :, t_idx]
    attn.v_cache[b_idx, :, slot] = v[b_idx, :, t_idx]
    y = F.scaled_dot_product_attention(q, attn.k_cache[:B, :, :S], attn.v_cache[:B, :, :S], attn_mask=mask)
    return attn.proj(y.transpose(1, 2).reshape(B, T, C))


def keep_rows(model: GPT, keep: list[int]) -> None:
    """Move cache rows `keep` (increasing) to rows 0..len(keep)-1, every block's keys and values: the sequences
    that are still generating, once others have finished. keep[j] >= j, so row j is written only after every
    row read into it -- and no later source row (> keep[j]) is ever a destination before it is read."""
    for j, src in enumerate(keep):
        if src == j:
            continue
        for block in model.blocks:
            a = block.attn
            a.k_cache[j] = a.k_cache[src]
            a.v_cache[j] = a.v_cache[src]
