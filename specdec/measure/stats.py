"""Summaries of paired ratios, the interval a re-run would land in, and the speedup models.

- `summarize`: median, min-max range and the 95 % interval for the median an independent re-run measures.
- `rerun_interval`: that interval. Consecutive pairs on a shared machine are not independent (load comes and
  goes over seconds to minutes), so the median is resampled by a moving-block bootstrap over the pairs in the
  order they ran, and the interval is widened by √2: a re-run's median carries its own error as well as ours.
- `drift`: how far the machine moves a ratio between stretches of one run (τ), pooled over a report's rows: a
  re-run happens at another time, so its interval carries τ beside the pairs' own noise.
- `predicted_speedup`: the write-up's formula, chars per target pass / (1 + k·c).
- `expected_length`: Leviathan et al.'s E(α, k) = (1 − α^(k+1)) / (1 − α) characters per round.
- `acceptance_alpha`: α as Leviathan defines it (a per-position acceptance probability), estimated by maximum
  likelihood from the rounds' accepted counts, with a goodness-of-fit test of the geometric model behind E.
- `optimal_k`: the k that maximises E(α, k) / (1 + k·c).
- `refined_speedup`: what the loop really pays per character, target-only against speculative: the verify
  pass's growth with k, the per-round and per-step work outside the models, each generation's first pass over
  its whole prompt, and the actual pass and draft counts (which carry the per-position acceptance).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

RESAMPLES = 2000  # bootstrap resamples behind every interval
# the fewest values a re-run interval is a 95 % interval for: below it there is nothing to resample, and what
# `rerun_interval` gives is the values' range widened by √2, with no stated confidence (no verdict rests on it)
MIN_INTERVAL = 3


@dataclass(frozen=True)
class Summary:
    estimate: float  # the figure: the median of the values, or for paired times the ratio of their totals
    median: float  # median of the values (of the per-pair ratios)
    min: float
    max: float
    ci_low: float  # 95 % interval for the estimate an independent re-run measures (see rerun_interval)
    ci_high: float
    n: int

    @property
    def width(self) -> float:
        """(ci_high − ci_low) / median: the interval's relative width (what "noisy" is judged by); infinite
        below MIN_INTERVAL values, where there is nothing to resample."""
        if self.n < MIN_INTERVAL or not self.estimate:
            return float("inf")
        return (self.ci_high - self.ci_low) / self.estimate


def _block_length(n: int) -> int:
    return max(1, int(n ** (1 / 3) + 1e-9))  # 1 up to 7 values, 2 up to 26, 3 up to 63, ...


def _block_indices(n: int, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """(resamples, n) indices of moving-block bootstrap series over n values in the order they were measured.

    Blocks of b = ⌊n^(1/3)⌋ consecutive values (Künsch 1989; Hall, Horowitz and Jing 1995 for the rate)
    keep the short-range correlation of neighbouring pairs inside each resampled series.
    """
    b = _block_length(n)
    starts = rng.integers(0, n - b + 1, size=(resamples, -(-n // b)))
    return (starts[:, :, None] + np.arange(b)).reshape(resamples, -1)[:, :n]


def _median(x: np.ndarray) -> np.ndarray:
    return np.median(x, axis=-1)


def ratio_of_totals(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Σa / Σb along the last axis: with a = target-only and b = speculative times, how much faster the whole
    set of runs went. The report summarises a workload with it: a user generates the whole workload, and its
    time is what they wait for. Every item generates the same number of characters, so target-only times are
    near equal and no item dominates the sums."""
    return np.sum(a, axis=-1) / np.sum(b, axis=-1)


def rerun_interval(values, confidence: float = 0.95, seed: int = 0, statistic=_median) -> tuple[float, float]:
    """Interval that an independent re-run's `statistic` falls in with probability ~`confidence`.

    values: one array (or a tuple of equally long arrays, e.g. paired times) in the order measured;
    statistic maps them, resampled along the last axis, to one figure per resample (default: the median).
    The interval is estimate ± t · √2 · SE: SE is the standard deviation of the statistic over moving-block
    bootstrap resamples (blocks keep neighbouring pairs' correlation); √2 because a re-run's figure has an
    error of its own, as large as ours; t is Student's quantile with (blocks − 1) degrees of freedom, which
    widens the interval where a few blocks give a rough SE. With fewer than MIN_INTERVAL values there is
    nothing to resample: the statistic's range over the single values, widened by √2 about the estimate. That
    is a range, not a 95 % interval: show it as one only with that said, and decide nothing on it.
    """
    cols = tuple(np.asarray(v, dtype=float) for v in (values if isinstance(values, tuple) else (values,)))
    n = cols[0].size
    if n == 0:
        raise ValueError("an interval needs at least one value")
    est = float(statistic(*cols))
    r = math.sqrt(2)
    if n < MIN_INTERVAL:
        each = statistic(*(c[:, None] for c in cols))  # the statistic of each value alone
        return est - r * (est - float(np.min(each))), est + r * (float(np.max(each)) - est)
    idx = _block_indices(n, np.random.default_rng(seed), RESAMPLES)
    se = float(np.std(statistic(*(c[idx] for c in cols)), ddof=1))
    from scipy import stats as sstats  # imported where used: `import specdec` stays quick
    t = float(sstats.t.ppf(0.5 + confidence / 2, df=max(1.0, n / _block_length(n) - 1)))
    return est - t * r * se, est + t * r * se


