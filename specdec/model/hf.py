"""A Hugging Face transformers causal LM as a specdec target (or draft): `load_hf(path) -> HFTarget`.

`HFTarget` implements `model.protocol.Target` over any `AutoModelForCausalLM` with its tokenizer:

- The cache is the library's own `DynamicCache`. A forward at `pos` below what the cache holds first drops
  the entries from pos on with `DynamicCache.crop` (transformers 5.x takes a negative count of tokens to drop;
  a positive size is refused), so rejected drafts are removed, never recomputed, and the prefix is never
  re-run. A forward at pos 0 starts a new cache.
- A verify pass over pending tokens + k drafts is one `model(input_ids=..., cache=...)` call with explicit
  `position_ids`.
- Trees: the tree's (T, pos + T) boolean mask goes in as a 4-D float attention mask (0 where allowed, the
  dtype's minimum elsewhere) with the nodes' position ids; transformers returns a 4-D mask as it is for the
  eager and sdpa attention implementations, so trees run there and say why they cannot elsewhere.
  `keep_path` moves the accepted nodes' entries inside each cache layer's key/value tensors.
- Units are the tokenizer's tokens (no special tokens are added to a prompt).

`path` is a local folder or a model id already in the local Hugging Face cache; nothing is downloaded unless
allow_download=True. Every failure to load is a one-line `HFModelError` (the CLI exits 2 on it), raised before
any generation work.

Import cost: transformers is imported by the functions here, not by `import specdec` (the [hf] extra is
optional).
"""

from __future__ import annotations

import functools
import os
from pathlib import Path

import numpy as np
import torch

from specdec.model.names import DTYPE_NAMES
from specdec.model import corpus
from specdec.model.gpt import ContextOverflowError
from specdec.model.protocol import ConfigSizes, TargetConfig
from specdec.util import versions
from specdec.util.errors import InputError

DTYPES = {name: getattr(torch, name) for name in DTYPE_NAMES}  # the parser reads the names torch-free
TREE_ATTENTION = ("eager", "sdpa")  # attention implementations that take a custom 4-D mask as it is
DEFAULT_CONTEXT = 2048  # when neither the config nor the tokenizer says how many positions the model holds


class HFModelError(InputError):
    """A Hugging Face model that cannot be used: missing, not a causal LM, not cached, a vocabulary mismatch."""


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def check_dtype(dtype) -> torch.dtype:
    """A torch dtype from None (float32), a name in DTYPES or a torch.dtype; else a one-line HFModelError."""
    if dtype is None:
        return torch.float32
    if isinstance(dtype, torch.dtype) and dtype in DTYPES.values():
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return DTYPES[dtype]
    raise HFModelError(f"unknown dtype {dtype!r} (allowed: {', '.join(DTYPES)})")


def resolve(path: str | os.PathLike, allow_download: bool = False) -> str:
    """What `from_pretrained` should read: an existing local model folder, or a model id (one that is in the
    local cache unless allow_download). A one-line HFModelError otherwise, before anything is loaded."""
    text = str(path)
    local = Path(text).expanduser()
    if local.exists():
        if not local.is_dir():
            raise HFModelError(f"{text!r} is a file, not a model folder (a folder with config.json and weights)")
        if not (local / "config.json").is_file():
            raise HFModelError(f"{text!r} is not a Hugging Face model folder: it has no config.json")
        return str(local)
    if allow_download:
        return text
    cached = _cached_config(text)
    if cached is None:
        raise HFModelError(
            f"no model folder {text!r} here and no model id {text!r} in the local Hugging Face cache "
            f"({_hub_cache()}); give a folder, or pass --allow-download (allow_download=True) to fetch the id")
    return text


def _hub_cache() -> str:
    from huggingface_hub import constants

    return str(constants.HF_HUB_CACHE)


def _cached_config(model_id: str) -> str | None:
    """The cached config.json of `model_id`, or None (also for a string that cannot be a model id)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(model_id, "config.json")
    except Exception:  # not a valid repo id: it cannot be in the cache either
        return None
    return found if isinstance(found, str) else None


def load_hf(path: str | os.PathLike, device: str | torch.device = "cpu", dtype=None,
            allow_download: bool = False) -> HFTarget:
    """A transformers causal LM and its tokenizer from `path` (a local folder, or a cached model id) as an
    HFTarget on `device` with weights in `dtype` (None: float32; "float16", "bfloat16")."""
    versions.require("transformers")  # an older one lacks the APIs below: one line, not a traceback inside
    torch_dtype = check_dtype(dtype)
    source = resolve(path, allow_download)
    offline = not allow_download
    from transformers import AutoModelForCausalLM, AutoTokenizer

    quiet()
    try:
        tokenizer = AutoTokenizer.from_pretrained(source, local_files_only=offline)
    except Exception as exc:
        raise HFModelError(f"{str(path)!r}: cannot load its tokenizer: {_first_line(exc)}") from None
    try:
        model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, local_files_only=offline)
    except Exception as exc:
        raise HFModelError(f"{str(path)!r}: cannot load a causal language model: {_first_line(exc)}") from None
    try:
        model = model.to(device)
    except Exception as exc:
        raise HFModelError(f"{str(path)!r}: cannot move the model to device {str(device)!r}: "
                           f"{_first_line(exc)}") from None
    return HFTarget(model, tokenizer, name=str(path))


def quiet() -> None:
    """No transformers progress bars: a bar per load or save is noise among specdec's own diagnostics."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()


