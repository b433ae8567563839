import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats as sstats

from specdec.model import sampling
from specdec.decoding import rule


def _dist(v):
    v = np.asarray(v, dtype=np.float64)
    return v / v.sum()


weights = arrays(np.float64, st.integers(2, 6), elements=st.sampled_from([0.0, 0.0, 1e-300, 0.1, 0.5, 1.0, 3.0, 7.0]))


@st.composite
def pq_pairs(draw):
    p = draw(weights.filter(lambda a: a.sum() > 0))
    choice = draw(st.sampled_from(["independent", "equal", "shuffled"]))
    if choice == "equal":
        q = p.copy()
    elif choice == "shuffled":
        q = draw(st.permutations(list(p)))
    else:
        q = draw(arrays(np.float64, len(p), elements=st.sampled_from([0.0, 0.2, 1.0, 5.0])).filter(lambda a: a.sum() > 0))
    return _dist(p), _dist(q)


class _Script:
    """Stands in for numpy's Generator: random() returns the scripted values in turn, then `fill` (or raises
    Exhausted when there is none)."""

    class Exhausted(Exception):
        pass

    def __init__(self, values, fill=None):
        self.values, self.fill, self.calls = values, fill, 0

    def random(self):
        self.calls += 1
        if self.calls <= len(self.values):
            return self.values[self.calls - 1]
        if self.fill is None:
            raise _Script.Exhausted
        return self.fill


_PROBES = (0.1, 0.5, 0.9)  # later draws, fixed at these, tell two continuations apart


def _cuts(f, lo=0.0, hi=1.0 - 2**-53, grid=16):
    """The points of [0, 1) where the step function f changes value, each located to within 1e-15."""
    def split(a, fa, b, fb):
        if fa == fb:
            return []
        if b - a <= 1e-15:
            return [b]
        m = (a + b) / 2
        fm = f(m)
        return split(a, fa, m, fm) + split(m, fm, b, fb)

    xs = list(np.linspace(lo, hi, grid + 1))
    fs = [f(x) for x in xs]
    return [c for i in range(grid) for c in split(xs[i], fs[i], xs[i + 1], fs[i + 1])]


def _branches(run, prefix=()):
    """{outcome: probability} of run(rng), each rng.random() an independent uniform draw on [0, 1).

    The real code runs on scripted draws: the range of the next draw is cut wherever what follows changes
    (the outcome, with every later draw held at each probe value), and each piece, explored the same way
    for the draws after it, weighs its length. Thresholds and inverse-CDF sampling give such pieces.
    """
    try:
        return {run(_Script(prefix)): 1.0}
    except _Script.Exhausted:
        pass
    edges = [0.0] + _cuts(lambda u: tuple(run(_Script(prefix + (u,), v)) for v in _PROBES)) + [1.0]
    out = {}
    for a, b in zip(edges, edges[1:]):
        for outcome, prob in _branches(run, prefix + ((a + b) / 2,)).items():
            out[outcome] = out.get(outcome, 0.0) + (b - a) * prob
    return out


def _emitted(p, q):
    """Exact distributions of the characters a round emits under `rule.accept_reject` as implemented.

    p: (k+1, V), q: (k, V). Each drafted sequence is weighed by its q-probability; the rule's own branches
    come from `_branches`. Returns (k+1, V): row j unnormalised over the rounds that emit more than j
    characters (row 0 sums to 1).
    """
    k, V = q.shape
    out = np.zeros((k + 1, V))
    for drafted in np.ndindex(*(V,) * k):
        weight = np.prod([q[i, x] for i, x in enumerate(drafted)])
        if weight == 0:
            continue
        apply = lambda rng, d=list(drafted): rule.accept_reject(p, q, d, rng)
        for (n_acc, nxt), prob in _branches(apply).items():
            for j, y in enumerate(list(drafted[:n_acc]) + [nxt]):
                out[j, y] += weight * prob
    return out


@settings(max_examples=200, deadline=None)
@given(pq_pairs())
def test_the_rule_as_implemented_emits_exactly_p(pq):
    """accept_reject's branches, enumerated exactly: the first character is p, the bonus after it p's next row."""
    p, q = pq
    p_next = _dist(p[::-1] + 0.01)
    out = _emitted(np.stack([p, p_next]), q[None, :])
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out[0], p, atol=1e-9, rtol=0)
    if out[1].sum() > 1e-6:
        np.testing.assert_allclose(out[1] / out[1].sum(), p_next, atol=1e-6, rtol=0)


@pytest.mark.parametrize("p,q", [
    ([[0.5, 0.3, 0.2], [0.1, 0.1, 0.8], [0.3, 0.3, 0.4]], [[0.2, 0.2, 0.6], [0.6, 0.3, 0.1]]),
    ([[0.0, 0.5, 0.5], [1.0, 0.0, 0.0], [0.2, 0.0, 0.8]], [[0.5, 0.5, 0.0], [0.4, 0.3, 0.3]]),
    ([[0.4, 0.6, 0.0], [0.4, 0.6, 0.0], [0.1, 0.1, 0.8]], [[0.4, 0.6, 0.0], [0.4, 0.6, 0.0]]),
])
def test_two_drafts_emit_p_at_each_position_and_the_bonus(p, q):
    """k = 2: the first character is p₁; given one accepted, the next is p₂; given both, the bonus is p₃."""
    p, q = np.array(p), np.array(q)
    out = _emitted(p, q)
    np.testing.assert_allclose(out[0], p[0], atol=1e-9, rtol=0)
    for j in (1, 2):
        np.testing.assert_allclose(out[j] / out[j].sum(), p[j], atol=1e-9, rtol=0)


