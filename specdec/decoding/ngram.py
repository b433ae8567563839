"""A character n-gram draft: cheap like the bigram, but close enough to the target to be accepted often.

Counted on the training split. Every context of length m < order seen at least `min_count` times gets a
stored distribution, Witten-Bell interpolated with its one-shorter suffix's distribution down to an add-one
unigram:

    P(x | h) = (c(h, x) + t(h) · P(x | h')) / (c(h) + t(h))

with c the counts, t(h) the number of distinct characters seen after h and h' the context without its oldest
character. At run time the draft backs off: it looks up the longest stored suffix of the text so far and
samples from that row. q is exactly that row (tempered), so the accept/reject rule stays exact.

Lookup is a dict of integer context hashes (base-V digits, oldest character first) to rows of one dense
float32 array: a few dict probes and one row copy per drafted character, no model call at all.
"""

from __future__ import annotations

import functools
import hashlib

import numpy as np

from specdec.model import corpus
from specdec.decoding.drafts import TableDraft
from specdec.util.files import atomic_path, cache_dir
from specdec.util.errors import InputError

DEFAULT_ORDER = 6  # predicts from up to 5 preceding characters
MIN_COUNT = 8  # contexts seen fewer times fall back to their suffix (keeps the table ~40 MB)


@functools.lru_cache(maxsize=4)
def build_tables(order: int, min_count: int = MIN_COUNT) -> tuple[dict[int, int], np.ndarray]:
    """(context-key -> row, rows (n, V) float32) for all stored contexts of lengths 0..order-1.

    A key is hash * 16 + length, so contexts of different lengths never collide; row 0 is the unigram.
    Counting takes seconds, so the result is also kept on disk (keyed by the corpus hash, order and
    min_count, written atomically) for the next process -- each asv benchmark runs in a fresh one.
    """
    if not 1 <= order <= 10:
        raise InputError(f"n-gram order must be between 1 and 10, got {order}")
    ids = corpus.split_ids("train").astype(np.int64)
    return _tables(order, min_count, ids, len(corpus.vocabulary()), corpus.CORPUS_SHA256[:12])


_TOKEN_TABLES: dict[tuple, tuple[dict[int, int], np.ndarray]] = {}


def token_tables(order: int, min_count: int, ids: np.ndarray, vocab_size: int
                 ) -> tuple[dict[int, int], np.ndarray]:
    """`build_tables` over another target's tokens: `ids` the training split in its ids, `vocab_size` its
    logits width; cached on disk under a hash of the ids (a tokenizer change is a new file)."""
    if not 1 <= order <= 10:
        raise InputError(f"n-gram order must be between 1 and 10, got {order}")
    if vocab_size ** max(order - 1, 1) * 16 >= 2**63:  # a context key is base-V digits times 16
        most = max(m for m in range(1, 11) if vocab_size ** max(m - 1, 1) * 16 < 2**63)
        raise InputError(f"n-gram order {order} over a {vocab_size}-token vocabulary overflows the 64-bit "
                         f"context keys; allowed: 1 <= order <= {most}")
    ids = np.asarray(ids, dtype=np.int64)
    tag = f"v{vocab_size}-" + hashlib.sha256(ids.tobytes()).hexdigest()[:12]
    key = (order, min_count, tag)
    if key not in _TOKEN_TABLES:
        _TOKEN_TABLES[key] = _tables(order, min_count, ids, vocab_size, tag)
    return _TOKEN_TABLES[key]


MAX_TABLE_BYTES = 2 << 30  # dense rows of a subword vocabulary grow fast: refuse past this instead of swapping