def summarize(values, confidence: float = 0.95, seed: int = 0) -> Summary:
    """Median, range and the re-run interval of `values` (at least one), given in the order measured."""
    x = np.asarray(values, dtype=float)
    if x.size == 0:
        raise ValueError("summarize needs at least one value")
    lo, hi = rerun_interval(x, confidence, seed)
    med = float(np.median(x))
    return Summary(med, med, float(x.min()), float(x.max()), lo, hi, int(x.size))


def summarize_pairs(a, b, confidence: float = 0.95, seed: int = 0) -> Summary:
    """Paired times a (e.g. target-only) and b (speculative), in the order measured: the ratio of their
    totals Σa/Σb as the estimate, with its re-run interval; median and range of the per-pair ratios a/b."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.size == 0 or a.size != b.size:
        raise ValueError(f"summarize_pairs needs equally many times on both sides, got {a.size} and {b.size}")
    r = a / b
    lo, hi = rerun_interval((a, b), confidence, seed, statistic=ratio_of_totals)
    return Summary(float(ratio_of_totals(a, b)), float(np.median(r)), float(r.min()), float(r.max()), lo, hi,
                   int(a.size))


def drift(series: list[np.ndarray], min_pairs: int = 4) -> tuple[float, int]:
    """τ, the spread a ratio picks up between two stretches of time beyond its pairs' own noise, and the
    number of rows it was pooled over.

    series: per row, the log per-pair ratios in the order measured (with what the row's prompts alone explain
    taken out). Each row with at least `min_pairs` is split into its first and second half: the difference d of
    the halves' means has E[d²] = v₁ + v₂ + τ², v the halves' sampling variances (var / n), when the machine's
    state shifts the ratio by τ (one standard deviation, log scale) from one stretch to the next. τ² is the
    mean over rows of d² − v₁ − v₂ (a method-of-moments random-effects estimate, as DerSimonian and Laird's),
    floored at 0; 0 with no row long enough. Rows are pooled because a row's handful of pairs cannot tell τ
    from noise, while the machine's state shifts every row.
    """
    terms = []
    for x in series:
        x = np.asarray(x, dtype=float)
        if x.size < max(4, min_pairs):
            continue
        h = x.size // 2
        a, b = x[:h], x[h:]
        terms.append((a.mean() - b.mean()) ** 2 - a.var(ddof=1) / a.size - b.var(ddof=1) / b.size)
    if not terms:
        return 0.0, 0
    return math.sqrt(max(0.0, float(np.mean(terms)))), len(terms)


def with_drift(s: Summary, tau: float, confidence: float = 0.95) -> Summary:
    """s with its re-run interval widened for drift: each side's half-width h becomes √(h² + (z·τ·estimate)²),
    z the normal quantile (τ is pooled over many rows, so its own error is small)."""
    if tau <= 0 or not math.isfinite(s.ci_low) or not math.isfinite(s.ci_high):
        return s
    from scipy import stats as sstats  # imported where used: `import specdec` stays quick
    extra = float(sstats.norm.ppf(0.5 + confidence / 2)) * tau * s.estimate
    return Summary(s.estimate, s.median, s.min, s.max, s.estimate - math.hypot(s.estimate - s.ci_low, extra),
                   s.estimate + math.hypot(s.ci_high - s.estimate, extra), s.n)


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


@dataclass(frozen=True)
class AlphaFit:
    alpha: float  # maximum-likelihood per-position acceptance probability
    p_value: float | None  # chi-square goodness of fit of the rounds' accepted counts to the geometric model
    bunched: bool  # more fully accepted rounds than the model allows, and the fit rejected (p < BUNCHED_P)


BUNCHED_P = 0.01


def acceptance_alpha(accepted_per_position: list[int], k: int) -> AlphaFit:
    """α from a histogram of rounds by accepted count 0..k, under Leviathan's model.

    The model: each drafted position is accepted with probability α independently, and a round stops at its
    first rejection, so P(n accepted) = αⁿ(1 − α) for n < k and αᵏ for n = k. Its likelihood is
    α^A (1 − α)^R with A the accepted drafts and R the rounds that ended in a rejection, maximised at
    α = A / (A + R). (accepted / drafted also counts the drafts thrown away after a rejection, which the
    model never scores; with it E(α, k) can only fall below the measured chars per pass.)
    The fit is tested by chi-square (cells expected under 5 pooled); acceptance is called bunched only when
    that test rejects the model and the fully accepted rounds are more than it predicts.
    """
    h = np.asarray(accepted_per_position[: k + 1], dtype=float)
    rounds = h.sum()
    if rounds == 0:
        return AlphaFit(0.0, None, False)
    accepted = float(np.dot(np.arange(k + 1), h))
    rejected = float(h[:k].sum())
    alpha = accepted / (accepted + rejected) if accepted + rejected else 0.0
    if rejected == 0 or accepted == 0:  # every round alike: nothing to test
        return AlphaFit(alpha, None, False)
    model = np.append(alpha ** np.arange(k) * (1 - alpha), alpha**k)
    # pooling needs at least two cells expected 5 times or more to leave a test with a degree of freedom
    p = chi_square_p(h, model) if (model * rounds >= 5).sum() >= 2 else None
    bunched = p is not None and p < BUNCHED_P and h[k] > rounds * model[k]
    return AlphaFit(alpha, p, bunched)


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
    runs: int = 0,
    first_step_us: float = 0.0,
    first_round_us: float = 0.0,
    first_drafted: float = 0.0,
) -> float:
    """Predicted speedup from what each loop pays, in the same time unit throughout.

    step_us: one character of target-only generation (a single-position pass plus its sampling).
    verify_us: one speculative round without the draft (the (k+1)-position pass, p, the rule, bookkeeping).
    draft_char_us: one drafted character as `propose` pays it.
    Target-only costs chars·step; speculative costs passes·verify + drafted·draft_char.
    runs > 0: the counts cover that many generations, and each one's first step and first round are priced
    apart: they run over the whole prompt (first_step_us; first_round_us, its first_drafted draft characters
    included) instead of one pending token.
    """
    return refined_terms(chars, target_passes, drafted, step_us, verify_us, draft_char_us, runs, first_step_us,
                         first_round_us, first_drafted)["speedup"]


def refined_terms(chars: int, target_passes: int, drafted: int, step_us: float, verify_us: float,
                  draft_char_us: float, runs: int = 0, first_step_us: float = 0.0, first_round_us: float = 0.0,
                  first_drafted: float = 0.0) -> dict:
    """`refined_speedup`'s two sides (µs) and the speculative side's shares -- verify passes, drafted
    characters, first rounds -- for explaining a miss."""
    verify = (target_passes - runs) * verify_us
    draft = (drafted - runs * first_drafted) * draft_char_us
    first = runs * first_round_us
    spec = verify + draft + first
    target = (chars - runs) * step_us + runs * first_step_us
    return {"verify_share": verify / spec, "draft_share": draft / spec, "first_share": first / spec,
            "target_only_us": target, "speculative_us": spec, "speedup": target / spec}


def pool_sparse(table: np.ndarray, expected: np.ndarray) -> np.ndarray:
    """table (rows, cells) with the cells expected fewer than 5 times merged into one, so that the chi-square
    approximation holds (if that merged cell is itself expected under 5 times, it joins the smallest other)."""
    small = expected < 5
    out, exp = table[:, ~small], expected[~small]
    if small.any():
        out = np.column_stack([out, table[:, small].sum(1)])
        exp = np.append(exp, expected[small].sum())
        if exp[-1] < 5 and len(exp) > 1:
            out[:, int(np.argmin(exp[:-1]))] += out[:, -1]
            out = out[:, :-1]
    return out


def chi_square_p(counts: np.ndarray, p: np.ndarray) -> float:
    """Goodness-of-fit p-value of `counts` against p, with sparse cells pooled (see `pool_sparse`)."""
    expected = p * counts.sum()
    f_obs, f_exp = pool_sparse(np.stack([counts, expected]).astype(float), expected)
    if len(f_obs) < 2:
        return 1.0  # everything in one cell: nothing to compare
    f_exp *= f_obs.sum() / f_exp.sum()  # remove float drift so scipy's sum check passes
    from scipy import stats as sstats  # imported where used: `import specdec` stays quick
    return float(sstats.chisquare(f_obs, f_exp).pvalue)
