"""The drafts the llama.cpp engine hands to llama-cpp-python, and the wrapper that counts what they drafted and
what the target kept.

llama-cpp-python's `Llama.generate` calls `draft_model(input_ids)` after each round with the whole sequence so
far (the prompt, every emitted token, the one just sampled last), evaluates that token plus the proposed ones in
one target pass, then samples the target at each of those positions in turn: it yields the sampled token and
goes on while it equals the draft's token at that position, so a round yields the accepted drafts and then one
token of the target's own (the correction at the first mismatch, or the bonus when all were kept). The library
keeps no count of any of this, so `CountingDraft` derives it from what it proposed and what the caller saw
generated (`observe`, once per yielded token), the way specdec's own loop counts (`GenerationStats`).
"""

from __future__ import annotations

import numpy as np
from llama_cpp.llama_speculative import LlamaDraftModel, LlamaPromptLookupDecoding

EMPTY = np.array([], dtype=np.intc)


class GreedyModelDraft(LlamaDraftModel):
    """A draft GGUF run greedily for k tokens, as llama.cpp's own speculative examples draft.

    It keeps its KV cache from one call to the next within a generation: `Llama.generate(reset=True)` compares
    the sequence it is given with what it evaluated before and evaluates only the new suffix (the tokens the
    target emitted since), after dropping the cache past the common prefix (the drafts the target rejected).
    `reset` forgets everything, so that each generation pays its own prefill.
    """

    def __init__(self, llama, k: int = 4):
        self.llama = llama
        self.k = k

    def reset(self) -> None:
        self.llama.reset()

    def __call__(self, input_ids: np.ndarray, /, **kwargs) -> np.ndarray:
        if self.k < 1:
            return EMPTY
        out = []
        gen = self.llama.generate(list(input_ids), temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0)
        try:
            for tok in gen:
                out.append(tok)
                if len(out) == self.k:
                    break
        finally:
            gen.close()
        return np.array(out, dtype=np.intc)


def prompt_lookup(k: int) -> LlamaDraftModel:
    """llama-cpp-python's own prompt lookup (n-grams of up to 2 tokens matched in the sequence so far)."""
    return LlamaPromptLookupDecoding(num_pred_tokens=k)


class CountingDraft(LlamaDraftModel):
    """Wraps a draft: proposes at most what the generation still needs minus one (so that no round drafts past
    the end, as in specdec's loop, and every round is settled by the last token), and counts rounds, drafted
    and accepted tokens and rounds by accepted count.

    `begin(n_prompt, max_new, k)` before each generation; `observe(token)` for each token the target yields.
    """

    def __init__(self, inner: LlamaDraftModel):
        self.inner = inner
        self.begin(0, 0, 1)

    def begin(self, n_prompt: int, max_new: int, k: int) -> None:
        self.end = n_prompt + max_new
        self.k = k
        self.drafted = 0
        self.accepted = 0
        self.per_position = [0] * (k + 1)
        self.pending: list[int] | None = None  # the open round's drafts not yet matched; None: no round open
        self.n_acc = 0

    def __call__(self, input_ids: np.ndarray, /, **kwargs) -> np.ndarray:
        if self.pending is not None:  # the library asks again only after the round's last token was yielded
            raise RuntimeError("llama-cpp-python asked for a draft before the last round was settled")
        n = min(self.k, self.end - len(input_ids) - 1)
        if n <= 0:
            return EMPTY
        drafts = np.asarray(self.inner(input_ids), dtype=np.intc)[:n]
        if len(drafts):
            self.pending, self.n_acc = [int(t) for t in drafts], 0
            self.drafted += len(drafts)
        return drafts

    def observe(self, token: int) -> None:
        """One token the target yielded: a kept draft, or the round's own token that settles it."""
        if self.pending is None:
            return
        if self.pending and token == self.pending[0]:
            self.pending.pop(0)
            self.n_acc += 1
            return
        self.accepted += self.n_acc
        self.per_position[self.n_acc] += 1
        self.pending = None
