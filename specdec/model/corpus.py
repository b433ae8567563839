"""The shipped Shakespeare corpus, its vocabulary and the fixed train/validation split.

The corpus (42 plays and poems, 5,052,231 ASCII characters, 84 distinct) travels gzip-compressed inside the
package so that a fresh machine needs nothing beside it. The split is fixed: the first 90 % of the characters
train, the last 10 % validate. Nothing is shuffled before splitting, so the validation text is whole plays the
model never saw.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import re
from importlib import resources

import numpy as np

from specdec.util.errors import InputError

CORPUS_SHA256 = "c7c2c695ac765d704e69b117e4d413e3c7dc873d69fa25cc124924c76280175e"
TRAIN_FRACTION = 0.9  # first 90 % train, last 10 % validation


class VocabularyError(InputError):
    """A character that the corpus never contains (the model has no embedding for it)."""


@functools.lru_cache(maxsize=1)
def load_text() -> str:
    """The whole corpus as one string, checked against its recorded sha256."""
    raw = resources.files("specdec").joinpath("data/shakespeare.txt.gz").read_bytes()
    data = gzip.decompress(raw)
    digest = hashlib.sha256(data).hexdigest()
    if digest != CORPUS_SHA256:
        raise RuntimeError(f"shipped corpus is corrupt: sha256 {digest}, expected {CORPUS_SHA256}")
    return data.decode("ascii")


@functools.lru_cache(maxsize=1)
def vocabulary() -> str:
    """Every distinct character of the corpus, sorted; a character's index is its token id."""
    return "".join(sorted(set(load_text())))


@functools.lru_cache(maxsize=1)
def _lookup() -> dict[str, int]:
    return {ch: i for i, ch in enumerate(vocabulary())}


def encode(text: str) -> list[int]:
    """Token ids of `text`; a character outside the vocabulary raises VocabularyError naming it."""
    table = _lookup()
    try:
        return [table[ch] for ch in text]
    except KeyError as exc:
        bad = exc.args[0]
        raise VocabularyError(
            f"character {bad!r} is not in the vocabulary (allowed: {vocabulary()!r})"
        ) from None


def decode(ids) -> str:
    """Text of a sequence of token ids."""
    vocab = vocabulary()
    return "".join(vocab[int(i)] for i in ids)


@functools.lru_cache(maxsize=2)
def split_ids(split: str) -> np.ndarray:
    """Token ids of the 'train' (first 90 %) or 'val' (last 10 %) split, as uint8."""
    if split not in ("train", "val"):
        raise ValueError(f"unknown split {split!r} (allowed: 'train', 'val')")
    ids = _all_ids()
    cut = int(len(ids) * TRAIN_FRACTION)
    return ids[:cut] if split == "train" else ids[cut:]


@functools.lru_cache(maxsize=1)
def _all_ids() -> np.ndarray:
    # A 256-entry byte table turns 5 M characters into ids in one vectorised step.
    table = np.zeros(256, dtype=np.uint8)
    for i, ch in enumerate(vocabulary()):
        table[ord(ch)] = i
    return table[np.frombuffer(load_text().encode("ascii"), dtype=np.uint8)]


def split_text(split: str) -> str:
    """The text of the 'train' or 'val' split: the same cut as `split_ids`, as characters."""
    ids = split_ids(split)  # checks the name
    text = load_text()
    return text[: len(ids)] if split == "train" else text[len(text) - len(ids) :]


def paragraphs(split: str) -> list[str]:
    """The split's text in pieces ending at a blank line (each keeps its "\\n\\n"): what another target's
    tokenizer reads one at a time, so that no piece is megabytes long and no token straddles two speeches."""
    return re.split(r"(?<=\n\n)", split_text(split))


def tokenize_split(split: str, tokenize) -> list[int]:
    """The split as the ids `tokenize(text) -> list[int]` gives, paragraph by paragraph."""
    out: list[int] = []
    for piece in paragraphs(split):
        if piece:
            out.extend(tokenize(piece))
    return out
