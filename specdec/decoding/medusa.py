"""Medusa heads (Cai et al. 2024): a draft that reads the target's final hidden state, shipped for the shipped target.

Head i (i = 1..K) reads h_t, the state after ln_f that predicted token t+1, and predicts token t+1+i: a
residual MLP h + W_out SiLU(W_in h) followed by the target's own LM head (shared, never trained). W_out starts
at zero, so an untrained head is the LM head itself ("head 0"); training moves each head i toward the target's
own distribution i positions later. In a round the loop has handed the state that predicted the pending token
(`Draft.take_features`), so heads 1..k draft the k tokens after it, each from its own head: draft i does not
depend on draft i-1, so its q is exactly the distribution it was drawn from and the rule stays exact.

Training (`train_medusa`) is distillation with the target frozen: random windows of the training split, the
target's states and distributions from one window pass, and per head the KL from the target's distribution
at t+i to the head's at t. Deterministic given its seed (one torch thread). The shipped heads are
`specdec/data/medusa.safetensors`, written by `specdec train-draft medusa --out
specdec/data/medusa.safetensors` (`head_weights`: the tensors, with the config and meta as its metadata).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec.decoding import head_weights
from specdec.decoding.drafts import Draft, UnknownDraftError
from specdec.model import corpus, sampling
from specdec.model.gpt import GPT
from specdec.model.train import _batch

STEPS = 3000  # the shipped heads' recipe (`specdec train-draft medusa`)


class MedusaHeads(nn.Module):
    """K residual MLPs on the target's state (width C): forward (..., C) -> (..., K, C), before the LM head."""

    def __init__(self, width: int, n_heads: int):
        super().__init__()
        self.w_in = nn.ModuleList(nn.Linear(width, width) for _ in range(n_heads))
        self.w_out = nn.ModuleList(nn.Linear(width, width, bias=False) for _ in range(n_heads))
        for lin in self.w_out:  # start as the LM head itself: the residual adds nothing yet
            nn.init.zeros_(lin.weight)

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        return torch.stack([h + o(F.silu(i(h))) for i, o in zip(self.w_in, self.w_out)], dim=-2)


class MedusaDraft(Draft):
    """Drafts up to K tokens per round from the last handed state: head i gives draft i (see the module). The
    heads run in numpy on float32 copies of their weights and the LM head's, only the n a round drafts from: at
    these sizes a torch call's dispatch costs more than its arithmetic (as eagle's step)."""

    name = "medusa"
    batch_unsupported = None  # one state per row

    def __init__(self, heads: MedusaHeads, lm_head: torch.Tensor):
        self.heads = heads.eval()
        self.lm_head = lm_head.detach()  # (V, C): the target's own head, shared
        self.n_heads = len(heads.w_in)
        a = head_weights.numpy32
        # (K, C, C) stacks, transposed so that h @ w[i] is head i's linear map; (C, V) for the LM head
        self.w_in = np.stack([a(lin.weight).T for lin in heads.w_in])
        self.b_in = np.stack([a(lin.bias) for lin in heads.w_in])
        self.w_out = np.stack([a(lin.weight).T for lin in heads.w_out])
        self.head = a(self.lm_head).T.copy()
        self.rows: list[np.ndarray | None] = [None]

    def reset(self) -> None:
        self.rows = [None]

    def reset_rows(self, batch: int) -> None:
        self.rows = [None] * batch

    def keep_rows(self, keep: list[int]) -> None:
        self.rows = [self.rows[i] for i in keep]

    def take_features(self, features: torch.Tensor, pos: int, row: int = 0) -> None:
        # only the last matters: the state that predicted the pending token; a copy, as the view is reused
        self.rows[row] = head_weights.last_state(features)

    def propose(self, tokens, k, rng, temperature):
        """min(k, K) drafts (a round drafts what the heads reach), draft i drawn from head i + 1's q."""
        return self._draft(self.rows[0], k, rng, temperature)

    def _draft(self, h: np.ndarray | None, k: int, rng: np.random.Generator, temperature: float):
        if h is None:
            raise RuntimeError("medusa drafts from the target's state: the loop's prefill round hands it first")
        n = min(k, self.n_heads)
        z = np.matmul(h, self.w_in[:n]) + self.b_in[:n]  # (n, C): each head's input map of the same state
        z = z / (np.float32(1) + np.exp(-z))  # SiLU
        logits = (h + np.matmul(z[:, None, :], self.w_out[:n])[:, 0]) @ self.head  # (n, V)
        q = sampling.probs(logits, temperature)
        return [sampling.sample(row, rng) for row in q], q

    def propose_rows(self, rows, ks, rngs, temperature):
        return [self._draft(self.rows[b], k, rng, temperature) if k > 0 else ([], None)
                for b, (k, rng) in enumerate(zip(ks, rngs))]

    def weight_bytes(self) -> int:
        return sum(p.numel() * 4 for p in self.heads.parameters())  # float32; the LM head is the target's