def _tables(order: int, min_count: int, ids: np.ndarray, V: int, tag: str) -> tuple[dict[int, int], np.ndarray]:
    path = cache_dir() / f"ngram-o{order}-m{min_count}-{tag}.npz"
    try:
        with np.load(path) as f:
            keys, rows = f["keys"], f["rows"]
        return dict(zip(keys.tolist(), range(len(keys)))), rows
    except (OSError, KeyError, ValueError):
        pass  # not built yet (or unreadable): count afresh
    index, rows = _count(order, min_count, ids, V)
    try:
        with atomic_path(path) as tmp, open(tmp, "wb") as f:
            np.savez(f, keys=np.fromiter(index, dtype=np.int64, count=len(index)), rows=rows)
    except OSError:
        pass  # a read-only home only costs the next process a recount
    return index, rows


def _count(order: int, min_count: int, ids: np.ndarray, V: int) -> tuple[dict[int, int], np.ndarray]:
    N = len(ids)
    unigram = np.bincount(ids, minlength=V) + 1.0
    rows = [(unigram / unigram.sum())[None, :]]
    index = {0 * 16 + 0: 0}
    lower_keys, lower_rows = np.zeros(1, np.int64), rows[0]
    offset = 1
    for m in range(1, order):
        h = np.zeros(N - m, dtype=np.int64)
        for j in range(m):  # base-V digits, oldest character most significant
            h = h * V + ids[j : N - m + j]
        nxt = ids[m:]
        keys, inverse, count = np.unique(h, return_inverse=True, return_counts=True)
        keep = count >= min_count
        if not keep.any():
            break
        kept_row = np.cumsum(keep) - 1
        sel = keep[inverse]
        r = kept_row[inverse[sel]]
        nk = int(keep.sum())
        if (offset + nk) * V * 4 > MAX_TABLE_BYTES:
            raise InputError(f"the n-gram table of order {order} over {V} tokens would take "
                             f"{(offset + nk) * V * 4 / 2**30:.1f} GiB; allowed: a lower order or a higher "
                             f"min_count (at most {MAX_TABLE_BYTES / 2**30:.0f} GiB)")
        counts = np.bincount(r * V + nxt[sel], minlength=nk * V).reshape(nk, V).astype(np.float64)
        keys = keys[keep]
        # Every kept context's suffix was seen at least as often, so it is stored one level down.
        suffix = keys % V ** (m - 1) if m > 1 else np.zeros_like(keys)
        lower = lower_rows[np.searchsorted(lower_keys, suffix)]
        types = (counts > 0).sum(1, keepdims=True)
        probs = (counts + types * lower) / (counts.sum(1, keepdims=True) + types)
        index.update(zip((keys * 16 + m).tolist(), range(offset, offset + nk)))
        rows.append(probs)
        lower_keys, lower_rows = keys, probs
        offset += nk
    return index, np.concatenate(rows).astype(np.float32)


class NgramDraft(TableDraft):
    """Interpolated character n-gram with backoff to the longest stored context."""

    name = "ngram"

    def __init__(self, order: int = DEFAULT_ORDER, min_count: int = MIN_COUNT, token_ids: np.ndarray | None = None,
                 vocab_size: int | None = None):
        """token_ids None: the shipped characters. Else they are the training split in a target's token ids
        (`drafts.corpus_ids`) and `vocab_size` its logits width."""
        self.order = order
        self.history = max(1, order - 1)
        if token_ids is None:
            self.index, self.rows = build_tables(order, min_count)
        else:
            self.index, self.rows = token_tables(order, min_count, token_ids, vocab_size)
            self.vocab_size = vocab_size
        self.V = self.rows.shape[1]
        self._mods = [self.V**m for m in range(order)]

    def _key(self, tokens):
        """The row of the longest stored suffix of `tokens` (0, the unigram, when none is stored)."""
        h = 0
        for t in tokens[-self.history :]:
            h = h * self.V + t
        for m in range(min(self.history, len(tokens)), 0, -1):
            row = self.index.get((h % self._mods[m]) * 16 + m)
            if row is not None:
                return row
        return 0

    def _row(self, key):
        return self.rows[key].astype(np.float64)

    def weight_bytes(self) -> int:
        return self.rows.nbytes + len(self.index) * 8  # float32 rows plus one int64 key each
