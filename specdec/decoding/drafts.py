"""The `Draft` interface and the drafts built on it: the table drafts (bigram; n-gram in `ngram`) and model
drafts (a rounded int8/int4 copy of the target, a small trained model); `registry` names them.

A draft proposes k characters after a context, returning them with the distributions q it sampled them
from (the accept/reject rule needs q). A draft that keeps state (a KV cache) tracks how many tokens of the
sequence it has consumed; after a round the loop calls `rollback(n)` to say that only the first n tokens of
the sequence are still valid, and the next `propose` feeds whatever it has not seen yet. Rolling back is
moving the position back, exactly as for the target.

For a batch of B sequences (`generate.chain_rows`) a draft proposes for every row at once (`propose_rows`),
each row from its own generator, and keeps one position per row (`rollback_row`, `keep_rows`): the table
drafts have no state and propose row by row; a model draft runs one batched pass per draft step
(`model.rows`). `batch_unsupported` says why a draft cannot (None: it can).

A draft that reads the target (Medusa heads, EAGLE- and MTP-style layers) defines `take_features`: after every
verify pass the loop hands it the target's final hidden states at the positions that pass confirmed. Its first
round drafts nothing -- the prompt's prefill is that round's pass, emits the target's own first token and hands
the prompt's features -- so `propose` always has a feature to read. Every other draft leaves it None and is
handed nothing (the target then forms no features either).
"""

from __future__ import annotations

import functools

import numpy as np
import torch

from specdec.model import corpus, rows, sampling
from specdec.model.gpt import GPT
from specdec.util.errors import InputError


class UnknownDraftError(InputError):
    """A draft name that `make_draft` does not know."""


class DeviceError(InputError):
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

    # --- drafts that read the target's features: define `take_features(features, pos, row=0)` -------------------
    # features: (n, width) tensor, the target's final hidden states (`protocol.FeatureTarget`) at positions
    # pos..pos+n-1 of sequence `row`, each of them accepted; the last one predicted the pending token (at pos + n,
    # the one the next propose's `tokens` ends with). A view valid during the call only: copy what is kept.
    # Called after `rollback(pos + n)` (or `rollback_row`); a rollback never invalidates features it was handed.
    take_features = None  # None: this draft reads no features

    # --- a batch of B sequences (`generate.chain_rows`): None here means it can; else why not ----------------
    batch_unsupported: str | None = "a Draft subclass batches once it says how (a stateless one sets this to None)"

    def reset_rows(self, batch: int) -> None:
        """Start `batch` sequences (after `reset`)."""

    def propose_rows(self, rows: list[list[int]], ks: list[int], rngs: list[np.random.Generator],
                     temperature: float) -> list[tuple[list[int], np.ndarray | None]]:
        """Per sequence b, ks[b] drafts after rows[b] with their q, drawn from rngs[b] in the order `propose`
        draws them (([], None) where ks[b] is 0). This default calls `propose` per row: right for a draft
        without state; a stateful one overrides all four row methods."""
        return [self.propose(t, k, rng, temperature) if k > 0 else ([], None) for t, k, rng in zip(rows, ks, rngs)]

    def rollback_row(self, row: int, n_valid: int) -> None:
        """Only the first n_valid tokens of sequence `row` remain valid."""

    def keep_rows(self, keep: list[int]) -> None:
        """Only the sequences `keep` (increasing) go on, as rows 0..len(keep)-1."""


