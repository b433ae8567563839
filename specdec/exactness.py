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

from . import corpus, sampling
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
