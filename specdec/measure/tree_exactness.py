"""Exactness of tree rounds, by measurement: `exactness`'s checks for a draft that drafts a token tree.

- First character (`verify_tree`): each draw drafts a fresh tree's first level and walks it with the real
  `accept_tree`; the counts are compared with the target's p by chi-square, TV beside the baseline's.
- First three characters (`tree_generation_p_values`): whole tree generations against the target's exact law of
  the first three characters (`first_three_law`), which needs a target whose tokens are characters.

Verdicts as in `exactness.verdicts`.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.decoding import tree_draft, tree_walk, trees
from specdec.decoding.drafts import Draft
from specdec.decoding.generate import speculative_generate
from specdec.measure.exactness import (VERIFY_PROMPT, baseline_tv, target_distribution, total_variation,
                                       verdicts)
from specdec.measure.stats import chi_square_p
from specdec.model import sampling
from specdec.model.gpt import GPT
from specdec.model.protocol import units


@torch.inference_mode()
def tree_first_char_counts(target: GPT, draft: Draft, spec: trees.TreeSpec, prompt: str = VERIFY_PROMPT,
                           samples: int = 20_000, seed: int = 0, temperature: float = 1.0
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Counts (V,) of the first character over `samples` tree rounds at `prompt`, and the target's p.

    Each draw drafts a fresh tree's first level (the real `draft_tree`) and walks it with the real
    `accept_tree`; the first character is the accepted child or the root's residual sample, so deeper levels
    and the nodes' own rows of p cannot change it and are not drafted (rows past the root repeat p).
    """
    tokens = target.tokenize(prompt)
    p = target_distribution(target, prompt, temperature)
    level = spec.limit(spec.budget, 1)
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(p))
    for _ in range(samples):
        tree = tree_draft.draft_tree(level, draft, tokens, rng, temperature)
        path, nxt = tree_walk.accept_tree(tree, np.broadcast_to(p, (len(tree.tokens) + 1, len(p))), rng)
        counts[tree.tokens[path[0]] if path else nxt] += 1
    return counts, p


@torch.inference_mode()
def first_three_law(target: GPT, prompt: str, samples: int, min_expected: float = 20):
    """The target's exact law of the first three characters after `prompt`, as chi-square categories.

    Returns (p₁ (V,), law over categories, category(text) -> index). Pairs (a, b) expected at least
    `min_expected` times in `samples` draws get one category per third character (one batched forward gives
    their p(c | a, b)); every other pair is one category, which `chi_square_p` pools where sparse.
    Categories are read off the generated text, so the target's tokens must be characters (`_characters_only`).
    """
    _characters_only(target, "the first-three-characters law")
    ids = target.tokenize(prompt)
    V = target.config.vocab_size
    p1 = target_distribution(target, prompt)
    p2 = sampling.probs(target(torch.tensor([ids + [a] for a in range(V)], device=target.device))[:, -1], 1.0)  # (V, V) p(b | a)
    joint2 = p1[:, None] * p2
    pairs = [(int(a), int(b)) for a, b in np.argwhere(joint2 * samples >= min_expected)]
    p3 = sampling.probs(target(torch.tensor([ids + list(ab) for ab in pairs], device=target.device))[:, -1], 1.0) if pairs else []
    detail = {ab: i for i, ab in enumerate(pairs)}
    rest = joint2.ravel().copy()
    for a, b in pairs:
        rest[a * V + b] = 0.0  # those pairs are split by their third character above
    law = np.concatenate([joint2[a, b] * p3[i] for i, (a, b) in enumerate(pairs)] + [rest])

    def category(text: str) -> int:
        a, b, c = target.tokenize(text[:3])
        return detail[(a, b)] * V + c if (a, b) in detail else len(pairs) * V + a * V + b

    return p1, law, category


def _characters_only(target, what: str) -> None:
    """A check that reads outcomes off generated text needs one token per character: a subword target's text
    cannot be cut back into the tokens it was generated as (retokenizing may merge them differently)."""
    if units(target) != "characters":
        raise ValueError(f"{what} reads tokens off generated text and needs a target whose tokens are characters; "
                         f"{type(target).__name__} generates {units(target)}")


def tree_generation_p_values(target: GPT, draft: Draft, spec: trees.TreeSpec, samples: int, seed: int = 0,
                             prompt: str = VERIFY_PROMPT) -> tuple[float, float]:
    """Chi-square p-values of the first character and of the first three jointly, over `samples` seeds of
    `speculative_generate(..., chars=3, tree=spec)` at temperature 1, against the target's exact law."""
    p1, law, category = first_three_law(target, prompt, samples)
    first, joint = np.zeros(len(p1)), np.zeros(len(law))
    for s in range(seed, seed + samples):
        text = speculative_generate(target, draft, prompt, 3, k=1, seed=s, tree=spec).text
        first[target.tokenize(text[0])[0]] += 1
        joint[category(text)] += 1
    return chi_square_p(first, p1), chi_square_p(joint, law)


def verify_tree(target: GPT, drafts: dict[str, Draft], spec: trees.TreeSpec, samples: int = 20_000,
                seed: int = 0, prompt: str = VERIFY_PROMPT, joint_samples: int = 0) -> list[dict]:
    """`verify`'s rows for a tree shape; joint_samples > 0 adds the first-three-characters test."""
    rows = []
    for name, draft in drafts.items():
        counts, p = tree_first_char_counts(target, draft, spec, prompt, samples, seed)
        base = baseline_tv(p, samples, seed)
        row = {"draft": name, "tree": str(spec), "samples": samples, "tv": total_variation(counts, p),
               "baseline_tv": float(np.median(base)), "baseline_tv_max": float(base.max()),
               "p_value": chi_square_p(counts, p), "joint_samples": joint_samples, "joint_p_value": None}
        if joint_samples:
            row["joint_p_value"] = tree_generation_p_values(target, draft, spec, joint_samples, seed, prompt)[1]
        rows.append(row)
    return verdicts(rows)
