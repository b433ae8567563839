"""Exactness by measurement: is what speculative decoding emits distributed as the target's own samples?

Two checks, both through the real code:

- First character (`verify`): at a fixed context the first generated character is drawn `samples` times: the
  draft proposes it (its own `propose`, its own q), the target's distribution at that position comes from the
  same verify pass the generation loop runs, and `rule.accept_reject` -- looked up at call time, so a test
  that breaks it breaks this too -- decides between the draft and a residual sample. The counts are compared
  with the target's p by a chi-square goodness-of-fit test; total variation is shown beside the TV of as many
  draws taken directly from p (sampling error alone), as information.
- Joint (`verify_joint`): the first JOINT_CHARS characters of whole `speculative_generate` runs, one seed each,
  against as many target-only `generate` runs with other seeds, by a two-sample chi-square test. This covers
  what the first check cannot: positions 2..k of a round, the bonus character, the cache rollback after a
  rejection and the adaptive schedule.

Verdicts (`verdicts`) come from the p-values alone, at a threshold that holds the chance of any false CHECK
among the rows of one report to FAMILY_ALPHA (Bonferroni: FAMILY_ALPHA / rows tested). The same checks for a
draft that drafts a token tree are `tree_exactness`'s.
"""

from __future__ import annotations

from collections import Counter

import numpy as np
import torch

from specdec.model import sampling
from specdec.decoding.generate import features_for, generate, speculative_generate
from specdec.decoding.drafts import Draft
from specdec.model.gpt import GPT
from specdec.decoding import rule
from specdec.measure.stats import chi_square_p, pool_sparse

VERIFY_PROMPT = "ROMEO:\nWhat light through yonder window breaks? It is the"
BASELINE_REPEATS = 20  # independent direct-from-p draws that give the baseline TV its median and range
FAMILY_ALPHA = 1e-3  # the chance, for exact drafts, that a report shows any CHECK at all
JOINT_CHARS = 3  # characters whose joint outcome `verify_joint` compares
JOINT_SAMPLES = 2_000  # generations per side by default
JOINT_PROMPT = "thy sheet of paper, alt"  # the next characters are uncertain and drafts often disagree


def total_variation(counts: np.ndarray, p: np.ndarray) -> float:
    """½ Σ |p̂ − p| with p̂ = counts / counts.sum()."""
    return 0.5 * float(np.abs(counts / counts.sum() - p).sum())


def two_sample_p(a: dict, b: dict) -> float:
    """p-value of the hypothesis that the outcomes counted in a and in b come from one distribution.

    Chi-square on the 2 x outcomes table, cells pooled where the smaller sample would expect fewer than 5.
    """
    keys = sorted(set(a) | set(b))
    table = np.array([[a.get(x, 0) for x in keys], [b.get(x, 0) for x in keys]], dtype=float)
    n = table.sum(1)
    pooled = pool_sparse(table, table.sum(0) * n.min() / n.sum())
    if pooled.shape[1] < 2:
        return 1.0
    from scipy import stats as sstats  # imported where used: `import specdec` stays quick
    return float(sstats.chi2_contingency(pooled, correction=False).pvalue)


def verdicts(rows: list[dict], family_alpha: float = FAMILY_ALPHA) -> list[dict]:
    """The rows with `p_threshold` and `verdict`: "CHECK" where the p-value is at or below the threshold.

    The threshold is family_alpha / (rows with a p-value): for exact drafts, the chance that any row of the
    set says CHECK is at most family_alpha (Bonferroni), however many drafts a report has. Rows without a
    p-value are the target sampled directly, the reference itself: "exact". TV decides nothing.
    """
    tested = sum(r.get("p_value") is not None for r in rows)
    threshold = family_alpha / max(1, tested)
    return [{**r, "p_threshold": threshold,
             "verdict": "exact" if r.get("p_value") is None or r["p_value"] > threshold else "CHECK"}
            for r in rows]


def baseline_tv(p: np.ndarray, samples: int, seed: int, repeats: int = BASELINE_REPEATS) -> np.ndarray:
    """TVs of `repeats` sets of `samples` draws taken directly from p: what sampling error alone gives."""
    rng = np.random.default_rng(seed + 10_000)
    return np.array([total_variation(rng.multinomial(samples, p / p.sum()).astype(float), p) for _ in range(repeats)])


@torch.inference_mode()
def target_distribution(target: GPT, prompt: str, temperature: float = 1.0) -> np.ndarray:
    """The target's p for the first character after `prompt`, from a fresh prefill."""
    target.setup_cache(1)
    logits = target(target.ids(target.tokenize(prompt)), 0)[0, -1]
    return sampling.probs(logits, temperature)


