"""Summaries of paired ratios and the speedup models.

- `summarize`: median, min-max range and a bootstrap confidence interval of the median ratio.
- `predicted_speedup`: the write-up's formula, chars per target pass / (1 + k·c).
- `expected_length`: Leviathan et al.'s E(α, k) = (1 − α^(k+1)) / (1 − α) characters per round.
- `optimal_k`: the k that maximises E(α, k) / (1 + k·c).
- `refined_speedup`: what the loop really pays per character, target-only against speculative: the verify
  pass's growth with k, the per-round and per-step work outside the models, and the actual pass and draft
  counts (which carry the per-position acceptance).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats as sstats

NOISY_RANGE = 0.10  # a min-max range wider than this fraction of the median marks a row as noisy


@dataclass(frozen=True)
class Summary:
    median: float
    min: float
    max: float
    ci_low: float  # bootstrap 95 % interval of the median
    ci_high: float
    n: int

    @property
    def spread(self) -> float:
        """(max − min) / median: the relative width of the min-max range."""
        return (self.max - self.min) / self.median if self.median else float("inf")

    @property
    def noisy(self) -> bool:
        return self.spread > NOISY_RANGE


def summarize(ratios, confidence: float = 0.95, seed: int = 0) -> Summary:
    """Median, range and a percentile-bootstrap CI of the median of `ratios` (at least one value)."""
    x = np.asarray(ratios, dtype=float)
    if x.size == 0:
        raise ValueError("summarize needs at least one ratio")
    med = float(np.median(x))
    if x.size < 3 or np.ptp(x) == 0:  # too few (or identical) values to resample: the range itself
        lo, hi = float(x.min()), float(x.max())
    else:
        res = sstats.bootstrap(
            (x,), np.median, confidence_level=confidence, n_resamples=2000, method="percentile",
            random_state=np.random.default_rng(seed),
        )
        lo, hi = float(res.confidence_interval.low), float(res.confidence_interval.high)
    return Summary(med, float(x.min()), float(x.max()), lo, hi, int(x.size))


def predicted_speedup(chars_per_pass: float, k: int, c: float) -> float:
    """The write-up's formula: what one target pass yields over what the draft calls for it cost."""
    return chars_per_pass / (1.0 + k * c)


def expected_length(alpha: float, k: int) -> float:
    """Leviathan's expected characters per round, E(α, k) = (1 − α^(k+1)) / (1 − α); k+1 at α = 1."""
    if not 0.0 <= alpha <= 1.0:
        raise ValueError(f"alpha must be in [0, 1], got {alpha}")
    if k < 0:
        raise ValueError(f"k must be >= 0, got {k}")
    if alpha == 1.0:
        return float(k + 1)
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def optimal_k(alpha: float, c: float, k_max: int = 16) -> int:
    """The k in 1..k_max maximising E(α, k) / (1 + k·c); the smallest such k on ties."""
    ks = range(1, k_max + 1)
    return max(ks, key=lambda k: (expected_length(alpha, k) / (1.0 + k * c), -k))


def refined_speedup(
    chars: int,
    target_passes: int,
    drafted: int,
    step_us: float,
    verify_us: float,
    draft_char_us: float,
) -> float:
    """Predicted speedup from what each loop pays, in the same time unit throughout.

    step_us: one character of target-only generation (a single-position pass plus its sampling).
    verify_us: one speculative round without the draft (the (k+1)-position pass, p, the rule, bookkeeping).
    draft_char_us: one drafted character as `propose` pays it.
    Target-only costs chars·step; speculative costs passes·verify + drafted·draft_char.
    """
    spec = target_passes * verify_us + drafted * draft_char_us
    return chars * step_us / spec


def refined_terms(chars: int, target_passes: int, drafted: int, step_us: float, verify_us: float,
                  draft_char_us: float) -> dict:
    """Shares of the speculative time: verify passes vs draft characters (for explaining a miss)."""
    spec = target_passes * verify_us + drafted * draft_char_us
    return {"verify_share": target_passes * verify_us / spec, "draft_share": drafted * draft_char_us / spec,
            "target_only_us": chars * step_us, "speculative_us": spec}