class TableDraft(Draft):
    """A draft whose next-character distribution is looked up from the last character(s): no state.

    Subclasses implement `_dist(tokens)` and set `history` (how many trailing characters it reads);
    sampling and the k-step loop are shared.
    """

    history = 1
    batch_unsupported = None  # no state: `propose_rows` proposes row by row
    vocab_size: int | None = None  # width of q: the target's vocabulary (None: the corpus's characters)
    CACHE_BYTES = 32 << 20  # tempered rows kept (q and its cumulative sum, float64 each); past this, start over

    def _dist(self, tokens: list[int]) -> np.ndarray:
        """q before temperature after `tokens` (float64; trees read it at every inner node)."""
        return self._row(self._key(tokens))

    def _key(self, tokens: list[int]):
        """Which stored row `_dist(tokens)` is (hashable), for the cache of tempered rows; None: not stored."""
        return None

    def _row(self, key) -> np.ndarray:
        raise NotImplementedError

    def tempered(self, tokens: list[int], temperature: float) -> tuple[np.ndarray, np.ndarray]:
        """(q, q.cumsum()) after `tokens` at `temperature`: `sampling.temper(self._dist(tokens), temperature)`
        and the sums `sampling.pick` searches, computed once per stored row and temperature and kept (the same
        arrays each time: read them, never write)."""
        key = self._key(tokens)
        if key is None:  # a subclass that only implements `_dist`
            q = sampling.temper(self._dist(tokens), temperature)
            return q, q.cumsum()
        cache = self.__dict__.setdefault("_tempered", {})
        hit = cache.get((temperature, key))
        if hit is None:
            q = sampling.temper(self._row(key), temperature)
            hit = q, q.cumsum()
            if len(cache) * q.size * 16 >= self.CACHE_BYTES:
                cache.clear()
            cache[(temperature, key)] = hit
        return hit

    def propose(self, tokens, k, rng, temperature):
        """k drafted ids and their q, as a loop of `sampling.temper` and `sampling.sample` per character gives
        them (the same ids, bitwise the same q, the same draws: tests/oracles.py), with less per character: the k
        uniforms drawn in one call (k `sampling.sample` calls draw the same k, in order), each row tempered and
        summed once (`tempered`), one search per character."""
        u = rng.random(k)
        ctx = list(tokens[-self.history :])  # only the tail matters: no copy of the whole sequence
        qs = np.empty((k, self.vocab_size or len(corpus.vocabulary())))
        for i in range(k):
            q, c = self.tempered(ctx, temperature)
            x = sampling.pick_summed(c, u[i])
            qs[i] = q
            ctx.append(x)
        return ctx[len(ctx) - k :], qs



class BigramDraft(TableDraft):
    """q(next | previous character), counted on the training split with add-one smoothing.

    Without arguments: the corpus's characters (the shipped target's vocabulary). With `token_ids` (the
    training split as the target's token ids, see `corpus_ids`) and `vocab_size`: the same counts over
    another target's tokens -- one row per token seen, built on first use (a dense V x V table would not fit
    a subword vocabulary).
    """

    name = "bigram"

    def __init__(self, token_ids: np.ndarray | None = None, vocab_size: int | None = None):
        if token_ids is None:
            self.table = _bigram_table()  # (V, V) float64, rows sum to 1
            return
        self.vocab_size = int(vocab_size)
        self.table = _SparseBigram(np.asarray(token_ids, dtype=np.int64), self.vocab_size)

    def _key(self, tokens):
        return tokens[-1]

    def _row(self, key):
        return self.table[key]

    def weight_bytes(self) -> int:
        return self.table.size * 4  # stored as float32


@functools.lru_cache(maxsize=1)
def _bigram_table() -> np.ndarray:
    ids = corpus.split_ids("train").astype(np.int64)
    V = len(corpus.vocabulary())
    counts = np.bincount(ids[:-1] * V + ids[1:], minlength=V * V).reshape(V, V) + 1.0
    return counts / counts.sum(1, keepdims=True)