def _first_proposal(target, draft: Draft, tokens: list[int], k: int, rng, temperature: float):
    """The draft's proposal after `tokens`. A draft that reads the target (`take_features`) is first handed the
    states a pass over tokens[:-1] forms, as the loop hands them after a prefill whose emitted token is the
    last of `tokens`: its proposal is then the one a round at this context makes."""
    if getattr(draft, "take_features", None) is None:
        return draft.propose(tokens, k, rng, temperature)
    with features_for(target, draft):
        target.setup_cache(1)
        target(target.ids(tokens[:-1]), 0)
        draft.take_features(target.features[0], 0)
        return draft.propose(tokens, k, rng, temperature)


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

    A draft that proposes nothing at this context (prompt lookup on a prompt without a repeat) leaves the round
    to the target: as in `rounds.settle_round`, each draw is then the target's own sample from p₁.
    """
    tokens = target.tokenize(prompt)
    rng = np.random.default_rng(seed)
    draft.reset()
    drafted, q = _first_proposal(target, draft, tokens, k, rng, temperature)
    draft.reset()
    q1 = q[:1]  # (1, V), or (0, V) when nothing was proposed
    # The verify pass of round one: prompt + k drafts at offset 0; its first scored position is p₁.
    target.setup_cache(1)
    logits = target(target.ids(tokens + drafted), 0)[0, len(tokens) - 1 : len(tokens) + 1]
    p = sampling.probs(logits, temperature)  # (2, V): p₁ and the next position (bonus when d₁ accepted)
    counts = np.zeros(p.shape[-1])
    for _ in range(samples):
        if not len(q1):
            counts[sampling.sample(p[0], rng)] += 1
            continue
        d1 = sampling.sample(q1[0], rng)
        n_acc, nxt = rule.accept_reject(p, q1, [d1], rng)
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
    family_alpha: float = FAMILY_ALPHA,
) -> list[dict]:
    """One row per draft: TV, the same-count baseline TV (median and range of repeats), the chi-square p-value
    and the verdict over these rows (see `verdicts`)."""
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
    return verdicts(rows, family_alpha)


def target_row(target: GPT, samples: int = 20_000, seed: int = 0, prompt: str = VERIFY_PROMPT) -> dict:
    """The write-up's baseline line, "sampling the target": TV of draws taken straight from p.

    Reported as the median and range of `BASELINE_REPEATS` independent sets (a single set's p-value is just
    one uniform draw, and would read as a verdict it is not).
    """
    p = target_distribution(target, prompt)
    base = baseline_tv(p, samples, seed)
    return {"draft": "target", "k": 0, "samples": samples, "tv": float(np.median(base)),
            "baseline_tv": float(np.median(base)), "baseline_tv_min": float(base.min()),
            "baseline_tv_max": float(base.max()), "p_value": None, "verdict": "exact"}


def joint_run(k: int) -> int:
    """Characters each speculative run generates: enough that the first round drafts the full k and that a
    round ending inside the first JOINT_CHARS characters is followed by one whose length the adaptive
    schedule sets, not the end of the request (with fewer, fixed and adaptive runs would draft alike)."""
    return max(JOINT_CHARS + 2, k + 3)


def joint_counts(
    target: GPT,
    draft: Draft | None,
    samples: int,
    k: int = 4,
    seed: int = 0,
    temperature: float = 1.0,
    adaptive: bool = False,
    prompt: str = JOINT_PROMPT,
    batch: int = 1,
) -> Counter:
    """How often each string of the first JOINT_CHARS characters came out of `samples` whole generations.

    draft=None: target-only `generate` (odd seeds). Otherwise `speculative_generate` (even seeds, so the two
    samples are independent) with k -- adaptive: the +2 / -1 schedule from k -- run for `joint_run(k)`
    characters. batch > 1: the same generations (the same seeds) run `batch` sequences at a time.
    """
    first = seed * samples
    seeds = [2 * (first + i) + (draft is None) for i in range(samples)]
    chars = JOINT_CHARS if draft is None else joint_run(k)

    def run(chunk: list[int]) -> list:
        # one prompt and seed as always at batch 1 (a Generation); a list of them as one batch beyond it
        prompts, chunk_seeds = ([prompt] * len(chunk), chunk) if batch > 1 else (prompt, chunk[0])
        if draft is None:
            out = generate(target, prompts, chars, chunk_seeds, temperature)
        else:
            out = speculative_generate(target, draft, prompts, chars, k, chunk_seeds, temperature, adaptive=adaptive)
        return out if isinstance(out, list) else [out]

    return Counter(g.text[:JOINT_CHARS] for i in range(0, samples, batch) for g in run(seeds[i : i + batch]))


def verify_joint(
    target: GPT,
    drafts: dict[str, Draft],
    k: int = 4,
    samples: int = JOINT_SAMPLES,
    seed: int = 0,
    temperature: float = 1.0,
    adaptive: bool = False,
    prompt: str = JOINT_PROMPT,
    family_alpha: float = FAMILY_ALPHA,
    reference: Counter | None = None,
    batch: int = 1,
) -> list[dict]:
    """One row per draft: the two-sample chi-square p-value of its first JOINT_CHARS characters against
    target-only generation, the TV between the two empirical distributions (information only) and the
    verdict over these rows. reference: target-only counts to compare with (by default `samples` runs;
    pass one to share it between calls at the same prompt and temperature). batch: the drafts' generations run
    that many sequences at a time (`speculative_generate`'s batch; the reference stays one at a time)."""
    if reference is None:
        reference = joint_counts(target, None, samples, k, seed, temperature, prompt=prompt)
    n_ref = sum(reference.values())
    rows = []
    for name, draft in drafts.items():
        counts = joint_counts(target, draft, samples, k, seed, temperature, adaptive, prompt, batch)
        keys = set(counts) | set(reference)
        tv = 0.5 * sum(abs(counts[x] / samples - reference[x] / n_ref) for x in keys)
        rows.append({"draft": name, "k": k, "adaptive": adaptive, "temperature": temperature, "chars": JOINT_CHARS,
                     **({"batch": batch} if batch > 1 else {}),
                     "samples": samples, "reference_samples": n_ref, "tv": tv, "outcomes": len(keys),
                     "p_value": two_sample_p(counts, reference)})
    return verdicts(rows, family_alpha)