_BROKEN_RESIDUALS = {
    "residual_is_p": lambda p, q: p / p.sum(),
    "residual_is_q": lambda p, q: q / q.sum(),
    "sign_flipped": lambda p, q: np.maximum(q - p, 0) / np.maximum(q - p, 0).sum(),
}


@pytest.mark.parametrize("broken", list(_BROKEN_RESIDUALS))
def test_the_enumeration_catches_a_broken_rule(monkeypatch, broken):
    """Negative control: the same enumeration of the real accept_reject, with its residual broken, is not p."""
    p, q = _dist([0.5, 0.3, 0.2, 0.0]), _dist([0.1, 0.1, 0.4, 0.4])
    monkeypatch.setattr(rule, "residual", _BROKEN_RESIDUALS[broken])
    out = _emitted(np.stack([p, p]), q[None, :])
    assert np.abs(out[0] - p).sum() > 0.1


def test_residual_by_hand_and_when_it_underflows():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(rule.residual(p, q), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(rule.residual(p, p), p)  # zero mass: no NaN, falls back to p
    tiny = p + np.array([1e-17, -1e-17, 0.0])
    assert not np.isnan(rule.residual(p, tiny)).any()


def test_probs_temperature_and_greedy():
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    np.testing.assert_allclose(sampling.probs(logits, 1.0), [0.1, 0.2, 0.7])
    np.testing.assert_allclose(sampling.probs(logits, 0.5), np.array([0.01, 0.04, 0.49]) / 0.54)
    np.testing.assert_array_equal(sampling.probs(logits, 0.0), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(sampling.temper(np.array([0.1, 0.2, 0.7]), 0.5), np.array([0.01, 0.04, 0.49]) / 0.54)
    for bad in (-1.0, float("nan"), float("inf"), 1e-320):  # 1e-320: logits / T overflows to inf, then NaN
        with pytest.raises(ValueError, match=f"temperature must be 0 or a finite number >= 1e-30, got {bad}"):
            sampling.probs(logits, bad)


def test_the_smallest_temperature_allowed_still_gives_a_distribution():
    # logits as large as float32 holds, divided by the smallest temperature, stay finite in float64
    logits = np.array([3.0e38, -3.0e38, 0.0], dtype=np.float32)
    np.testing.assert_array_equal(sampling.probs(logits, sampling.MIN_TEMPERATURE), [1.0, 0.0, 0.0])


def test_greedy_rule_accepts_iff_argmax_matches():
    p = sampling.probs(np.log([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]), 0.0)
    rng = np.random.default_rng(0)
    assert rule.accept_reject(p, sampling.probs(np.log([[0.2, 0.7, 0.1]]), 0.0), [1], rng) == (1, 0)
    assert rule.accept_reject(p, sampling.probs(np.log([[0.2, 0.1, 0.7]]), 0.0), [2], rng) == (0, 1)


def _rule_counts(p, q, n=40_000):
    """The first character of n rounds: drafted from q with the real sampler, decided by the real rule."""
    rng = np.random.default_rng(1234)
    counts = np.zeros(len(p))
    for _ in range(n):
        x = sampling.sample(q, rng)
        n_acc, nxt = rule.accept_reject(np.stack([p, p]), q[None, :], [x], rng)
        counts[x if n_acc else nxt] += 1
    return counts


@pytest.mark.parametrize("p,q", [
    ([0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.4, 0.4]),
    ([0.25, 0.25, 0.25, 0.25], [0.97, 0.01, 0.01, 0.01]),
    ([0.05, 0.05, 0.9, 0.0], [0.05, 0.05, 0.9, 0.0]),
])
def test_implemented_sampler_matches_p_by_chi_square(p, q):
    """Draft from q with the real sampler, apply the real rule 40 000 times: the counts fit p."""
    p, q = _dist(p), _dist(q)
    counts = _rule_counts(p, q)
    nz = p > 0
    assert counts[~nz].sum() == 0
    assert sstats.chisquare(counts[nz], p[nz] * counts.sum()).pvalue > 1e-4


@pytest.mark.parametrize("broken", list(_BROKEN_RESIDUALS))
def test_a_broken_rule_fails_the_same_chi_square(monkeypatch, broken):
    """Negative control: the loop above, through the real accept_reject with its residual broken, fails."""
    monkeypatch.setattr(rule, "residual", _BROKEN_RESIDUALS[broken])
    p, q = _dist([0.5, 0.3, 0.2, 0.0]), _dist([0.1, 0.1, 0.4, 0.4])
    counts = _rule_counts(p, q)
    nz = p > 0
    assert counts[~nz].sum() > 0 or sstats.chisquare(counts[nz], p[nz] * counts.sum()).pvalue < 1e-4


def test_sample_is_inverse_cdf():
    class U:
        def __init__(self, u):
            self.u = u

        def random(self):
            return self.u

    p = np.array([0.2, 0.0, 0.5, 0.3])
    assert [sampling.sample(p, U(u)) for u in (0.0, 0.19, 0.2, 0.69, 0.7, 0.999999)] == [0, 0, 2, 2, 3, 3]
