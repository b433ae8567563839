"""Exactness over history: does speculative sampling still draw the target's distribution? (0 yes, 1 no).

The first generated character after the prompt is drawn with each of DRAWS fixed seeds (a speculative
generation of two characters at k = 1: the first goes through the draft and the accept/reject rule), and a
chi-square test holds the counts against the target's own distribution p at the prompt. Fixed seeds make the
verdict a deterministic function of the code: it moves only when the sampler's behaviour changes, never from
run to run, unlike the total variation of fresh draws (which varies ~4x and cannot be held to a threshold).
A draft close to the target (int8) would hide a broken rule, so the drafts tested are the ones far from it.
"""

import numpy as np
import scipy.stats
import torch

import specdec

from .common import PROMPT, SEED, SMOKE, TEMPERATURE, USER, draft, encode, fix_threads, target

DRAWS = 20 if SMOKE else 800  # fixed, not scaled: the seed set is the test
ALPHA = 1e-3  # a correct sampler fails with this probability once per seed set, i.e. once per code change


def _p_value(name: str) -> float:
    """Chi-square p-value of the first speculative character's counts against the target's p."""
    fix_threads()
    model, d = target(), draft(name)
    ids = encode(PROMPT)
    with torch.inference_mode():
        logits = model(torch.tensor([ids]), 0)[0, -1].double()
    p = torch.softmax(logits / TEMPERATURE, -1).numpy()
    counts = np.zeros(len(p))
    for seed in range(SEED, SEED + DRAWS):
        out = specdec.speculative_generate(model, d, PROMPT, 2, k=1, seed=seed, temperature=TEMPERATURE)
        counts[_first_id(out)] += 1
    expected = p * DRAWS
    rare = expected < 5  # chi-square wants >= 5 expected per cell: pool the rare characters into one
    obs = np.append(counts[~rare], counts[rare].sum())
    exp = np.append(expected[~rare], expected[rare].sum())
    return float(scipy.stats.chisquare(obs, exp * obs.sum() / exp.sum()).pvalue)


def _first_id(out) -> int:
    """The id of the first generated token: the text's first character for the shipped target (every commit),
    the first of the generation's ids where the target tokenizes for itself."""
    ids = getattr(out, "ids", None)
    return int(ids[0]) if ids else encode(out.text[0])[0]


class Exactness:
    params = ["bigram", "ngram", "small", USER]
    param_names = ["draft"]
    timeout = 180

    def setup(self, name):
        self.failed = float(_p_value(name) < ALPHA)

    def track_exactness_failed(self, name):
        return self.failed

    track_exactness_failed.unit = "failed exactness tests, 0 or 1 (lower is better)"
