"""How often a tree draft's i-th child is the accepted one: the vector Sequoia's dynamic program sizes a
tree from (`trees.optimal_tree`). Measured along a real target generation, so it sits with the measurements,
above the decoding layer it drives."""

from __future__ import annotations

import numpy as np
import torch

from specdec.decoding.generate import generate
from specdec.decoding.trees import TreeSpec, accept_tree, draft_tree
from specdec.model import corpus, sampling


@torch.inference_mode()
def measure_child_acceptance(target, draft, prompt: str = "ROMEO:", chars: int = 200, width: int = 8,
                             seed: int = 0, temperature: float = 1.0) -> np.ndarray:
    """(width,) how often the i-th child tried at a node is the accepted one, along a target generation.

    The target generates `chars` characters; one uncached forward gives p after every prefix; at each
    position the draft samples `width` children without replacement and the rule walks that one level.
    Deterministic given the seed.
    """
    text = prompt + generate(target, prompt, chars, seed=seed, temperature=temperature).text
    ids = corpus.encode(text)
    p_all = sampling.probs(target(target.ids(ids))[0], temperature)  # (len, V)
    rng = np.random.default_rng(seed + 1)
    spec = TreeSpec.from_widths((width,))
    counts = np.zeros(width)
    n0 = len(corpus.encode(prompt))
    for t in range(n0, len(ids)):
        tree = draft_tree(spec, draft, ids[:t], rng, temperature)
        p = np.repeat(p_all[t - 1][None], len(tree.tokens) + 1, axis=0)  # only row 0 is read at one level
        path, _ = accept_tree(tree, p, rng)
        if path:
            counts[tree.children[0].index(path[0])] += 1
    return counts / (len(ids) - n0)
