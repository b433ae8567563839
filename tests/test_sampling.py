import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays
from scipy import stats as sstats

from specdec import sampling


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


@settings(max_examples=400, deadline=None)
@given(pq_pairs())
def test_rule_output_distribution_is_exactly_p(pq):
    """Enumerating accept (q·min(1,p/q)) and reject (mass · residual) branches gives p to 1e-9."""
    p, q = pq
    out = sampling.output_distribution(p, q)
    assert not np.isnan(out).any()
    np.testing.assert_allclose(out, p, atol=1e-9, rtol=0)


@settings(max_examples=200, deadline=None)
@given(pq_pairs(), st.floats(0, 1, exclude_max=True))
def test_implemented_rule_takes_the_enumerated_branches(pq, u):
    """accept_reject accepts x exactly when u·q(x) < p(x) (or p(x) >= q(x)), else samples the residual."""
    p, q = pq
    x = int(np.flatnonzero(q > 0)[0])

    class FixedRng:
        def __init__(self):
            self.calls = 0

        def random(self):
            self.calls += 1
            return u

    n_acc, nxt = sampling.accept_reject(np.stack([p, p]), q[None, :], [x], FixedRng())
    accepted = p[x] >= q[x] or u * q[x] < p[x]
    assert n_acc == (1 if accepted else 0)
    if not accepted:
        r = sampling.residual(p, q)
        assert r[nxt] > 0  # the replacement comes from max(0, p - q)
        assert nxt == min(int(np.searchsorted(np.cumsum(r), u * np.cumsum(r)[-1], side="right")), len(p) - 1)


def test_residual_by_hand_and_when_it_underflows():
    p = np.array([0.5, 0.3, 0.2])
    q = np.array([0.2, 0.5, 0.3])
    np.testing.assert_allclose(sampling.residual(p, q), [1.0, 0.0, 0.0])
    np.testing.assert_allclose(sampling.residual(p, p), p)  # zero mass: no NaN, falls back to p
    tiny = p + np.array([1e-17, -1e-17, 0.0])
    assert not np.isnan(sampling.residual(p, tiny)).any()


def test_probs_temperature_and_greedy():
    logits = np.log(np.array([0.1, 0.2, 0.7]))
    np.testing.assert_allclose(sampling.probs(logits, 1.0), [0.1, 0.2, 0.7])
    np.testing.assert_allclose(sampling.probs(logits, 0.5), np.array([0.01, 0.04, 0.49]) / 0.54)
    np.testing.assert_array_equal(sampling.probs(logits, 0.0), [0.0, 0.0, 1.0])
    np.testing.assert_allclose(sampling.temper(np.array([0.1, 0.2, 0.7]), 0.5), np.array([0.01, 0.04, 0.49]) / 0.54)
    with pytest.raises(ValueError, match="temperature must be >= 0"):
        sampling.probs(logits, -1.0)


def test_greedy_rule_accepts_iff_argmax_matches():
    p = sampling.probs(np.log([[0.1, 0.6, 0.3], [0.5, 0.25, 0.25]]), 0.0)
    rng = np.random.default_rng(0)
    assert sampling.accept_reject(p, sampling.probs(np.log([[0.2, 0.7, 0.1]]), 0.0), [1], rng) == (1, 0)
    assert sampling.accept_reject(p, sampling.probs(np.log([[0.2, 0.1, 0.7]]), 0.0), [2], rng) == (0, 1)


@pytest.mark.parametrize("p,q", [
    ([0.5, 0.3, 0.2, 0.0], [0.1, 0.1, 0.4, 0.4]),
    ([0.25, 0.25, 0.25, 0.25], [0.97, 0.01, 0.01, 0.01]),
    ([0.05, 0.05, 0.9, 0.0], [0.05, 0.05, 0.9, 0.0]),
])
def test_implemented_sampler_matches_p_by_chi_square(p, q):
    """Draft from q with the real sampler, apply the real rule 40 000 times: the counts fit p."""
    p, q = _dist(p), _dist(q)
    rng = np.random.default_rng(1234)
    counts = np.zeros(len(p))
    for _ in range(40_000):
        x = sampling.sample(q, rng)
        n_acc, nxt = sampling.accept_reject(np.stack([p, p]), q[None, :], [x], rng)
        counts[x if n_acc else nxt] += 1
    nz = p > 0
    assert counts[~nz].sum() == 0
    assert sstats.chisquare(counts[nz], p[nz] * counts.sum()).pvalue > 1e-4


def test_broken_rule_is_caught_by_the_same_chi_square():
    """Negative control: always accepting gives q, not p, and the test above would fail."""
    p, q = _dist([0.5, 0.3, 0.2, 0.0]), _dist([0.1, 0.1, 0.4, 0.4])
    rng = np.random.default_rng(1234)
    counts = np.bincount([sampling.sample(q, rng) for _ in range(40_000)], minlength=4).astype(float)
    assert counts[3] > 0  # mass where p has none
    assert sstats.chisquare(counts[:3], p[:3] * counts[:3].sum()).pvalue < 1e-4


def test_sample_is_inverse_cdf():
    class U:
        def __init__(self, u):
            self.u = u

        def random(self):
            return self.u

    p = np.array([0.2, 0.0, 0.5, 0.3])
    assert [sampling.sample(p, U(u)) for u in (0.0, 0.19, 0.2, 0.69, 0.7, 0.999999)] == [0, 0, 2, 2, 3, 3]
