"""The lean tree round is the reference round, bitwise: the same drafts, masks, walks, cache and generations.

Each lean piece (`tree_draft.draft_tree`, `Tree.attention_lean`, `tree_walk.accept_tree`, the onnx
`tree_logits` and `keep_path_lean`, `rounds.settle_tree_round`) is held to its reference (tests/oracles.py,
`Tree.attention`, `keep_path`) on the same inputs: equal outputs and the random generator left in the same
state, so everything after a round is unchanged too.
"""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.decoding import generate as decode
from specdec.decoding import rounds
from specdec.decoding import trees
from specdec.decoding import sequoia
from specdec.decoding import tree_draft
from specdec.decoding import tree_walk
from specdec.decoding.drafts import TableDraft
from specdec.decoding.trees import TreeSpec
from specdec.measure.acceptance import measure_child_acceptance
from specdec.model import backends, corpus, sampling
from tests import oracles

PROMPT = "ROMEO:"
SEEDS = range(51)
TEMPERATURES = [0.0, 0.7, 1.0]


def _state(rng):
    return rng.bit_generator.state


def _same_tree(a: trees.Tree, b: trees.Tree) -> None:
    assert (a.tokens, a.parents, a.depths, a.children) == (b.tokens, b.parents, b.depths, b.children)
    assert len(a.q) == len(b.q)
    for qa, qb in zip(a.q, b.q):
        assert (qa is None) == (qb is None)
        if qa is not None:
            np.testing.assert_array_equal(qa, qb)  # bitwise: the rule compares and subtracts them


def test_one_noise_draw_per_level_is_the_per_node_draws():
    """What the lean draft relies on: m calls of V Gumbel draws are one (m, V) call, values and stream."""
    a, b = np.random.default_rng(5), np.random.default_rng(5)
    per_node = np.stack([a.gumbel(size=84) for _ in range(7)])
    np.testing.assert_array_equal(per_node, b.gumbel(size=(7, 84)))
    assert _state(a) == _state(b)


class _Sparse(TableDraft):
    """A 3-character table whose rows have zeros: nodes wider than a row's support get fewer children, deep in
    the tree as well as at the root (the lean draft then continues node by node)."""

    name = "sparse"
    vocab_size = 3
    history = 2
    TABLE = np.array([[0.6, 0.4, 0.0], [0.2, 0.3, 0.5], [0.0, 0.0, 1.0]])

    def _dist(self, tokens):
        return self.TABLE[tokens[-1]]


SPECS = ["4x2x2x1", "2x2", "3x1x1x1x1", "8", "1x1x1"]
# not grouped by parent: node 2 is node 1's child, node 3 node 0's (the tree numbers them the other way)
ODD = TreeSpec((-1, -1, 1, 0, 3))


@pytest.mark.parametrize("draft", ["bigram", "ngram", "sparse"])
@pytest.mark.parametrize("temperature", TEMPERATURES)
def test_lean_draft_is_the_reference_draft(draft_factory, draft, temperature):
    d = _Sparse() if draft == "sparse" else draft_factory(draft)
    context = [0, 1] if draft == "sparse" else corpus.encode(PROMPT)
    for spec in [TreeSpec.parse(s) for s in SPECS] + [ODD, TreeSpec(())]:
        for seed in range(8):
            a, b = np.random.default_rng(seed), np.random.default_rng(seed)
            ref = oracles.draft_tree_reference(spec, d, context, a, temperature)
            lean = tree_draft.draft_tree(spec, d, context, b, temperature)
            _same_tree(lean, ref)
            assert _state(a) == _state(b)


def test_a_sparse_row_deep_in_the_tree_drops_nodes_there():
    """The case the lean draft hands to its node-by-node code: full at the root, short one level down."""
    # after [0, 1] the root's row (of 1) has 3 characters: all 3 root children; below, the row of 0 has 2
    # characters (2 children), of 1 three (2 children), of 2 one (1 child): 3 + 2 + 2 + 1 = 8 nodes
    for seed in range(5):
        t = tree_draft.draft_tree(TreeSpec.parse("3x2"), _Sparse(), [0, 1], np.random.default_rng(seed), 1.0)
        assert sorted(t.tokens[:3]) == [0, 1, 2] and len(t.tokens) == 8
        below = {t.tokens[a]: sorted(t.tokens[j] for j in t.children[a + 1]) for a in range(3)}
        assert below[0] == [0, 1] and below[2] == [2] and len(set(below[1])) == 2
        assert t.parents == [-1, -1, -1] + [a for a in range(3) for _ in t.children[a + 1]]
        assert t.depths == [0] * 3 + [1] * 5


