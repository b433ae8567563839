"""An EAGLE-style draft (Li et al. 2024): a small network that extrapolates the target's final hidden state,
shipped for the shipped target.

The network reads [f_t; e(x_{t+1})], the target's state after ln_f at position t and the embedding of the
token after it (the target's own embedding table, frozen), and predicts f_{t+1}; the target's own LM head
(frozen, shared) turns a predicted state into the next token's distribution. In a round the loop has handed
the state that predicted the pending token (`Draft.take_features`): the first draft comes from that state and
the pending token, each later one from the draft's own predicted state and the token it just drafted, so k
drafts cost k small network calls and no target pass. Draft i's q is exactly the distribution it was drawn
from, so the rule stays exact.

The network (`EagleNet`) is an MLP: LayerNorm over the 2C inputs, two SiLU layers of width `hidden`, a linear
map back to C and a LayerNorm with its own gain and bias (the target's states are post-ln_f, so a predicted one
is put back on that scale before it is fed back).

Training (`train_eagle`) is distillation with the target frozen: the target's states and distributions over a
pool of random training windows as long as its context (one pass each, kept), then AdamW steps on batches of
crops of the pooled windows (every position's state saw its whole window), each unrolled `unroll` steps as
generation runs it: step 1 from the target's states, step j from the network's own step j-1 predictions, the
tokens the window's own; the loss is the KL from the target's
distribution at each predicted position to the network's, summed over the steps. Deterministic given its seed
on a fixed thread count. The shipped network is `specdec/data/eagle.safetensors`, written by
`specdec train-draft eagle --out specdec/data/eagle.safetensors` (`head_weights`: the tensors, with the config
and meta as its metadata).
"""

from __future__ import annotations

import math
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec.decoding import eagle_onnx, head_weights
from specdec.decoding.drafts import Draft, UnknownDraftError
from specdec.model import corpus, sampling
from specdec.model.gpt import GPT
from specdec.model.train import _batch

HIDDEN = 256  # the MLP's width: 165,248 parameters at the shipped target's width 128
UNROLL = 4  # training steps unrolled, as a round at k = 4 runs them
STEPS = 2000  # optimiser steps of `specdec train-draft eagle`
BATCH = 32  # crops per step
CROP = 64  # positions per crop, taken at a random offset of a pooled window (its states saw the whole window)
WINDOWS = 2048  # the pool of training windows (as long as the context) the target's states are computed for once


class EagleNet(nn.Module):
    """[f_t; e_{t+1}] (..., 2C) -> the predicted f_{t+1} (..., C), before the LM head."""

    def __init__(self, width: int, hidden: int = HIDDEN):
        super().__init__()
        self.ln_in = nn.LayerNorm(2 * width)
        self.fc1 = nn.Linear(2 * width, hidden)
        self.fc2 = nn.Linear(hidden, hidden)
        self.fc3 = nn.Linear(hidden, width)
        self.ln_out = nn.LayerNorm(width)

    def forward(self, f: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.fc1(self.ln_in(torch.cat([f, e], dim=-1))))
        return self.ln_out(self.fc3(F.silu(self.fc2(h))))


def config_of(net: EagleNet) -> dict:
    return {"width": net.fc3.out_features, "hidden": net.fc1.out_features}