def _window(target: GPT, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(states (B, T, C), log-probabilities (B, T, V)) of windows x from position 0, the target's flag restored."""
    before = target.want_features
    target.want_features = True
    try:
        logits = target(x)
        return target.features, F.log_softmax(logits.float(), dim=-1)
    finally:
        target.want_features = before
        target.features = None


def train_medusa(target: GPT, n_heads: int = 4, steps: int = STEPS, batch: int = 16, lr: float = 3e-3,
                 seed: int = 0, log=None) -> tuple[MedusaHeads, dict]:
    """Heads distilled from the frozen `target` on random training windows as long as its context; (heads, meta)."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    data = corpus.split_ids("train")
    cfg = target.config
    heads = MedusaHeads(cfg.n_embd, n_heads)
    w = target.lm_head.weight.detach()
    opt = torch.optim.AdamW(heads.parameters(), lr=lr, weight_decay=0.0)
    start, loss = time.perf_counter(), torch.tensor(0.0)
    for step in range(steps):
        for group in opt.param_groups:  # cosine decay: the last steps settle
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        x, _ = _batch(data, rng, batch, cfg.context)
        with torch.no_grad():
            h, logp = _window(target, x)
        states = heads(h)  # (B, T, K, C)
        loss = 0.0
        for i in range(n_heads):  # head i + 1 at t against the target at t + i + 1
            logq = F.log_softmax(states[:, : -(i + 1), i] @ w.T, dim=-1)
            p = logp[:, i + 1 :]
            loss = loss + (p.exp() * (p - logq)).sum(-1).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log and (step % 50 == 0 or step == steps - 1):
            log(f"step {step}: KL summed over heads {loss.item():.4f}")
    meta = {"steps": steps, "batch": batch, "lr": lr, "seed": seed, "final_kl": float(loss.item()),
            "seconds": round(time.perf_counter() - start, 1),
            "target_sha256": str(getattr(target, "meta", {}).get("sha256", ""))}
    return heads.eval(), meta


def save_heads(heads: MedusaHeads, meta: dict, path: str | os.PathLike) -> str:
    """Write {config, heads, meta} atomically; returns the file's sha256."""
    config = {"width": heads.w_in[0].in_features, "n_heads": len(heads.w_in)}
    return head_weights.save(heads, config, "heads", meta, path)


def load_heads(path: str | os.PathLike) -> tuple[MedusaHeads, dict]:
    """(heads, meta) read safely (weights_only); any failure is a one-line CheckpointError."""
    return head_weights.load(path, "heads", lambda c: MedusaHeads(int(c["width"]), int(c["n_heads"])),
                             "medusa heads", "are", "retrain them with `specdec train-draft medusa --out <path>`")


def make_medusa(target, checkpoint=None, **_) -> MedusaDraft:
    """The `medusa` draft: heads from `checkpoint` (default: the shipped ones) on `target`'s LM head. Heads
    read one target's states: a target of another width, or another checkpoint than the one they were
    trained on, is refused in one line."""
    if not isinstance(target, GPT):
        raise UnknownDraftError(f"draft 'medusa' reads the shipped GPT's states; a {type(target).__name__} "
                                f"target needs heads trained on its own (medusa.train_medusa)")
    heads, meta = load_heads(checkpoint or head_weights.shipped("medusa"))
    trained_for, sha = meta.get("target_sha256"), getattr(target, "meta", {}).get("sha256")
    if heads.w_in[0].in_features != target.config.n_embd or (trained_for and sha and trained_for != sha):
        raise UnknownDraftError(f"draft 'medusa': its heads were trained for target {(trained_for or '?')[:12]} "
                                f"(width {heads.w_in[0].in_features}), not this one ({(sha or '?')[:12]}, width "
                                f"{target.config.n_embd}); train heads for it (medusa.train_medusa)")
    return MedusaDraft(heads.to(target.device), target.lm_head.weight)

