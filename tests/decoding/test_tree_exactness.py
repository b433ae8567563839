"""Trees are exact: enumeration of the real rule's branches, chi-square through the real pipeline, controls.

(a) Every branch of `oracles.walk` -- the reference walk; the lean one `accept_tree` runs is held to it decision
    for decision in tests/decoding/test_lean_tree.py -- is enumerated by replaying it with
    scripted decisions whose probabilities come from the values the real code passes (min(1, p/q) for a try,
    the real residual for the final draw); children tuples are enumerated with the law of sampling without
    replacement (`oracles.top_k` is held to that law separately). The emitted text, continued by the target, has
    exactly the target's joint law (1e-9).
(b) Chi-square through `speculative_generate` with a tree: the first character and the first three jointly
    against the target's exact law (computed by batched forwards).
(c) Greedy is identical to target-only: tests/decoding/test_trees.py.
(d) Negative controls -- children sampled with replacement but treated as without; the q update skipped --
    fail (a) and the chi-square tests (`_break` breaks the reference and the lean code alike).
"""

import itertools

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import stats as sstats

from specdec.measure import tree_exactness
from specdec.model import sampling
from specdec.decoding import trees
from specdec.decoding import tree_draft
from specdec.decoding import tree_walk
from specdec.decoding.drafts import TableDraft
from specdec.decoding.trees import TreeSpec
from specdec.measure import stats
from tests import oracles


def _pl(q, xs):
    """Probability that sequential sampling without replacement from q draws xs in this order."""
    out, left = 1.0, 1.0
    for x in xs:
        if q[x] <= 0 or left <= 0:
            return 0.0
        out *= q[x] / left
        left -= q[x]
    return out


def _tuples(q, k, replacement):
    if replacement:  # the broken sampler: i.i.d. draws, duplicates possible
        return [(xs, float(np.prod(q[list(xs)]))) for xs in itertools.product(range(len(q)), repeat=k)]
    k = min(k, int(np.count_nonzero(q)))
    return [(xs, _pl(q, xs)) for xs in itertools.permutations(range(len(q)), k) if _pl(q, xs) > 0]


def _trees(spec, root, q_tab, replacement):
    """Every drafted tree of `spec` after token `root` (q = q_tab[last token]) with its probability."""
    want = [[] for _ in range(spec.budget + 1)]
    for i, a in enumerate(spec.parents):
        want[a + 1].append(i)
    partial = [(1.0, trees.Tree([], [], [], [[]], [None]), [(-1, -1, root)])]
    while any(level for _, _, level in partial):
        nxt = []
        for w, t, level in partial:
            options = [[(None, 1.0)] if not want[s + 1] else _tuples(q_tab[tok], len(want[s + 1]), replacement)
                       for s, _, tok in level]
            for combo in itertools.product(*options):
                t2 = trees.Tree(list(t.tokens), list(t.parents), list(t.depths), [list(c) for c in t.children],
                                list(t.q))
                w2, level2 = w, []
                for (s, j, tok), (xs, wx) in zip(level, combo):
                    w2 *= wx
                    if xs is None:
                        continue
                    t2.q[j + 1] = q_tab[tok]
                    for s_child, x in zip(want[s + 1], xs):
                        n = len(t2.tokens)
                        t2.tokens.append(x), t2.parents.append(j), t2.children.append([]), t2.q.append(None)
                        t2.depths.append(0 if j < 0 else t2.depths[j] + 1)
                        t2.children[j + 1].append(n)
                        level2.append((s_child, n, x))
                if w2 > 0:
                    nxt.append((w2, t2, level2))
        partial = nxt
    return [(w, t) for w, t, _ in partial]


def _branches(tree, p):
    """Every branch of `oracles.walk` (the rule `tree_walk.accept_tree` runs) with its probability:
    [(prob, emitted tokens)]."""
    out, todo = [], [[]]
    while todo:
        script, taken, prob = todo.pop(), [], [1.0]

        def decide(options):  # options: [(choice, probability > 0)]
            i = len(taken)
            c = script[i] if i < len(script) else options[0][0]
            if i >= len(script):
                todo.extend(taken + [alt] for alt, _ in options[1:])
            taken.append(c)
            prob[0] *= dict(options)[c]
            return c

        def accept(px, qx):
            a = 1.0 if px >= qx else px / qx  # what `accept_tree`'s px >= qx or u·qx < px accepts with
            return decide([(o, w) for o, w in ((True, a), (False, 1.0 - a)) if w > 0])

        def pick(d):  # `sampling.sample`'s law: d normalised
            d = d / d.sum()
            return decide([(int(i), d[i]) for i in np.flatnonzero(d > 0)])

        path, nxt = oracles.walk(tree, p, accept, pick)
        out.append((prob[0], [tree.tokens[j] for j in path] + [nxt]))
    return out


