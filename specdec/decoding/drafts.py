"""The `Draft` interface and the drafts built on it: the table drafts (bigram; n-gram in `ngram`) and model
drafts (a rounded int8/int4 copy of the target, a small trained model); `registry` names them.

A draft proposes k characters after a context, returning them with the distributions q it sampled them
from (the accept/reject rule needs q). A draft that keeps state (a KV cache) tracks how many tokens of the
sequence it has consumed; after a round the loop calls `rollback(n)` to say that only the first n tokens of
the sequence are still valid, and the next `propose` feeds whatever it has not seen yet. Rolling back is
moving the position back, exactly as for the target.
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from specdec.model import corpus, sampling
from specdec.model.gpt import GPT


class UnknownDraftError(ValueError):
    """A draft name that `make_draft` does not know."""


class DeviceError(ValueError):
    """A draft asked to run beside a target on a device its kernels do not exist on."""


class Draft:
    """Interface: propose k characters; keep and roll back any state. Subclasses set `name`."""

    name = "draft"
    cpu_only = False  # its kernels exist on the CPU only: it cannot run beside a target on CUDA

    def reset(self) -> None:
        """Forget any sequence: the next propose starts a new one."""

    def rollback(self, n_valid: int) -> None:
        """Only the first n_valid tokens of the sequence remain valid."""

    def propose(
        self, tokens: list[int], k: int, rng: np.random.Generator, temperature: float
    ) -> tuple[list[int], np.ndarray]:
        """k drafted ids after `tokens`, with q: (k, V) the distributions each was sampled from."""
        raise NotImplementedError

    def weight_bytes(self) -> int:
        """Bytes the draft's weights take stored as the draft would store them (packed where quantized)."""
        raise NotImplementedError


class TableDraft(Draft):
    """A draft whose next-character distribution is looked up from the last character(s): no state.

    Subclasses implement `_dist(tokens)` and set `history` (how many trailing characters it reads);
    sampling and the k-step loop are shared.
    """

    history = 1

    def _dist(self, tokens: list[int]) -> np.ndarray:
        raise NotImplementedError

    def propose(self, tokens, k, rng, temperature):
        ctx = list(tokens[-self.history :])  # only the tail matters: no copy of the whole sequence
        out = []
        qs = np.empty((k, len(corpus.vocabulary())))
        for i in range(k):
            q = sampling.temper(self._dist(ctx), temperature)
            x = sampling.sample(q, rng)
            qs[i] = q
            out.append(x)
            ctx.append(x)
        return out, qs


class BigramDraft(TableDraft):
    """q(next | previous character), counted on the training split with add-one smoothing."""

    name = "bigram"

    def __init__(self):
        self.table = _bigram_table()  # (V, V) float64, rows sum to 1

    def _dist(self, tokens):
        return self.table[tokens[-1]]

    def weight_bytes(self) -> int:
        return self.table.size * 4  # stored as float32


@functools.lru_cache(maxsize=1)
def _bigram_table() -> np.ndarray:
    ids = corpus.split_ids("train").astype(np.int64)
    V = len(corpus.vocabulary())
    counts = np.bincount(ids[:-1] * V + ids[1:], minlength=V * V).reshape(V, V) + 1.0
    return counts / counts.sum(1, keepdims=True)


class ModelDraft(Draft):
    """A transformer draft with its own KV cache: rounded copies of the target, or a smaller model."""

    def __init__(self, name: str, model: GPT, weight_bytes: int, cpu_only: bool = False, stored=None):
        self.name = name
        self.model = model.eval()
        self.model.setup_cache(1)
        self._bytes = weight_bytes
        self.cpu_only = cpu_only
        self.stored = stored  # the packed form the model was unpacked from (int8/int4), if any
        self.pos = 0  # tokens of the current sequence already in this draft's cache

    def reset(self) -> None:
        self.pos = 0

    def rollback(self, n_valid: int) -> None:
        self.pos = min(self.pos, n_valid)

    @torch.inference_mode()
    def propose(self, tokens, k, rng, temperature):
        # First step: feed everything not yet seen (the whole prompt in round one, then 1 or 2 tokens).
        logits = self.model(self.model.ids(tokens[self.pos :]), self.pos)[0, -1]
        self.pos = len(tokens)
        out = []
        qs = np.empty((k, logits.shape[-1]))
        for i in range(k):
            q = sampling.probs(logits, temperature)
            x = sampling.sample(q, rng)
            qs[i] = q
            out.append(x)
            if i < k - 1:  # the last draft is never fed: the target's bonus/residual follows it
                logits = self.model(self.model.ids([x]), self.pos)[0, -1]
                self.pos += 1
        return out, qs

    def weight_bytes(self) -> int:
        return self._bytes