def _context(config, tokenizer) -> int:
    for key in ("max_position_embeddings", "n_positions", "n_ctx", "max_sequence_length"):
        n = getattr(config, key, None)
        if isinstance(n, int) and n > 0:
            return n
    n = getattr(tokenizer, "model_max_length", None)
    return n if isinstance(n, int) and 0 < n < 10**7 else DEFAULT_CONTEXT


def _reads_corpus_characters(tokenizer, vocab_size: int) -> bool:
    """The tokenizer gives every corpus character its corpus id, one token each (an exported shipped model):
    then the shipped table drafts and the shipped workloads serve this target unchanged."""
    vocab = corpus.vocabulary()
    if vocab_size != len(vocab) or tokenizer.get_vocab() != {ch: i for i, ch in enumerate(vocab)}:
        return False
    probe = "ROMEO:\nWhat  light, through yonder? 'Tis\n\n"  # spaces, newlines, punctuation must stay single
    return tokenizer.encode(probe, add_special_tokens=False) == corpus.encode(probe)


# transformers' DynamicCache holds one length for all its rows and `crop` cuts every row at once, so B sequences
# that accept different numbers of drafts cannot roll back apart; per-row rollback would need a padded cache
# with per-row position ids and a 4-D mask per pass (left for later: docs/batch.md).
BATCH_UNSUPPORTED = ("transformers' DynamicCache keeps one length for every row (crop cuts all rows at once), "
                     "so sequences that accept different numbers of drafts cannot roll back apart")