def _emitted_law_error(spec, root, p_tab, q_tab, replacement=False):
    """max |P(first depth+1 characters) − target's| when one tree round is continued by the target."""
    V, L = len(p_tab), spec.depth + 1
    law = np.zeros((V,) * L)

    def spread(prefix, w):  # continue `prefix` with the target itself up to L characters
        if len(prefix) == L + 1:  # prefix[0] is the root, the context's last token
            law[tuple(prefix[1:])] += w
            return
        for c in range(V):
            if p_tab[prefix[-1], c] > 0:
                spread(prefix + [c], w * p_tab[prefix[-1], c])

    for w, tree in _trees(spec, root, q_tab, replacement):
        p = np.stack([p_tab[root]] + [p_tab[x] for x in tree.tokens])  # (N + 1, V): Markov target
        for wb, emitted in _branches(tree, p):
            spread([root] + emitted, w * wb)
    # the target's own law of L characters after root
    direct = np.zeros((V,) * L)
    for seq in itertools.product(range(V), repeat=L):
        direct[seq] = np.prod([p_tab[a, b] for a, b in zip((root,) + seq[:-1], seq)])
    return float(np.abs(law - direct).max()), float(law.sum())


def _row(draw, V):
    row = np.array(draw(st.lists(st.sampled_from([0.0, 0.0, 0.1, 0.5, 1.0, 3.0]), min_size=V, max_size=V)
                        .filter(lambda r: sum(r) > 0)))
    return row / row.sum()


@st.composite
def cases(draw):
    V = draw(st.integers(2, 4))
    widths = draw(st.sampled_from([(1,), (2,), (3,), (4,), (1, 1), (2, 1), (1, 2), (2, 2), (3, 1), (1, 1, 1)]))
    assume(V ** (2 * len(widths)) <= 81 or len(widths) == 1)  # keeps the enumeration to a second
    p_tab = np.stack([_row(draw, V) for _ in range(V)])
    q_tab = p_tab.copy() if draw(st.booleans()) and draw(st.booleans()) else np.stack([_row(draw, V) for _ in range(V)])
    return TreeSpec.from_widths(widths), draw(st.integers(0, V - 1)), p_tab, q_tab


@settings(max_examples=150, deadline=None)
@given(cases())
def test_enumerated_tree_rule_emits_exactly_the_target_law(case):
    err, total = _emitted_law_error(*case)
    assert total == pytest.approx(1.0, abs=1e-12)
    assert err <= 1e-9


# After a rejection the residual keeps two characters (so a wrong q for the next child shows)
P3 = np.array([[0.45, 0.45, 0.1], [0.2, 0.2, 0.6], [0.1, 0.8, 0.1]])
Q3 = np.array([[0.1, 0.2, 0.7], [0.5, 0.1, 0.4], [0.3, 0.3, 0.4]])


@pytest.mark.parametrize("widths", [(2,), (2, 2), (3, 1)])
def test_negative_control_with_replacement_fails_the_enumeration(widths):
    err, _ = _emitted_law_error(TreeSpec.from_widths(widths), 0, P3, Q3, replacement=True)
    assert err > 1e-3


@pytest.mark.parametrize("widths", [(2,), (2, 2), (3, 1)])
def test_negative_control_without_q_update_fails_the_enumeration(monkeypatch, widths):
    _break(monkeypatch, "no q update")
    err, _ = _emitted_law_error(TreeSpec.from_widths(widths), 0, P3, Q3)
    assert err > 1e-3


def _with_replacement(q, k, rng):
    return [int(x) for x in rng.choice(len(q), size=k, p=q / q.sum())]


def _orders_with_replacement(q, rng):
    """The lean draft's `_gumbel_order` broken the same way: each row's 'order' is i.i.d. draws from it."""
    return np.stack([rng.choice(len(row), size=len(row), p=row / row.sum()) for row in q])