class EagleDraft(Draft):
    """Drafts k tokens per round by feeding its own predicted states back (see the module). The drafting step
    runs on float32 copies of the network's, the embedding's and the head's weights (`_Step`), a round's k steps
    as one ONNX Runtime call where it is installed (`eagle_onnx`), else in numpy: at these sizes a torch call's
    dispatch costs more than its arithmetic, and the draft's cost c is the question."""

    name = "eagle"
    batch_unsupported = None  # one state per row

    def __init__(self, net: EagleNet, wte: torch.Tensor, lm_head: torch.Tensor):
        self.net = net.eval()
        self.wte = wte.detach()  # (V, C): the target's own embedding table, shared
        self.lm_head = lm_head.detach()  # (V, C): the target's own head, shared
        self.step = _Step(self.net, self.wte, self.lm_head)
        # a round's k steps as one runtime call where onnxruntime is installed (`eagle_onnx`), else the numpy step
        self.proposer = eagle_onnx.Proposer(self.step) if eagle_onnx.available() else None
        self.rows: list[tuple[int, np.ndarray] | None] = [None]

    def reset(self) -> None:
        self.rows = [None]

    def reset_rows(self, batch: int) -> None:
        self.rows = [None] * batch

    def keep_rows(self, keep: list[int]) -> None:
        self.rows = [self.rows[i] for i in keep]

    def take_features(self, features: torch.Tensor, pos: int, row: int = 0) -> None:
        # only the last matters: the state at pos + n - 1 that predicted the pending token; a copy (the view is reused)
        self.rows[row] = (pos + features.shape[0] - 1, head_weights.last_state(features))

    def propose(self, tokens, k, rng, temperature):
        return self._draft(self.rows[0], tokens, k, rng, temperature)

    def _draft(self, held, tokens: list[int], k: int, rng: np.random.Generator, temperature: float):
        if held is None:
            raise RuntimeError("eagle drafts from the target's state: the loop's prefill round hands it first")
        at, f = held
        if at != len(tokens) - 2:
            raise RuntimeError(f"eagle holds the state at position {at}, not at {len(tokens) - 2} (the one "
                               f"that predicted the pending token)")
        if self.proposer is not None:  # the same uniforms, one per draft, as the steps below draw in turn
            out, logits = self.proposer(f, tokens[-1], k, rng.random(k), temperature)
            return out, sampling.probs(logits, temperature)
        out, qs, tok = [], [], tokens[-1]
        for _ in range(k):
            f, logits = self.step(f, tok)
            q = sampling.probs(logits, temperature)
            tok = sampling.sample(q, rng)
            out.append(tok)
            qs.append(q)
        return out, np.stack(qs)

    def propose_rows(self, rows, ks, rngs, temperature):
        return [self._draft(self.rows[b], t, k, rng, temperature) if k > 0 else ([], None)
                for b, (t, k, rng) in enumerate(zip(rows, ks, rngs))]

    def weight_bytes(self) -> int:
        return sum(p.numel() * 4 for p in self.net.parameters())  # float32; embedding and head are the target's


class _Step:
    """One drafting step of `EagleNet` in numpy, float32: (f_t, the next token) -> (f_{t+1}, the logits it gives
    through the target's head). The same arithmetic as the network's forward (LayerNorm with its eps and biased
    variance, SiLU); the test holds the two to float32 rounding."""

    def __init__(self, net: EagleNet, wte: torch.Tensor, lm_head: torch.Tensor):
        a = head_weights.numpy32
        self.ln_in = (a(net.ln_in.weight), a(net.ln_in.bias), np.float32(net.ln_in.eps))
        self.w1, self.b1 = a(net.fc1.weight).T.copy(), a(net.fc1.bias)
        self.w2, self.b2 = a(net.fc2.weight).T.copy(), a(net.fc2.bias)
        self.w3, self.b3 = a(net.fc3.weight).T.copy(), a(net.fc3.bias)
        self.ln_out = (a(net.ln_out.weight), a(net.ln_out.bias), np.float32(net.ln_out.eps))
        self.wte, self.head = a(wte), a(lm_head).T.copy()

    @staticmethod
    def _norm(x: np.ndarray, ln) -> np.ndarray:
        # the ufuncs' own reductions: `x.mean()` goes through a Python wrapper first (sampling.probs does the same)
        g, b, eps = ln
        x = x - np.add.reduce(x) / np.float32(x.shape[0])
        return x * (g / np.sqrt(np.add.reduce(x * x) / np.float32(x.shape[0]) + eps)) + b

    @staticmethod
    def _silu(x: np.ndarray) -> np.ndarray:
        return x / (np.float32(1) + np.exp(-x))

    def __call__(self, f: np.ndarray, tok: int) -> tuple[np.ndarray, np.ndarray]:
        x = self._norm(np.concatenate([f, self.wte[tok]]), self.ln_in)
        h = self._silu(x @ self.w1 + self.b1)
        h = self._silu(h @ self.w2 + self.b2)
        f = self._norm(h @ self.w3 + self.b3, self.ln_out)
        return f, f @ self.head


def parameters(net: EagleNet) -> int:
    return sum(p.numel() for p in net.parameters())


@torch.no_grad()
def _pool(target: GPT, data: np.ndarray, rng: np.random.Generator, windows: int, chunk: int = 32):
    """(tokens (N, T), states (N, T, C), log-probabilities (N, T, V)) of `windows` random training windows,
    the target's flag restored."""
    before = target.want_features
    target.want_features = True
    xs, fs, lps = [], [], []
    try:
        for start in range(0, windows, chunk):
            x, _ = _batch(data, rng, min(chunk, windows - start), target.config.context)
            logits = target(x)
            xs.append(x)
            fs.append(target.features.detach().float().clone())
            lps.append(F.log_softmax(logits.float(), dim=-1))
    finally:
        target.want_features = before
        target.features = None
    return torch.cat(xs), torch.cat(fs), torch.cat(lps)


