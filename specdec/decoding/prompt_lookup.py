"""Prompt lookup: draft by copying what followed an earlier occurrence of the text's last n-gram.

The rule is Hugging Face transformers' `prompt_lookup_num_tokens` (its `PromptLookupCandidateGenerator`):
for n from `max_ngram` (3) down to 1, find the earliest place in the sequence so far (the prompt and
everything generated) where its last n tokens occurred before, and propose the tokens that followed it, up to
k and never past the end of the sequence; the longest n that has such a continuation wins. Nothing matches:
nothing is proposed, and the round is the target's single pass.

It needs no model and no corpus, only token ids, so it works for every target. The proposal is a
deterministic function of the sequence, so q is one-hot on each proposed token; the accept/reject rule is
exact for any q the drafts were really drawn from, and a point mass is one (a rejected token's residual
max(0, p - q) is then p without that token).
"""

from __future__ import annotations

import numpy as np

from specdec.decoding.drafts import Draft
from specdec.util.errors import InputError

MAX_NGRAM = 3  # transformers' default max_matching_ngram_size


def lookup(tokens: list[int], k: int, max_ngram: int = MAX_NGRAM) -> list[int]:
    """Up to k tokens that followed the earliest earlier occurrence of the longest matching tail n-gram."""
    L = len(tokens)
    if k < 1 or L < 2:
        return []
    seq = np.asarray(tokens)
    for n in range(min(max_ngram, L - 1), 0, -1):
        # starts i < L - n of windows equal to the last n tokens; the window at L - n is the tail itself
        hit = np.ones(L - n, dtype=bool)
        for j in range(n):
            hit &= seq[j : L - n + j] == seq[L - n + j]
        starts = np.flatnonzero(hit)
        if len(starts):
            start = int(starts[0]) + n  # the earliest match always has a continuation (it ends before L)
            return tokens[start : start + k]
    return []


class PromptLookupDraft(Draft):
    """Proposes by `lookup` over the sequence so far; q one-hot. No state, no weights."""

    name = "prompt-lookup"
    batch_unsupported = None  # no state: `propose_rows` looks each row up in turn

    def __init__(self, vocab_size: int, max_ngram: int = MAX_NGRAM):
        if not 1 <= max_ngram <= 16:
            raise InputError(f"prompt lookup's max_ngram must be between 1 and 16, got {max_ngram}")
        self.vocab_size = int(vocab_size)
        self.max_ngram = max_ngram

    def propose(self, tokens, k, rng, temperature):
        """At most k tokens (fewer, or none, where the sequence has no continuation for them); rng unused."""
        out = lookup(tokens, k, self.max_ngram)
        q = np.zeros((len(out), self.vocab_size))
        q[np.arange(len(out)), out] = 1.0
        return out, q

    def weight_bytes(self) -> int:
        return 0
