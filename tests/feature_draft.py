"""A user's draft that reads the target, as a module's source (tests write it into a folder of their own and name
it `featdraft:make`): the target's own LM head on the last state it was handed (Medusa head 0 as the identity),
written against specdec's public API only, over the shipped target or a Hugging Face one."""

SOURCE = '''"""A user's draft that reads the target: the target's own LM head on the last state it was handed (Medusa head
0 as the identity), written against specdec's public API only."""
import numpy as np

import specdec


class HeadZero(specdec.Draft):
    name = "head-zero"

    def __init__(self, w):
        self.w = w.detach().float().numpy()
        self.last = None

    def reset(self):
        self.last = None

    def rollback(self, n_valid):
        pass

    def take_features(self, features, pos, row=0):
        self.last = features[-1].detach().float().numpy().copy()

    def propose(self, tokens, k, rng, temperature):
        logits = self.w @ self.last
        q = np.exp(logits - logits.max())
        q /= q.sum()
        ids = [int(rng.choice(len(q), p=q)) for _ in range(k)]
        return ids, np.tile(q, (k, 1))

    def weight_bytes(self):
        return 0


def make(target):
    model = getattr(target, "model", None)  # a Hugging Face target, else the shipped GPT
    return HeadZero(model.get_output_embeddings().weight if model is not None else target.lm_head.weight)
'''