@pytest.mark.parametrize("spec", [TreeSpec.parse(s) for s in SPECS] + [ODD])
@pytest.mark.parametrize("pos,n_pending", [(0, 1), (3, 2), (40, 1), (7, 6)])
def test_lean_attention_is_the_reference_attention(spec, pos, n_pending):
    t = trees.Tree([1] * spec.budget, list(spec.parents), list(spec.depths),
                   [list(c) for c in trees._shape(spec.parents).children], [None] * (spec.budget + 1))
    ids, mask = t.attention(pos, n_pending)
    lean_ids, lean_mask = t.attention_lean(pos, n_pending)
    np.testing.assert_array_equal(lean_ids, ids.numpy())
    np.testing.assert_array_equal(lean_mask, mask.numpy())
    assert lean_ids.dtype == np.int64 and lean_mask.dtype == bool
    _, bias = t.attention_lean(pos, n_pending, additive=True)
    assert bias.dtype == np.float32
    np.testing.assert_array_equal(bias, np.where(mask.numpy(), 0.0, -np.inf))


@st.composite
def walks(draw):
    """A random tree over V characters with random p rows and q at its inner nodes (zeros allowed), siblings
    distinct as drafting makes them."""
    V = draw(st.integers(2, 6))
    spec = TreeSpec.from_widths(draw(st.lists(st.integers(1, min(V, 3)), min_size=1, max_size=3)))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))

    def row():
        r = rng.random(V) * (rng.random(V) < 0.8)
        r[rng.integers(V)] += 0.1  # never all zero
        return r / r.sum()

    children = trees._shape(spec.parents).children
    tokens = [0] * spec.budget
    for kids in children:
        for j, x in zip(kids, rng.permutation(V).tolist()):
            tokens[j] = x
    q = [row() if kids else None for kids in children]
    t = trees.Tree(tokens, list(spec.parents), list(spec.depths), [list(c) for c in children], q)
    p = np.stack([row() for _ in range(spec.budget + 1)])
    if draw(st.booleans()):  # p equal to q where there is a q: ties take the p >= q branch, no draw
        for a, qa in enumerate(q):
            if qa is not None:
                p[a] = qa
    return t, p, draw(st.integers(0, 10_000))


@settings(max_examples=400, deadline=None)
@given(walks())
def test_lean_walk_is_the_reference_walk(case):
    t, p, seed = case
    q_before = [None if q is None else q.copy() for q in t.q]
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    assert tree_walk.accept_tree(t, p, b) == oracles.accept_tree_reference(t, p, a)
    assert _state(a) == _state(b)
    for q, q0 in zip(t.q, q_before):  # the lean walk writes only its own copies
        assert (q is None and q0 is None) or np.array_equal(q, q0)


def test_the_walks_agree_on_greedy_one_hot_rows():
    """Temperature 0: p and q one-hot, p(x) >= q(x) or p(x) = 0 < q(x) -- no uniform unless a child is
    rejected; both walks draw exactly one (the residual's sample) and emit the same character."""
    t = trees.Tree([2, 1], [-1, 0], [0, 1], [[0], [1], []], [np.eye(3)[2], np.eye(3)[1], None])
    p = np.stack([np.eye(3)[2], np.eye(3)[0], np.eye(3)[1]])  # accept node 0, reject node 1 -> emit 0
    a, b = np.random.default_rng(0), np.random.default_rng(0)
    assert oracles.accept_tree_reference(t, p, a) == tree_walk.accept_tree(t, p, b) == ([0], 0)
    assert _state(a) == _state(b)


@pytest.fixture(scope="module")
def onnx_target(target):
    pytest.importorskip("onnxruntime")
    m = backends.to_backend(target, "onnx")
    m.setup_cache(1)
    return m


@torch.inference_mode()
def test_onnx_tree_logits_and_keep_path_lean_are_the_forward_and_keep_path(onnx_target, draft_factory):
    m = onnx_target
    m.setup_cache(1)
    prompt = corpus.encode(PROMPT + " what light")
    t = tree_draft.draft_tree(TreeSpec.parse("4x2x2x1"), draft_factory("ngram"), prompt, np.random.default_rng(2), 1.0)
    pos = 5
    m(m.ids(prompt[:pos]), 0)
    ids = prompt[pos:] + t.tokens
    ref = m(m.ids(ids), pos, t.attention(pos, len(prompt) - pos))[0].numpy().copy()
    ref_cache = [a.copy() for a in m._np_cache]
    positions, bias = t.attention_lean(pos, len(prompt) - pos, additive=True)
    lean = m.tree_logits(ids, pos, positions, bias)
    np.testing.assert_array_equal(lean, ref)  # the same graph fed the same values
    for a, b in zip(m._np_cache, ref_cache):
        np.testing.assert_array_equal(a, b)
    slots = [len(prompt) + j for j in (1, 7, 20, 40)]
    m.keep_path(len(prompt), slots)
    moved = [a.copy() for a in m._np_cache]
    for a, b in zip(m._np_cache, ref_cache):
        a[...] = b
    m.keep_path_lean(len(prompt), slots)
    for a, b in zip(m._np_cache, moved):
        np.testing.assert_array_equal(a, b)
    assert not np.array_equal(moved[0], ref_cache[0])  # the path really moved


