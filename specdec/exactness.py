"""Exactness by measurement: total variation and chi-square of speculative draws against the target.

At a fixed context the first generated character is drawn `samples` times through the real pipeline: the
draft proposes it (its own `propose`, its own q), the target's distribution at that position comes from the
same verify pass the generation loop runs, and `sampling.accept_reject` -- looked up at call time, so a test
that breaks it breaks this too -- decides between the draft and a residual sample. The empirical distribution
is compared with the target's p by total variation, against the TV of the same number of draws taken directly
from p (sampling error alone), and by a chi-square goodness-of-fit test.
"""

from __future__ import annotations

import numpy as np
import torch
from scipy import stats as sstats

from . import corpus, sampling, trees
from .drafts import Draft
from .model import GPT

VERIFY_PROMPT = "ROMEO:\nWhat light through yonder window breaks? It is the"
BASELINE_REPEATS = 20  # independent direct-from-p draws that give the baseline TV its median and range


def total_variation(counts: np.ndarray, p: np.ndarray) -> float:
    """½ Σ |p̂ − p| with p̂ = counts / counts.sum()."""
    return 0.5 * float(np.abs(counts / counts.sum() - p).sum())


def chi_square_p(counts: np.ndarray, p: np.ndarray) -> float:
    """Goodness-of-fit p-value of `counts` against p, with sparse cells pooled.

    Categories expected fewer than 5 times are merged into one cell so the chi-square approximation holds
    (if that pooled cell is itself under 5, it joins the smallest remaining one).
    """
    n = counts.sum()
    expected = p * n
    small = expected < 5
    f_obs = list(counts[~small])
    f_exp = list(expected[~small])
    if small.any():
        f_obs.append(counts[small].sum())
        f_exp.append(expected[small].sum())
        if f_exp[-1] < 5 and len(f_exp) > 1:
            j = int(np.argmin(f_exp[:-1]))
            f_obs[j] += f_obs.pop()
            f_exp[j] += f_exp.pop()
    f_obs, f_exp = np.asarray(f_obs, float), np.asarray(f_exp, float)
    f_exp *= f_obs.sum() / f_exp.sum()  # remove float drift so scipy's sum check passes
    return float(sstats.chisquare(f_obs, f_exp).pvalue)


def baseline_tv(p: np.ndarray, samples: int, seed: int, repeats: int = BASELINE_REPEATS) -> np.ndarray:
    """TVs of `repeats` sets of `samples` draws taken directly from p: what sampling error alone gives."""
    rng = np.random.default_rng(seed + 10_000)
    return np.array([total_variation(rng.multinomial(samples, p / p.sum()).astype(float), p) for _ in range(repeats)])


@torch.inference_mode()
def target_distribution(target: GPT, prompt: str, temperature: float = 1.0) -> np.ndarray:
    """The target's p for the first character after `prompt`, from a fresh prefill."""
    target.setup_cache(1)
    logits = target(torch.tensor([corpus.encode(prompt)]), 0)[0, -1]
    return sampling.probs(logits, temperature)


@torch.inference_mode()
def first_char_counts(
    target: GPT,
    draft: Draft,
    prompt: str = VERIFY_PROMPT,
    k: int = 4,
    samples: int = 20_000,
    seed: int = 0,
    temperature: float = 1.0,
) -> tuple[np.ndarray, np.ndarray]:
    """Counts (V,) of the first generated character over `samples` speculative rounds, and the target's p.

    The draft's first proposal and its q are deterministic functions of the context and the draft's RNG, so
    one `propose` gives q₁ and each draw samples its own d₁ from q₁ exactly as `propose` does; the rest of the
    round (positions 2..k) cannot change the first character and is not repeated.
    """
    tokens = corpus.encode(prompt)
    rng = np.random.default_rng(seed)
    draft.reset()
    drafted, q = draft.propose(tokens, k, rng, temperature)
    draft.reset()
    q1 = q[:1]  # (1, V)
    # The verify pass of round one: prompt + k drafts at offset 0; its first scored position is p₁.
    target.setup_cache(1)
    logits = target(torch.tensor([tokens + drafted]), 0)[0, len(tokens) - 1 : len(tokens) + 1]
    p = sampling.probs(logits, temperature)  # (2, V): p₁ and the next position (bonus when d₁ accepted)
    counts = np.zeros(p.shape[-1])
    for _ in range(samples):
        d1 = sampling.sample(q1[0], rng)
        n_acc, nxt = sampling.accept_reject(p, q1, [d1], rng)
        counts[d1 if n_acc else nxt] += 1
    return counts, p[0]


