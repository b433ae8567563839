"""Token trees: shapes, the mask and positions, the cache fix-up, the dynamic program, tree generation."""

import numpy as np
import pytest
import torch

import specdec
from specdec.model import corpus
from specdec.decoding import trees
from specdec.decoding import sequoia
from specdec.decoding import tree_draft
from specdec.decoding.trees import TreeSpec
from specdec.measure.acceptance import measure_child_acceptance

PROMPT = "ROMEO:"


def test_widths_shape_by_hand():
    s = TreeSpec.from_widths((2, 1, 2))
    # root -> 0, 1; 0 -> 2, 1 -> 3; 2 -> 4, 5; 3 -> 6, 7
    assert s.parents == (-1, -1, 0, 1, 2, 2, 3, 3)
    assert s.depths == (0, 0, 1, 1, 2, 2, 2, 2)
    assert (s.budget, s.depth, str(s)) == (8, 3, "2x1x2")
    assert TreeSpec.parse("4x2x2x1").budget == 4 + 8 + 16 + 16
    assert TreeSpec.parse("8").parents == (-1,) * 8


def test_limit_keeps_a_breadth_first_prefix():
    s = TreeSpec.from_widths((2, 1, 2))
    assert s.limit(100, 2).parents == (-1, -1, 0, 1)
    assert s.limit(3, 5).parents == (-1, -1, 0)
    assert s.limit(0, 5).budget == 0


@pytest.mark.parametrize("text", ["", "4x0", "x2", "a", "4x-1", "2.5"])
def test_bad_shapes_are_one_line_errors(text):
    with pytest.raises(ValueError, match="bad tree shape") as info:
        TreeSpec.parse(text)
    assert "\n" not in str(info.value)


def test_parents_must_come_first_and_breadth_first():
    with pytest.raises(ValueError, match="parent"):
        TreeSpec((-1, 1))
    with pytest.raises(ValueError, match="breadth-first"):
        TreeSpec((-1, 0, -1))


def _tree(parents, tokens):
    depths = list(TreeSpec(tuple(parents)).depths)
    children = [[] for _ in range(len(parents) + 1)]
    for j, a in enumerate(parents):
        children[a + 1].append(j)
    return trees.Tree(list(tokens), list(parents), depths, children, [None] * (len(parents) + 1))


def test_attention_mask_and_positions_by_hand():
    t = _tree([-1, -1, 0, 1], [5, 6, 7, 8])  # root -> 0, 1; 0 -> 2; 1 -> 3
    ids, mask = t.attention(pos=3, n_pending=2)
    assert ids.tolist() == [3, 4, 5, 5, 6, 6]
    expected = np.array([
        # cache 0..2 | pending 3, 4 | nodes 0 1 2 3
        [1, 1, 1, 1, 0, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 0, 0, 0, 0],
        [1, 1, 1, 1, 1, 1, 0, 0, 0],  # node 0: prefix + itself
        [1, 1, 1, 1, 1, 0, 1, 0, 0],  # node 1: not its sibling
        [1, 1, 1, 1, 1, 1, 0, 1, 0],  # node 2: node 0 and itself
        [1, 1, 1, 1, 1, 0, 1, 0, 1],  # node 3: node 1 and itself
    ], dtype=bool)
    np.testing.assert_array_equal(mask.numpy(), expected)


@torch.inference_mode()
@pytest.mark.parametrize("path", [[], [1], [1, 4], [0, 2, 6]])
def test_cache_after_the_move_equals_a_forward_of_the_accepted_text(target, draft_factory, path):
    """Tree pass, keep_path: the cache and the next logits are those of feeding the accepted text in order."""
    target.setup_cache(1)
    prompt = corpus.encode(PROMPT)
    t = tree_draft.draft_tree(TreeSpec.from_widths((2, 2, 2)), draft_factory("bigram"), prompt,
                              np.random.default_rng(3), 1.0)
    pos = 2  # two prompt tokens already cached, four pending
    target(torch.tensor([prompt[:pos]]), 0)
    n_pend = len(prompt) - pos
    logits = target(torch.tensor([prompt[pos:] + t.tokens]), pos, t.attention(pos, n_pend))[0]
    accepted = prompt + [t.tokens[j] for j in path]
    full = target(torch.tensor([accepted]))[0]  # uncached, causal
    # the tree pass scored each node on its own branch: same logits as the plain text up to that node
    rows = [n_pend - 1] + [n_pend + j for j in path]
    torch.testing.assert_close(logits[rows], full[len(prompt) - 1 :], rtol=1e-5, atol=1e-5)
    target.keep_path(len(prompt), [pos + n_pend + j for j in path])
    moved = [(b.attn.k_cache[0, :, : len(accepted)].clone(), b.attn.v_cache[0, :, : len(accepted)].clone())
             for b in target.blocks]
    nxt = corpus.encode("e")
    cont = target(torch.tensor([nxt]), len(accepted))[0, -1]  # generation continues from the moved cache
    torch.testing.assert_close(cont, target(torch.tensor([accepted + nxt]))[0, -1], rtol=1e-5, atol=1e-5)
    target(torch.tensor([accepted]), 0)  # the reference cache: the accepted text fed in order
    for (k, v), b in zip(moved, target.blocks):
        torch.testing.assert_close(k, b.attn.k_cache[0, :, : len(accepted)], rtol=1e-5, atol=1e-5)
        torch.testing.assert_close(v, b.attn.v_cache[0, :, : len(accepted)], rtol=1e-5, atol=1e-5)