class HFTarget(ConfigSizes):
    """A transformers causal LM behind the target protocol (see the module docstring)."""

    def __init__(self, model, tokenizer, name: str = "hf"):
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.name = name
        vocab = model.get_output_embeddings().weight.shape[0] if model.get_output_embeddings() is not None \
            else model.config.vocab_size
        self.config = TargetConfig(vocab_size=int(vocab), context=_context(model.config, tokenizer))
        self.corpus_vocabulary = _reads_corpus_characters(tokenizer, self.config.vocab_size)
        attn = getattr(model.config, "_attn_implementation", None)
        self.tree_unsupported = None if attn in TREE_ATTENTION else (
            f"token trees need a model that accepts a 4-D attention mask (attention {', '.join(TREE_ATTENTION)}); "
            f"{name!r} runs {attn!r} attention")
        self.cache = None
        self._batch = 0
        # Features (`protocol.FeatureTarget`): the last hidden state, which transformers gives after the final
        # norm (Llama's `norm`, GPT-2's `ln_f`), asked for with output_hidden_states only while a draft reads it.
        self.want_features = False
        self.features: torch.Tensor | None = None
        # the layers an EAGLE-3 draft may read (`output_hidden_states`: 0 the embeddings, n the last layer's output)
        self.hidden_layers = int(getattr(model.config, "num_hidden_layers", 0)) or None
        # Why a batch of B sequences is refused (`decoding.batch.target_support`), as the report prints it.
        self.batch_unsupported = BATCH_UNSUPPORTED

    def __repr__(self) -> str:
        return f"HFTarget({self.name!r}, vocab {self.vocab_size}, context {self.context})"

    # --- sizes and units ------------------------------------------------------------------------------

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype

    def tokenizer_label(self) -> str:
        """How an error names this tokenizer: its class and where it came from."""
        return f"{type(self.tokenizer).__name__} of {self.name!r}"

    def tokenize(self, text: str) -> list[int]:
        ids = self.tokenizer.encode(text, add_special_tokens=False)
        bad = [i for i in ids if not 0 <= i < self.vocab_size]
        if bad:
            raise InputError(f"{text!r} tokenizes to id {bad[0]}, outside the model's {self.vocab_size} logits")
        return ids

    def detokenize(self, ids) -> str:
        return self.tokenizer.decode([int(i) for i in ids], skip_special_tokens=False,
                                     clean_up_tokenization_spaces=False)

    def corpus_ids(self, split: str = "train") -> np.ndarray:
        """The shipped corpus's split in this tokenizer's ids (for the table drafts), tokenized once."""
        return _tokenized_split(self.tokenizer, split)

    # --- the model and its cache --------------------------------------------------------------------------

    def ids(self, tokens: list[int]) -> torch.Tensor:
        return torch.tensor([tokens], dtype=torch.long, device=self.device)

    def eval(self) -> HFTarget:
        """Already in eval mode (what `ModelDraft` asks of a model)."""
        return self

    def to(self, device) -> HFTarget:
        self.model.to(device)
        self.cache = None  # the next pass starts a cache on the new device
        return self

    def parameters(self):
        return self.model.parameters()

    def setup_cache(self, batch: int = 1) -> None:
        """A cache for `batch` sequences; the DynamicCache grows as passes run, so this only starts one when
        none is held for that batch."""
        if self.cache is None or self._batch != batch:
            self._new_cache(batch)

    def _new_cache(self, batch: int) -> None:
        from transformers import DynamicCache

        self.cache = DynamicCache(config=self.model.config)
        self._batch = batch

    def cached(self) -> int:
        """Tokens the cache holds now."""
        return self.cache.get_seq_length() if self.cache is not None else 0

    def rollback(self, n_valid: int) -> None:
        """Drop the cache's entries past the first n_valid tokens (DynamicCache.crop takes minus the count)."""
        n = self.cached()
        if n > n_valid:
            self.cache.crop(max(n_valid, 0) - n)

    @torch.inference_mode()
    def __call__(self, idx: torch.Tensor, pos: int | None = None, tree=None) -> torch.Tensor:
        B, T = idx.shape
        start = 0 if pos is None else pos
        if start + T > self.context:
            raise ContextOverflowError(f"positions {start}..{start + T - 1} exceed the context of {self.context}")
        extra = {"output_hidden_states": True} if self.want_features else {}
        if pos is None:  # a window from position 0, no cache (batched scoring)
            return self._logits(self.model(input_ids=idx, use_cache=False, **extra))
        if pos == 0 or self.cache is None or self._batch != B:
            if pos != 0:
                raise RuntimeError(f"a pass at position {pos} needs the cache of the {pos} tokens before it")
            self._new_cache(B)
        else:
            self.rollback(pos)
            if self.cached() != pos:
                raise RuntimeError(f"a pass at position {pos}, but the cache holds {self.cached()} tokens")
        if tree is None:
            positions = torch.arange(pos, pos + T, device=idx.device)[None].expand(B, T)
            out = self.model(input_ids=idx, cache=self.cache, use_cache=True, position_ids=positions, **extra)
        else:
            if self.tree_unsupported:
                raise InputError(self.tree_unsupported)
            positions, allowed = tree
            mask = torch.zeros(allowed.shape, dtype=self.dtype, device=idx.device)
            mask.masked_fill_(~allowed.to(idx.device), torch.finfo(self.dtype).min)
            out = self.model(input_ids=idx, cache=self.cache, use_cache=True,
                             position_ids=positions.to(idx.device)[None].expand(B, T),
                             attention_mask=mask[None, None].expand(B, 1, *allowed.shape), **extra)
        return self._logits(out)

    forward = __call__

    def _logits(self, out) -> torch.Tensor:
        if isinstance(self.want_features, tuple):  # an EAGLE-3 draft's layers, side by side
            self.features = torch.cat([out.hidden_states[j] for j in self.want_features], dim=-1).float()
        elif self.want_features:
            self.features = out.hidden_states[-1].float()
        logits = out.logits
        # numpy (what sampling reads) has no bfloat16, and half-precision p - q would lose the rule's exactness
        return logits if logits.dtype in (torch.float32, torch.float64) else logits.float()

    def keep_path(self, pos: int, slots) -> None:
        """Move the cache entries at increasing positions `slots` to pos..pos+len(slots)-1 in every layer (the
        entries past them are dropped by the next pass's crop)."""
        n = len(slots)
        if n == 0 or list(slots) == list(range(pos, pos + n)):
            return
        idx = torch.as_tensor(list(slots), device=self.device)
        for layer in self.cache.layers:
            layer.keys[:, :, pos : pos + n] = layer.keys[:, :, idx]
            layer.values[:, :, pos : pos + n] = layer.values[:, :, idx]

    def weight_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.model.parameters())


@functools.lru_cache(maxsize=4)
def _tokenized_split(tokenizer, split: str) -> np.ndarray:
    pieces = [p for p in corpus.paragraphs(split) if p]
    batch = tokenizer(pieces, add_special_tokens=False)["input_ids"]  # the fast tokenizer's batch path
    return np.fromiter((i for ids in batch for i in ids), dtype=np.int64)


def check_same_vocabulary(target, draft: HFTarget) -> None:
    """A draft model must propose in the target's ids: the same tokenizer vocabulary and logits width.
    Otherwise a one-line HFModelError naming both tokenizers and their sizes."""
    t_vocab = target.tokenizer.get_vocab() if isinstance(target, HFTarget) else \
        {ch: i for i, ch in enumerate(corpus.vocabulary())} if getattr(target, "corpus_vocabulary", False) else None
    t_label = target.tokenizer_label() if isinstance(target, HFTarget) else f"the {type(target).__name__}'s characters"
    d_vocab = draft.tokenizer.get_vocab()
    if t_vocab != d_vocab or target.config.vocab_size != draft.vocab_size:
        raise HFModelError(
            f"the draft's tokenizer ({draft.tokenizer_label()}, {len(d_vocab)} tokens, {draft.vocab_size} logits) "
            f"differs from the target's ({t_label}, {len(t_vocab or {})} tokens, {target.config.vocab_size} "
            f"logits); a draft model must share the target's vocabulary")