def verify(
    target: GPT,
    drafts: dict[str, Draft],
    k: int = 4,
    samples: int = 20_000,
    seed: int = 0,
    prompt: str = VERIFY_PROMPT,
    temperature: float = 1.0,
) -> list[dict]:
    """One row per draft: TV, the same-count baseline TV (median and max of repeats), chi-square p-value."""
    rows = []
    for name, draft in drafts.items():
        counts, p = first_char_counts(target, draft, prompt, k, samples, seed, temperature)
        base = baseline_tv(p, samples, seed)
        rows.append(
            {
                "draft": name,
                "k": k,
                "samples": samples,
                "tv": total_variation(counts, p),
                "baseline_tv": float(np.median(base)),
                "baseline_tv_min": float(base.min()),
                "baseline_tv_max": float(base.max()),
                "p_value": chi_square_p(counts, p),
            }
        )
    return rows


def target_row(target: GPT, samples: int = 20_000, seed: int = 0, prompt: str = VERIFY_PROMPT) -> dict:
    """The write-up's baseline line, "sampling the target": TV of draws taken straight from p.

    Reported as the median and range of `BASELINE_REPEATS` independent sets (a single set's p-value is just
    one uniform draw, and would read as a verdict it is not).
    """
    p = target_distribution(target, prompt)
    base = baseline_tv(p, samples, seed)
    return {"draft": "target", "k": 0, "samples": samples, "tv": float(np.median(base)),
            "baseline_tv": float(np.median(base)), "baseline_tv_min": float(base.min()),
            "baseline_tv_max": float(base.max()), "p_value": None}


# --- trees -------------------------------------------------------------------------------------------------


@torch.inference_mode()
def tree_first_char_counts(target: GPT, draft: Draft, spec: trees.TreeSpec, prompt: str = VERIFY_PROMPT,
                           samples: int = 20_000, seed: int = 0, temperature: float = 1.0
                           ) -> tuple[np.ndarray, np.ndarray]:
    """Counts (V,) of the first character over `samples` tree rounds at `prompt`, and the target's p.

    Each draw drafts a fresh tree's first level (the real `draft_tree`) and walks it with the real
    `accept_tree`; the first character is the accepted child or the root's residual sample, so deeper levels
    and the nodes' own rows of p cannot change it and are not drafted (rows past the root repeat p).
    """
    tokens = corpus.encode(prompt)
    p = target_distribution(target, prompt, temperature)
    level = spec.limit(spec.budget, 1)
    rng = np.random.default_rng(seed)
    counts = np.zeros(len(p))
    for _ in range(samples):
        tree = trees.draft_tree(level, draft, tokens, rng, temperature)
        path, nxt = trees.accept_tree(tree, np.broadcast_to(p, (len(tree.tokens) + 1, len(p))), rng)
        counts[tree.tokens[path[0]] if path else nxt] += 1
    return counts, p


@torch.inference_mode()
def first_three_law(target: GPT, prompt: str, samples: int, min_expected: float = 20):
    """The target's exact law of the first three characters after `prompt`, as chi-square categories.

    Returns (p₁ (V,), law over categories, category(text) -> index). Pairs (a, b) expected at least
    `min_expected` times in `samples` draws get one category per third character (one batched forward gives
    their p(c | a, b)); every other pair is one category, which `chi_square_p` pools where sparse.
    """
    ids = corpus.encode(prompt)
    V = target.config.vocab_size
    p1 = target_distribution(target, prompt)
    p2 = sampling.probs(target(torch.tensor([ids + [a] for a in range(V)]))[:, -1], 1.0)  # (V, V) p(b | a)
    joint2 = p1[:, None] * p2
    pairs = [(int(a), int(b)) for a, b in np.argwhere(joint2 * samples >= min_expected)]
    p3 = sampling.probs(target(torch.tensor([ids + list(ab) for ab in pairs]))[:, -1], 1.0) if pairs else []
    detail = {ab: i for i, ab in enumerate(pairs)}
    rest = joint2.ravel().copy()
    for a, b in pairs:
        rest[a * V + b] = 0.0  # those pairs are split by their third character above
    law = np.concatenate([joint2[a, b] * p3[i] for i, (a, b) in enumerate(pairs)] + [rest])

    def category(text: str) -> int:
        a, b, c = corpus.encode(text[:3])
        return detail[(a, b)] * V + c if (a, b) in detail else len(pairs) * V + a * V + b

    return p1, law, category


def tree_generation_p_values(target: GPT, draft: Draft, spec: trees.TreeSpec, samples: int, seed: int = 0,
                             prompt: str = VERIFY_PROMPT) -> tuple[float, float]:
    """Chi-square p-values of the first character and of the first three jointly, over `samples` seeds of
    `speculative_generate(..., chars=3, tree=spec)` at temperature 1, against the target's exact law."""
    from .decode import speculative_generate  # decode imports trees, which this module also needs

    p1, law, category = first_three_law(target, prompt, samples)
    first, joint = np.zeros(len(p1)), np.zeros(len(law))
    for s in range(seed, seed + samples):
        text = speculative_generate(target, draft, prompt, 3, k=1, seed=s, tree=spec).text
        first[corpus.encode(text[0])[0]] += 1
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
    return rows
