"""A minimal draft that reads the target's features, for the tests of the feature protocol.

`HeadZeroDraft` is "Medusa head 0 as the identity": it proposes every one of its k drafts from the target's
own LM head applied to the last feature it was handed (the state that predicted the pending token), so its q
is a real distribution and the rule stays exact whatever it proposes. It records every feature it is handed,
per sequence, so a test can hold them against a full-window forward; and it asserts the loop's contract: it is
never asked to propose before it holds the feature of the position just before the pending token.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.decoding.drafts import Draft
from specdec.model import sampling


class HeadZeroDraft(Draft):
    name = "head-zero"
    batch_unsupported = None

    def __init__(self, head_weight: torch.Tensor):
        self.w = head_weight.detach().float().cpu()  # (V, C): the target's LM head
        self.reset()

    def reset(self) -> None:
        self.sequences: list[dict[int, np.ndarray]] = [{}]  # every sequence's handed features: position -> (C,)
        self.rows = list(self.sequences)  # the active rows, in row order
        self.calls = 0  # take_features calls

    def reset_rows(self, batch: int) -> None:
        self.sequences = [{} for _ in range(batch)]
        self.rows = list(self.sequences)

    def keep_rows(self, keep: list[int]) -> None:
        self.rows = [self.rows[i] for i in keep]

    def take_features(self, features: torch.Tensor, pos: int, row: int = 0) -> None:
        self.calls += 1
        held = self.rows[row]
        for i, f in enumerate(features.numpy(force=True)):  # a copy: the tensor is valid during the call only
            assert pos + i not in held, f"position {pos + i} handed twice"
            held[pos + i] = f.copy()

    def _propose(self, held: dict, tokens: list[int], k: int, rng: np.random.Generator, temperature: float):
        last = len(tokens) - 2  # the position whose state predicted the pending token tokens[-1]
        assert last in held, f"asked to propose after {len(tokens)} tokens without the feature at {last}"
        logits = torch.from_numpy(held[last]) @ self.w.T  # the target's own head on its own state
        q = sampling.probs(logits, temperature)
        out = [sampling.sample(q, rng) for _ in range(k)]
        return out, np.tile(q, (k, 1))

    def propose(self, tokens, k, rng, temperature):
        return self._propose(self.rows[0], tokens, k, rng, temperature)

    def propose_rows(self, rows, ks, rngs, temperature):
        return [self._propose(self.rows[b], t, k, rng, temperature) if k > 0 else ([], None)
                for b, (t, k, rng) in enumerate(zip(rows, ks, rngs))]

    def weight_bytes(self) -> int:
        return 0  # the target's own head: nothing of its own
