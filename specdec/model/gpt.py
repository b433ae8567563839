"""The target: a small GPT-style character transformer with a preallocated KV cache.

Model -> Block -> Attention / MLP, nothing deeper. `forward(idx, pos)` runs any number of new positions
starting at the explicit offset `pos`, writing their keys and values into the cache at pos..pos+T-1 and
attending to everything before them. The cache has no notion of a "length": the caller owns the position, and
rejecting drafted characters is simply calling the next forward at an earlier `pos` -- entries past it are
overwritten before anything reads them, because attention only ever reads positions < pos + T.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec.model import corpus
from specdec.util.errors import InputError
from specdec.model.protocol import ConfigSizes


@dataclass(frozen=True)
class GPTConfig:
    vocab_size: int = 84  # distinct characters of the corpus
    context: int = 256  # positions with a trained embedding; the KV cache holds this many
    n_layer: int = 3  # transformer blocks
    n_head: int = 4  # attention heads per block
    n_embd: int = 128  # residual stream width; head size is n_embd // n_head

    def to_dict(self) -> dict:
        return asdict(self)


class ContextOverflowError(InputError):
    """More positions than the model has position embeddings (and cache slots) for."""


class Attention(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        if cfg.n_embd % cfg.n_head:
            raise ValueError(f"n_embd {cfg.n_embd} is not a multiple of n_head {cfg.n_head}")
        self.n_head = cfg.n_head
        self.qkv = nn.Linear(cfg.n_embd, 3 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(cfg.n_embd, cfg.n_embd, bias=False)
        self.k_cache: torch.Tensor | None = None  # (B, n_head, context, head_size) once set up
        self.v_cache: torch.Tensor | None = None

    def forward(self, x: torch.Tensor, pos: int | None, mask: torch.Tensor | None) -> torch.Tensor:
        B, T, C = x.shape
        q, k, v = self.qkv(x).split(C, dim=2)
        # (B, T, C) -> (B, n_head, T, head_size)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if pos is None:  # training: the whole window at once, no cache
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            self.k_cache[:B, :, pos : pos + T] = k
            self.v_cache[:B, :, pos : pos + T] = v
            k = self.k_cache[:B, :, : pos + T]
            v = self.v_cache[:B, :, : pos + T]
            # One attention path whatever T is: a single position and a (k+1)-position verify pass cost
            # the same kernel, so the verify pass stays close to a single pass. mask: (T, pos + T) bool.
            y = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.proj(y.transpose(1, 2).reshape(B, T, C))


class MLP(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.fc = nn.Linear(cfg.n_embd, 4 * cfg.n_embd, bias=False)
        self.proj = nn.Linear(4 * cfg.n_embd, cfg.n_embd, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.proj(F.gelu(self.fc(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.ln1 = nn.LayerNorm(cfg.n_embd)
        self.attn = Attention(cfg)
        self.ln2 = nn.LayerNorm(cfg.n_embd)
        self.mlp = MLP(cfg)

    def forward(self, x: torch.Tensor, pos: int | None, mask: torch.Tensor | None) -> torch.Tensor:
        x = x + self.attn(self.ln1(x), pos, mask)
        return x + self.mlp(self.ln2(x))


class GPT(ConfigSizes, nn.Module):
    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.config = cfg
        self.wte = nn.Embedding(cfg.vocab_size, cfg.n_embd)
        self.wpe = nn.Embedding(cfg.context, cfg.n_embd)
        self.blocks = nn.ModuleList(Block(cfg) for _ in range(cfg.n_layer))
        self.ln_f = nn.LayerNorm(cfg.n_embd)
        self.lm_head = nn.Linear(cfg.n_embd, cfg.vocab_size, bias=False)
        # Preallocated so that a decoding step slices instead of allocating: positions 0..context-1 and the
        # causal mask (context, context), True where attention is allowed.
        self.register_buffer("positions", torch.arange(cfg.context), persistent=False)
        causal = torch.ones(cfg.context, cfg.context, dtype=torch.bool).tril()
        self.register_buffer("causal", causal, persistent=False)
        self.cache_batch = 0
        self.apply(self._init_weights)
        for name, p in self.named_parameters():  # GPT-2's scaled init of the residual projections
            if name.endswith("proj.weight"):
                nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * cfg.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, (nn.Linear, nn.Embedding)):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    @property
    def device(self) -> torch.device:
        return self.wte.weight.device

    # --- the target protocol (model.protocol.Target) beyond forward/ids/setup_cache; sizes: ConfigSizes ------

    corpus_vocabulary = True  # its ids are the corpus's characters: the shipped table drafts fit it as they are
    # Features (`protocol.FeatureTarget`): while want_features is set (by the generation loop, for a draft that
    # reads them), every pass -- on every backend -- leaves the post-`ln_f` states of its positions here.
    want_features = False
    features: torch.Tensor | None = None  # (B, T, n_embd)

    @staticmethod
    def tokenize(text: str) -> list[int]:
        """The corpus's character ids (a VocabularyError names a character outside it)."""
        return corpus.encode(text)

    @staticmethod
    def detokenize(ids) -> str:
        return corpus.decode(ids)

    def rollback(self, n_valid: int) -> None:
        """Nothing to do: the cache has no length, and entries past n_valid are overwritten by the next pass
        before anything reads them (see the module docstring)."""

    def ids(self, tokens: list[int]) -> torch.Tensor:
        """Token ids as a (1, T) input on this model's device.

        The one place the pipeline turns characters into a model input (generation, drafts, exactness,
        timing), so that a model on CUDA never receives a CPU tensor; tests/model/test_device.py holds them to it.
        """
        return torch.tensor([tokens], device=self.device)

    def linears(self) -> list[nn.Module]:
        """Every Linear layer, block by block (qkv, proj, fc, mlp proj), then lm_head."""
        return [m for b in self.blocks for m in (b.attn.qkv, b.attn.proj, b.mlp.fc, b.mlp.proj)] + [self.lm_head]

    def plain_linears(self) -> bool:
        """Every Linear a plain float `nn.Linear` without bias: what the fused, numpy and onnx forwards read
        directly (the int8-dynamic draft's quantized Linears keep their weights packed for their own kernel)."""
        return all(type(m) is nn.Linear and m.bias is None for m in self.linears())

    def weights_key(self) -> tuple:
        """Changes when a weight moves (storage) or is written in place (`_version`; an inference-mode tensor
        keeps no version, and is only written while a draft is built, before its `setup_cache`): what the numpy
        and onnx backends key their prepared weights on."""
        return tuple((p.data_ptr(), None if p.is_inference() else p._version) for p in self.parameters())

    def num_params(self) -> int:
        return sum(p.numel() for p in self.parameters())

    def setup_cache(self, batch: int = 1) -> None:
        """Allocate the KV cache once: (batch, n_head, context, head_size) keys and values per block.

        Calling it again keeps a cache that already holds `batch` sequences with the weights' dtype and
        device, so every caller can simply ask for one; after `model.to(...)` it is allocated anew.
        """
        cfg = self.config
        p = self.wte.weight
        shape = (batch, cfg.n_head, cfg.context, cfg.n_embd // cfg.n_head)
        k = self.blocks[0].attn.k_cache
        if k is not None and k.shape[0] >= batch and k.dtype == p.dtype and k.device == p.device:
            return
        # Outside inference mode even when called inside it (a batch's generation grows the cache there): an
        # inference tensor could not be written by a later forward outside it.
        with torch.inference_mode(False):
            for block in self.blocks:
                block.attn.k_cache = torch.zeros(shape, dtype=p.dtype, device=p.device)
                block.attn.v_cache = torch.zeros(shape, dtype=p.dtype, device=p.device)
        self.cache_batch = batch

    def forward(self, idx: torch.Tensor, pos: int | None = None,
                tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        """Logits (B, T, vocab) for token ids idx (B, T).

        pos=None: a training window from position 0 without the cache. pos=t: idx holds positions t..t+T-1
        of a sequence whose positions < t are already in the cache.
        tree (with pos): (position ids (T,), attention mask (T, pos + T) bool) from `trees.Tree.attention`:
        idx holds the prefix's pending tokens then a token tree's nodes; K/V still go to cache slots
        pos..pos+T-1, and `keep_path` later moves the accepted nodes' slots into place.
        """
        B, T = idx.shape
        self._check_pass(B, T, pos)
        start = 0 if pos is None else pos
        mask = None if pos is None else self.causal[pos : pos + T, : pos + T]
        if tree is None:
            x = self.wte(idx) + self.wpe(self.positions[start : start + T])
        else:  # a tree's nodes share positions by depth and see only their own branch
            x = self.wte(idx) + self.wpe(tree[0])
            mask = tree[1]
        for block in self.blocks:
            x = block(x, pos, mask)
        h = self.ln_f(x)
        if self.want_features:
            self.features = h.detach()
        return self.lm_head(h)

    def _check_pass(self, B: int, T: int, pos: int | None) -> None:
        """A pass of B sequences of T positions from `pos` (None: a training window from 0) must fit the context,
        and a cached pass the KV cache's batch; every forward (and every backend's) checks here first."""
        start = 0 if pos is None else pos
        if start + T > self.config.context:
            raise ContextOverflowError(
                f"positions {start}..{start + T - 1} exceed the context of {self.config.context}"
            )
        if pos is not None and B > self.cache_batch:
            raise RuntimeError(f"batch {B} exceeds the KV cache's {self.cache_batch}: call setup_cache")

    def keep_path(self, pos: int, slots) -> None:
        """Move the cache entries at increasing positions `slots` to pos..pos+len(slots)-1 (every block).

        After a tree pass the accepted nodes' keys and values sit at scattered slots; the next pass must find
        them contiguous, as if the accepted text had been fed in order. slots[i] >= pos + i, so reading all
        of them (advanced indexing copies) before writing is safe.
        """
        n = len(slots)
        if n == 0 or list(slots) == list(range(pos, pos + n)):
            return
        idx = torch.as_tensor(list(slots), device=self.device)
        for block in self.blocks:
            a = block.attn
            a.k_cache[:, :, pos : pos + n] = a.k_cache[:, :, idx]
            a.v_cache[:, :, pos : pos + n] = a.v_cache[:, :, idx]