def test_draft_tree_children_are_distinct_and_greedy_collapses_to_a_chain(draft_factory):
    d = draft_factory("ngram")
    rng = np.random.default_rng(0)
    t = tree_draft.draft_tree(TreeSpec.from_widths((4, 3)), d, corpus.encode(PROMPT), rng, 1.0)
    assert len(t.tokens) == 16 and t.depths == [0] * 4 + [1] * 12
    for kids in t.children:
        assert len({t.tokens[j] for j in kids}) == len(kids)
    g = tree_draft.draft_tree(TreeSpec.from_widths((4, 3)), d, corpus.encode(PROMPT), rng, 0.0)
    assert g.parents == [-1, 0]  # one-hot q: one child per node


def test_optimal_tree_by_hand():
    # acceptance (0.5, 0.3): with 2 nodes, two children of the root give 1 + .5 + .3 = 1.8 > a chain's
    # 1 + .5 + .25 = 1.75; with 3, a chain of 3 (1.875) loses to 2 children + one under the first (1.8 + .25)
    spec, value = sequoia.optimal_tree([0.5, 0.3], 2)
    assert spec.parents == (-1, -1) and value == pytest.approx(1.8)
    spec, value = sequoia.optimal_tree([0.5, 0.3], 3)
    assert spec.parents == (-1, -1, 0) and value == pytest.approx(2.05)
    spec, value = sequoia.optimal_tree([0.9], 4)  # one child only: a chain, Leviathan's (1 - a^5) / (1 - a)
    assert spec.parents == (-1, 0, 1, 2) and value == pytest.approx((1 - 0.9**5) / 0.1)
    with pytest.raises(ValueError, match="budget must be at least 1"):
        sequoia.optimal_tree([0.5], 0)


def test_measure_child_acceptance_is_deterministic_and_ordered(target, draft_factory):
    a = measure_child_acceptance(target, draft_factory("ngram"), chars=60, width=4, seed=0)
    b = measure_child_acceptance(target, draft_factory("ngram"), chars=60, width=4, seed=0)
    np.testing.assert_array_equal(a, b)
    assert a.shape == (4,) and 0 < a.sum() <= 1 and a[0] == a.max()


SHAPES = ["1", "4", "2x2", "4x2x2x1", "3x1x1x1x1x1", "8x4x1"]


@pytest.mark.parametrize("draft", ["bigram", "ngram"])
@pytest.mark.parametrize("shape", SHAPES)
def test_greedy_tree_equals_greedy_target(target, draft_factory, draft, shape):
    expected = specdec.generate(target, PROMPT, 200, seed=0, temperature=0).text
    out = specdec.speculative_generate(target, draft_factory(draft), PROMPT, 200, k=1, seed=0, temperature=0,
                                       tree=TreeSpec.parse(shape))
    assert out.text == expected


@pytest.mark.parametrize("draft", ["bigram", "ngram"])
@pytest.mark.parametrize("shape,chars", [("4x2x2x1", 200), ("2x2", 37), ("8x1x1", 1), ("4x2", 250)])
def test_tree_stats_are_consistent(target, draft_factory, draft, shape, chars):
    out = specdec.speculative_generate(target, draft_factory(draft), PROMPT, chars, k=1, seed=1,
                                       tree=TreeSpec.parse(shape))
    st = out.stats
    assert len(out.text) == chars == st.chars and st.tree == shape
    assert st.accepted + st.target_passes == chars  # each pass emits its accepted path + one character
    assert sum(st.accepted_per_position) == st.draft_calls <= st.target_passes
    assert sum(i * n for i, n in enumerate(st.accepted_per_position)) == st.accepted
    assert st.accepted_per_depth[0] <= st.tried_per_depth[0] == st.draft_calls
    assert all(0 <= a <= 1 for a in st.depth_acceptance)
    assert st.to_dict()["depth_acceptance"] == st.depth_acceptance


def test_same_seed_same_tree_generation(target, draft_factory):
    spec = TreeSpec.parse("4x2x2x1")
    a = specdec.speculative_generate(target, draft_factory("ngram"), PROMPT, 120, k=1, seed=5, tree=spec)
    b = specdec.speculative_generate(target, draft_factory("ngram"), PROMPT, 120, k=1, seed=5, tree=spec)
    assert a.text == b.text and a.stats == b.stats


def test_trees_refuse_model_drafts_and_adaptive(target, draft_factory):
    with pytest.raises(ValueError, match="needs a table draft"):
        specdec.speculative_generate(target, draft_factory("int8"), PROMPT, 10, k=1, tree=TreeSpec.parse("2"))
    with pytest.raises(ValueError, match="adaptive"):
        specdec.speculative_generate(target, draft_factory("ngram"), PROMPT, 10, k=1, adaptive=True,
                                     tree=TreeSpec.parse("2"))
