"""The target protocol: what generation, exactness and timing call on a target model.

The shipped `GPT` is one implementation (the embedded default); `model.hf.HFTarget` wraps a Hugging Face
transformers causal LM. Anything else that implements these members can be passed wherever a target goes
(`generate`, `speculative_generate`, `make_draft`, `verify`, `report.measure`).

The calling convention is the shipped model's, so the measuring code needs no branch per kind of target:

- `target(idx, pos)`: logits (B, T, vocab_size) for the new tokens `idx` (B, T) at positions pos..pos+T-1,
  every position < pos already in the target's own cache. The call may move the cache back first: a pos below
  what the cache holds means the entries from pos on are dropped (rejected drafts), never re-run.
- `target(idx)` (pos None): a window from position 0 without the cache (batched scoring: acceptance, laws).
- `target(idx, pos, (position_ids, mask))`: a token tree's verify pass (trees only; see `TreeTarget`).
- `rollback(n_valid)`: only the first n_valid tokens of the sequence stay valid. The generation loop calls it
  after every round; a cache that is overwritten in place (the shipped GPT's) has nothing to do.

A batch of B sequences (`generate(..., prompt=[...])`) needs per-row positions (`model.rows`): the shipped GPT
has them on every backend; any other target is refused with `batch_unsupported`, its one-line reason
(`decoding.batch.target_support`; the Hugging Face adapter's names its DynamicCache).

Features (drafts that read the target: Medusa heads, EAGLE- and MTP-style layers), an optional pair of members
(`FeatureTarget`): while `want_features` is True, every cached pass also leaves `features`, the final hidden
states (after the final norm, before the LM head) of the positions it computed, (B, T, width) float32, valid
until the target's next pass. The generation loop turns it on only for a draft that reads features
(`Draft.take_features`), so a target pays nothing otherwise; `feature_support` says why a target cannot. A
draft that reads several layers (EAGLE-3: `Draft.feature_layers`, ids as in `output_hidden_states`, 0 the
embeddings) gets `want_features` set to that tuple instead, and `features` is then those layers' states side by
side, (B, T, len(layers) * width): a target that can (`hidden_layers`, its layer count) says so.

Units follow the target: `tokenize` gives characters for the shipped model and tokens for a subword model;
`chars` in the generation API then counts tokens.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Protocol, runtime_checkable

import torch


@dataclass(frozen=True)
class TargetConfig:
    """The two sizes every target reports (the shipped `GPTConfig` has these fields and more)."""

    vocab_size: int  # width of the logits: every id a draft may propose is below it
    context: int  # positions the model can hold: prompt + generated tokens must fit

    def to_dict(self) -> dict:
        return asdict(self)


class ConfigSizes:
    """`vocab_size` and `context` read from the target's `config`, for implementations to inherit."""

    @property
    def vocab_size(self) -> int:
        return self.config.vocab_size

    @property
    def context(self) -> int:
        return self.config.context


@runtime_checkable
class Target(Protocol):
    """A target model (see the module docstring for the calling convention)."""

    config: TargetConfig  # .vocab_size and .context, at least

    @property
    def device(self) -> torch.device:
        """Where its weights and cache live; inputs come from `ids` on this device."""

    @property
    def vocab_size(self) -> int:
        """Logits width (config.vocab_size)."""

    @property
    def context(self) -> int:
        """Most positions one sequence may reach (config.context)."""

    def tokenize(self, text: str) -> list[int]:
        """Ids of `text`; a one-line ValueError for text it cannot represent."""

    def detokenize(self, ids) -> str:
        """Text of a sequence of ids."""

    def ids(self, tokens: list[int]) -> torch.Tensor:
        """Token ids as a (1, T) long tensor on `device`: the one way the pipeline builds a model input."""

    def setup_cache(self, batch: int = 1) -> None:
        """Make the cache ready for `batch` sequences (cheap when it already is)."""

    def rollback(self, n_valid: int) -> None:
        """Only the first n_valid tokens of the current sequence remain valid in the cache."""

    def __call__(self, idx: torch.Tensor, pos: int | None = None, tree=None) -> torch.Tensor:
        """Logits (B, T, vocab_size) for idx (B, T) at positions pos.. (see the module docstring)."""


@runtime_checkable
class TreeTarget(Target, Protocol):
    """A target that verifies token trees: its forward takes (position ids, attention mask) and it moves the
    accepted path's cache entries into place afterwards."""

    def keep_path(self, pos: int, slots) -> None:
        """Move the cache entries at increasing positions `slots` to pos..pos+len(slots)-1."""


def tree_support(target) -> str | None:
    """None when `target` can verify token trees; otherwise a one-line reason (what trees need)."""
    reason = getattr(target, "tree_unsupported", None)
    if reason:
        return reason
    if not isinstance(target, TreeTarget):
        return f"token trees need a target with keep_path and a tree forward; {type(target).__name__} has none"
    return None


@runtime_checkable
class FeatureTarget(Target, Protocol):
    """A target that hands out its final hidden states (see the module docstring)."""

    want_features: bool | tuple[int, ...]  # set by the generation loop while a draft reads features; else False
    features: torch.Tensor | None  # (B, T, width): the last pass's states after the final norm (or its layers')


def feature_support(target, layers: tuple[int, ...] | None = None) -> str | None:
    """None when `target` hands out its final hidden states (`FeatureTarget`), and the states of `layers` where
    a draft reads those; otherwise a one-line reason."""
    if not isinstance(target, FeatureTarget):
        return (f"a draft that reads the target's features needs a target with want_features and features; "
                f"{type(target).__name__} has none")
    if layers:
        n = getattr(target, "hidden_layers", None)
        if n is None:
            return f"{type(target).__name__} hands its final states only, not the states of layers {list(layers)}"
        if any(not 0 <= j <= n for j in layers):
            return f"layers {list(layers)} are not all among the target's 0..{n} (0: the embeddings)"
    return None


def feature_request(draft) -> bool | tuple[int, ...]:
    """What the loop sets `want_features` to for `draft`: its `feature_layers`, or True (the final states)."""
    layers = getattr(draft, "feature_layers", None)
    return tuple(layers) if layers else True


def units(target) -> str:
    """What one generated position is, for every figure's label: "characters" where the target reads the shipped
    corpus one character a token (the shipped GPT, or it exported), else "tokens"."""
    return "characters" if getattr(target, "corpus_vocabulary", False) else "tokens"


def describe(target) -> dict:
    """Who the target is, as report.json records it and `compare` checks it: two reports of different targets
    or tokenizers never compare. name: "shipped" for the package's checkpoint, else where it was loaded from."""
    tokenizer = getattr(target, "tokenizer", None)
    name = getattr(target, "name", None)
    return {
        "name": "shipped" if name is None else str(name),
        "architecture": (getattr(getattr(getattr(target, "model", None), "config", None), "model_type", None)
                         or "specdec-gpt"),
        "vocab_size": int(target.vocab_size),
        "context": int(target.context),
        "tokenizer": "corpus characters" if tokenizer is None else type(tokenizer).__name__,
        "units": units(target),
    }