def _break(monkeypatch, control):
    """A negative control in the reference code and in the lean code alike (generation runs the lean one)."""
    if control == "replacement":
        monkeypatch.setattr(oracles, "top_k", _with_replacement)
        monkeypatch.setattr(tree_draft, "_gumbel_order", _orders_with_replacement)
    elif control == "no q update":
        monkeypatch.setattr(oracles, "remove", lambda q, x: q)
        monkeypatch.setattr(tree_walk, "_remove_in_place", lambda q, x: q)


def test_gumbel_top_k_draws_in_sequential_without_replacement_order():
    """`top_k`'s ordered pairs fit the law of sampling without replacement; i.i.d. draws do not."""
    q = np.array([0.5, 0.3, 0.15, 0.05])
    pairs = list(itertools.permutations(range(4), 2))
    law = np.array([_pl(q, xs) for xs in pairs])
    for sampler, fits in ((oracles.top_k, True), (_with_replacement, False)):
        rng = np.random.default_rng(7)
        counts = np.zeros(len(pairs) + 1)  # last cell: a repeated character
        for _ in range(20_000):
            xs = tuple(sampler(q, 2, rng))
            counts[pairs.index(xs) if xs in pairs else -1] += 1
        if fits:
            assert counts[-1] == 0 and sstats.chisquare(counts[:-1], law * counts.sum()).pvalue > 1e-4
        else:
            assert counts[-1] > 1000  # repeats: what the rule's q update assumes never happens


# --- (b) chi-square through the real pipeline ------------------------------------------------------------

PROMPT = "ROMEO:"


def _pipeline_p_values(target, draft, spec, n, seed0=0):
    return tree_exactness.tree_generation_p_values(target, draft, spec, n, seed0, PROMPT)


@pytest.mark.parametrize("draft", ["bigram", "ngram"])
def test_tree_generation_fits_the_target_first_and_three_chars(target, draft_factory, draft):
    p_first, p_joint = _pipeline_p_values(target, draft_factory(draft), TreeSpec.parse("4x2x2x1"), 1200)
    assert p_first > 1e-4 and p_joint > 1e-4


@pytest.mark.parametrize("shape", ["2", "8x1x1"])
def test_tree_generation_fits_the_target_for_a_chain_and_a_wide_root(target, draft_factory, shape):
    """The other two shapes of a tree's extremes: one node, and a wide root over a chain."""
    p_first, p_joint = _pipeline_p_values(target, draft_factory("ngram"), TreeSpec.parse(shape), 1200, seed0=10_000)
    assert p_first > 1e-4 and p_joint > 1e-4


@pytest.mark.parametrize("draft", ["bigram", "ngram"])
def test_verify_tree_first_char_rows(target, draft_factory, draft):
    row = tree_exactness.verify_tree(target, {draft: draft_factory(draft)}, TreeSpec.parse("4x2"), samples=4000)[0]
    assert row["tree"] == "4x2" and row["joint_p_value"] is None
    assert row["p_value"] > 1e-4 and row["tv"] <= 1.5 * row["baseline_tv_max"]


class _Table(TableDraft):
    name = "table"

    def __init__(self, q_tab):
        self.q_tab = q_tab

    def _dist(self, tokens):
        return self.q_tab[tokens[-1]]


@pytest.mark.parametrize("control", [None, "replacement", "no q update"])
def test_rule_chi_square_on_synthetic_tables_and_its_controls(monkeypatch, control):
    """The real draft_tree + accept_tree on 3-character tables: fits p; each control is rejected."""
    _break(monkeypatch, control)
    spec, draft, rng = TreeSpec.from_widths((2, 2)), _Table(Q3), np.random.default_rng(11)
    counts = np.zeros(9)  # the first two emitted characters (the second from the target when one is emitted)
    for _ in range(20_000):
        t = tree_draft.draft_tree(spec, draft, [0], rng, 1.0)
        path, nxt = tree_walk.accept_tree(t, np.stack([P3[0]] + [P3[x] for x in t.tokens]), rng)
        out = [t.tokens[j] for j in path] + [nxt]
        if len(out) == 1:
            out.append(sampling.sample(P3[out[0]], rng))
        counts[out[0] * 3 + out[1]] += 1
    p_value = stats.chi_square_p(counts, (P3[0][:, None] * P3).ravel())
    assert p_value > 1e-4 if control is None else p_value < 1e-6