def _generations(target, draft, spec, seeds, temperature, chars):
    for seed in seeds:
        with pytest.MonkeyPatch.context() as patch:  # the round drafts and walks with the reference code
            patch.setattr(tree_draft, "draft_tree", oracles.draft_tree_reference)
            patch.setattr(tree_walk, "accept_tree", oracles.accept_tree_reference)
            patch.setattr(rounds, "_tree_logits_lean", oracles.tree_logits_reference)
            patch.setattr(target, "keep_path_lean", target.keep_path, raising=False)
            ref = decode._tree_generate(target, draft, PROMPT, chars, spec, seed, temperature)
        lean = decode._tree_generate(target, draft, PROMPT, chars, spec, seed, temperature)
        yield seed, ref, lean


@pytest.fixture(scope="module")
def budget_tree(target, draft_factory):
    return sequoia.optimal_tree(measure_child_acceptance(target, draft_factory("ngram"), chars=100, width=8), 32)[0]


CHARS = {"4x2x2x1": 33, "2x2": 27, "budget": 41}  # a few rounds each, the last one trimmed to what is left


@pytest.mark.parametrize("backend", ["eager", "onnx"])
@pytest.mark.parametrize("shape", ["4x2x2x1", "2x2", "budget"])
def test_lean_tree_generation_is_the_reference_for_seeds_0_to_50(target, onnx_target, draft_factory, budget_tree,
                                                                 backend, shape):
    """Tokens and every count, seeds 0-50 at temperatures 0, 0.7 and 1 (the last round cut short included)."""
    m = onnx_target if backend == "onnx" else target
    spec = budget_tree if shape == "budget" else TreeSpec.parse(shape)
    draft = draft_factory("ngram")
    for temperature in TEMPERATURES:
        with torch.inference_mode():
            for seed, ref, lean in _generations(m, draft, spec, SEEDS, temperature, CHARS[shape]):
                assert lean.ids == ref.ids, (seed, temperature)
                assert lean.stats == ref.stats, (seed, temperature)


def test_settle_tree_round_lean_and_reference_leave_the_same_round(onnx_target, draft_factory):
    """One round at a mid-text position, the cache included: what `tree_timing` times either way."""
    m = onnx_target
    draft = draft_factory("ngram")
    text = corpus.encode(PROMPT + "\nWhat light through yonder window")
    out = []
    for lean in (False, True):
        m.setup_cache(1)
        with torch.inference_mode():
            m(m.ids(text[:-1]), 0)
        rng, tokens = np.random.default_rng(9), list(text)
        stats = decode.GenerationStats(k=4, accepted_per_position=[0] * 5, tried_per_depth=[0] * 4,
                                       accepted_per_depth=[0] * 4)
        with pytest.MonkeyPatch.context() as patch:
            if not lean:  # the reference round: tests/oracles.py's drafting, pass and walk, and `keep_path`
                patch.setattr(tree_draft, "draft_tree", oracles.draft_tree_reference)
                patch.setattr(tree_walk, "accept_tree", oracles.accept_tree_reference)
                patch.setattr(rounds, "_tree_logits_lean", oracles.tree_logits_reference)
                patch.setattr(m, "keep_path_lean", m.keep_path)
            t = tree_draft.draft_tree(TreeSpec.parse("4x2x2x1"), draft, tokens, rng, 1.0)
            with torch.inference_mode():
                new_pos = rounds.settle_tree_round(m, tokens, len(text) - 1, t, rng, 1.0, stats)
        out.append((new_pos, tokens, stats, _state(rng), [a[:, :, : len(tokens)].copy() for a in m._np_cache]))
    (pa, ta, sa, ra, ca), (pb, tb, sb, rb, cb) = out
    assert (pa, ta, sa, ra) == (pb, tb, sb, rb)
    for a, b in zip(ca, cb):
        np.testing.assert_array_equal(a, b)


def test_probs_of_numpy_logits_are_the_probs_of_the_tensor():
    """The lean onnx path hands `sampling.probs` numpy float32 logits, the reference a torch view of them."""
    x = np.random.default_rng(0).normal(size=(5, 84)).astype(np.float32) * 4
    for temperature in TEMPERATURES:
        np.testing.assert_array_equal(sampling.probs(x, temperature), sampling.probs(torch.from_numpy(x), temperature))