class _SparseBigram:
    """The add-one bigram rows of a token corpus over V ids, stored as counts of the pairs that occur: row
    a is (counts after a + 1) / (tokens after a + V), made dense only when it is looked up (and kept)."""

    def __init__(self, ids: np.ndarray, V: int):
        if ids.size and (ids.min() < 0 or ids.max() >= V):
            raise ValueError(f"corpus ids must lie in 0..{V - 1}, got {ids.min()}..{ids.max()}")
        pairs, counts = np.unique(ids[:-1] * V + ids[1:], return_counts=True)
        self.V = V
        self.starts = np.searchsorted(pairs // V, np.arange(V + 1))  # row a's pairs: starts[a]:starts[a+1]
        self.nxt, self.counts = pairs % V, counts.astype(np.float64)
        self.size = len(pairs) * 2  # stored: one count and one id per occurring pair
        self._rows: dict[int, np.ndarray] = {}

    def __getitem__(self, a: int) -> np.ndarray:
        row = self._rows.get(a)
        if row is None:
            lo, hi = self.starts[a], self.starts[a + 1]
            row = np.ones(self.V)
            row[self.nxt[lo:hi]] += self.counts[lo:hi]
            row /= row.sum()
            self._rows[a] = row
        return row


def corpus_ids(target, split: str = "train") -> np.ndarray | None:
    """The shipped corpus's `split` as `target`'s token ids, for table drafts counted in its units; None when
    the target reads the corpus's own character ids (the shipped GPT, an exported copy of it), so the shipped
    tables -- and every figure made with them -- serve it unchanged.

    A target may provide `corpus_ids(split)` itself (the Hugging Face adapter caches its tokenization); else
    the split's text goes through `target.tokenize` paragraph by paragraph.
    """
    if getattr(target, "corpus_vocabulary", False):
        return None
    own = getattr(target, "corpus_ids", None)
    if own is not None:
        return own(split)
    return np.array(corpus.tokenize_split(split, target.tokenize), dtype=np.int64)


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
        self.row_pos: list[int] = []  # per sequence of a batch: its tokens already in cache row b
        if not isinstance(model, GPT):
            self.batch_unsupported = f"its {type(model).__name__} has no per-row forward"

    def reset(self) -> None:
        self.pos = 0
        # A generation starts here: the model's session follows torch's threads as they are now (a draft built
        # before a report set them would keep the old count's ONNX session, and time its rounds with it).
        # Cheap when nothing changed.
        self.model.setup_cache(1)

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

    batch_unsupported = None  # the shipped GPT's models: `model.rows` (an hf model sets its own reason)

    def reset_rows(self, batch: int) -> None:
        self.model.setup_cache(batch)
        self.row_pos = [0] * batch

    def rollback_row(self, row: int, n_valid: int) -> None:
        self.row_pos[row] = min(self.row_pos[row], n_valid)

    def keep_rows(self, keep: list[int]) -> None:
        rows.keep_rows(self.model, keep)
        self.row_pos = [self.row_pos[i] for i in keep]

    @torch.inference_mode()
    def propose_rows(self, tokens_rows, ks, rngs, temperature):
        """`propose` for every row at once: the first pass feeds each row what its cache has not seen (ragged),
        then one pass per draft step over the rows still drafting (a row done drafting feeds nothing). Each
        row draws from its own generator in `propose`'s order, so it drafts what it would alone."""
        B, V = len(ks), self.model.config.vocab_size
        feed = [t[self.row_pos[b] :] if ks[b] else [] for b, t in enumerate(tokens_rows)]
        logits = rows.forward_rows(self.model, feed, self.row_pos[:B])  # (B, T, V)
        last = [len(f) - 1 for f in feed]
        for b, t in enumerate(tokens_rows):
            if ks[b]:
                self.row_pos[b] = len(t)
        out = [[] for _ in range(B)]
        qs = [np.empty((k, V)) if k else None for k in ks]
        for i in range(max(ks)):
            feed = [[] for _ in range(B)]
            for b in range(B):
                if i < ks[b]:
                    q = sampling.probs(logits[b, last[b]], temperature)
                    x = sampling.sample(q, rngs[b])
                    qs[b][i] = q
                    out[b].append(x)
                    if i < ks[b] - 1:  # the last draft is never fed: the target's bonus/residual follows it
                        feed[b] = [x]
            if any(feed):
                logits = rows.forward_rows(self.model, feed, self.row_pos[:B])
                for b, f in enumerate(feed):
                    if f:
                        self.row_pos[b] += 1
                        last[b] = 0
        return list(zip(out, qs))