def unrolled_loss(net: EagleNet, x: torch.Tensor, f: torch.Tensor, logp: torch.Tensor, wte: torch.Tensor,
                  w: torch.Tensor, unroll: int) -> tuple[torch.Tensor, list[float]]:
    """Sum over steps j = 1..unroll of the mean KL(target at t+j || net's step j from t): step 1 reads the
    target's state at t, step j the net's own step j-1 prediction. (loss, the KL per step)."""
    e = wte[x]  # (B, T, C)
    g, loss, per = f, 0.0, []
    for j in range(1, unroll + 1):
        g = net(g[:, :-1], e[:, j:])  # predicted states at positions j..T-1
        logq = F.log_softmax(g @ w.T, dim=-1)
        p = logp[:, j:]
        kl = (p.exp() * (p - logq)).sum(-1).mean()
        loss = loss + kl
        per.append(float(kl.detach()))
    return loss, per


def train_eagle(target: GPT, steps: int = STEPS, batch: int = BATCH, windows: int = WINDOWS, unroll: int = UNROLL,
                hidden: int = HIDDEN, crop: int = CROP, lr: float = 3e-3, seed: int = 0,
                log=None) -> tuple[EagleNet, dict]:
    """An EagleNet distilled from the frozen `target` on random training windows as long as its context;
    (net, meta). Deterministic given the seed on a fixed torch thread count."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    start = time.perf_counter()
    x_all, f_all, lp_all = _pool(target, corpus.split_ids("train"), rng, windows)
    if log:
        log(f"target states of {windows} windows: {time.perf_counter() - start:.1f} s")
    net = EagleNet(target.config.n_embd, hidden)
    wte, w = target.wte.weight.detach(), target.lm_head.weight.detach()
    opt = torch.optim.AdamW(net.parameters(), lr=lr, weight_decay=0.0)
    per: list[float] = []
    for step in range(steps):
        for group in opt.param_groups:  # cosine decay: the last steps settle
            group["lr"] = lr * 0.5 * (1 + math.cos(math.pi * step / steps))
        rows = torch.from_numpy(rng.integers(0, windows, size=batch))[:, None]
        at = torch.from_numpy(rng.integers(0, x_all.shape[1] - crop + 1, size=batch))[:, None] + torch.arange(crop)
        loss, per = unrolled_loss(net, x_all[rows, at], f_all[rows, at], lp_all[rows, at], wte, w, unroll)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if log and (step % 100 == 0 or step == steps - 1):
            log(f"step {step}: KL per unrolled step {' '.join(f'{v:.4f}' for v in per)}")
    meta = {"steps": steps, "batch": batch, "crop": crop, "windows": windows, "unroll": unroll, "lr": lr, "seed": seed,
            "final_kl": [round(v, 6) for v in per], "seconds": round(time.perf_counter() - start, 1),
            "threads": torch.get_num_threads(),
            "target_sha256": str(getattr(target, "meta", {}).get("sha256", ""))}
    return net.eval(), meta


def save_net(net: EagleNet, meta: dict, path: str | os.PathLike) -> str:
    """Write {config, net, meta} atomically; returns the file's sha256."""
    return head_weights.save(net, config_of(net), "net", meta, path)


def load_net(path: str | os.PathLike) -> tuple[EagleNet, dict]:
    """(net, meta) read safely (weights_only); any failure is a one-line CheckpointError."""
    return head_weights.load(path, "net", lambda c: EagleNet(int(c["width"]), int(c["hidden"])), "eagle draft",
                             "is", "retrain it with `specdec train-draft eagle --out <path>`")


def make_eagle(target, checkpoint=None, **_) -> EagleDraft:
    """The `eagle` draft: the network from `checkpoint` (default: the shipped one) on `target`'s embedding and
    LM head. It reads one target's states: a target of another width, or another checkpoint than the one it
    was trained on, is refused in one line."""
    if not isinstance(target, GPT):
        raise UnknownDraftError(f"draft 'eagle' reads the shipped GPT's states; a {type(target).__name__} "
                                f"target needs a network trained on its own (eagle.train_eagle)")
    net, meta = load_net(checkpoint or head_weights.shipped("eagle"))
    trained_for, sha = meta.get("target_sha256"), getattr(target, "meta", {}).get("sha256")
    width = config_of(net)["width"]
    if width != target.config.n_embd or (trained_for and sha and trained_for != sha):
        raise UnknownDraftError(f"draft 'eagle': it was trained for target {(trained_for or '?')[:12]} (width "
                                f"{width}), not this one ({(sha or '?')[:12]}, width {target.config.n_embd}); "
                                f"train one for it (eagle.train_eagle)")
    return EagleDraft(net.to(target.device), target.wte.weight, target.lm_head.weight)
