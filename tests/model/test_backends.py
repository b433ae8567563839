"""Backends of the target's forward: every kept backend gives eager's logits, texts and exactness verdicts."""

import numpy as np
import pytest
import torch

import specdec
from specdec.model import backends, corpus
from specdec.measure import exactness
from specdec.decoding import trees
from specdec.decoding import tree_draft
from specdec.model.backends import FusedGPT, to_backend
from specdec.decoding.generate import generate, speculative_generate
from specdec.model.gpt import ContextOverflowError

KEPT = [b for b in specdec.BACKENDS if b != "eager"]
PROMPT = "ROMEO:\nWhat light through yonder window breaks?"
TOL = 1e-4


def _max_diff(a: torch.Tensor, b: torch.Tensor) -> float:
    return (a - b).abs().max().item()


def _pair(target, backend: str, kind: str):
    """(eager model, the same model on `backend`): the target itself, or its int8 draft's model."""
    other = to_backend(target, backend)
    if kind == "target":
        return target, other
    return specdec.make_draft("int8", target).model, specdec.make_draft("int8", other).model


def test_backends_start_with_eager_and_fused_is_kept():
    assert specdec.BACKENDS[0] == "eager" and "fused" in specdec.BACKENDS
    assert set(backends.DROPPED).isdisjoint(specdec.BACKENDS)


def test_unknown_backend_is_a_one_line_error_naming_the_allowed_ones():
    with pytest.raises(specdec.UnknownBackendError) as info:
        specdec.load_target(backend="nope")
    msg = str(info.value)
    assert "\n" not in msg and "'nope'" in msg and ", ".join(specdec.BACKENDS) in msg
    with pytest.raises(specdec.UnknownBackendError, match="'compile' was tried and dropped here: torch.compile"):
        specdec.load_target(backend="compile")


@pytest.mark.parametrize("backend", KEPT)
def test_load_target_converts_and_keeps_weights_and_meta(target, backend):
    m = specdec.load_target(backend=backend)
    assert backends.backend_of(m) == backend and m.meta["sha256"] == target.meta["sha256"]
    # the backend's buffers are neither parameters nor saved: the checkpoint format is the eager one
    assert m.state_dict().keys() == target.state_dict().keys()
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in target.named_parameters()]
    for (_, a), (_, b) in zip(m.state_dict().items(), target.state_dict().items()):
        assert torch.equal(a, b)


@torch.inference_mode()
@pytest.mark.parametrize("kind", ["target", "int8"])
@pytest.mark.parametrize("backend", KEPT)
def test_logits_match_eager_prefill_steps_verify_and_tree(target, backend, kind):
    eager, other = _pair(target, backend, kind)
    assert type(other) is backends._CLASSES[backend]
    for m in (eager, other):
        m.setup_cache(1)
    ids = corpus.encode(PROMPT)

    def both(tokens, pos, tree=None):
        a = eager(eager.ids(tokens), pos, tree).clone()
        b = other(other.ids(tokens), pos, tree).clone()
        assert a.shape == b.shape and _max_diff(a, b) < TOL, (pos, len(tokens), _max_diff(a, b))
        return a

    both(ids[:20], 0)  # prefill
    for p in range(20, 30):  # single positions
        both(ids[p : p + 1], p)
    both(ids[30:35], 30)  # a 5-position verify pass
    # a tree pass: two pending tokens, then a 2x2x2 tree from the bigram draft
    pos, n_pend = 35, 2
    t = tree_draft.draft_tree(trees.TreeSpec.from_widths((2, 2, 2)), specdec.make_draft("bigram", target),
                         ids[: pos + n_pend], np.random.default_rng(3), 1.0)
    both(ids[pos : pos + n_pend] + t.tokens, pos, t.attention(pos, n_pend))
    path = [1, 3] if len(t.tokens) > 3 else [0]
    for m in (eager, other):
        m.keep_path(pos + n_pend, [pos + n_pend + j for j in path])
    for be, bo in zip(eager.blocks, other.blocks):  # the cache after the move, as the next pass reads it
        n = pos + n_pend + len(path)
        assert _max_diff(be.attn.k_cache[:, :, :n], bo.attn.k_cache[:, :, :n]) < TOL
        assert _max_diff(be.attn.v_cache[:, :, :n], bo.attn.v_cache[:, :, :n]) < TOL
    both(ids[:1], pos + n_pend + len(path))


@pytest.mark.parametrize("backend", KEPT)
def test_outside_inference_mode_batches_and_training_windows(target, backend):
    other = to_backend(target, backend)
    ids = corpus.encode(PROMPT)[:12]
    for m in (target, other):
        m.setup_cache(2)
    batch = torch.tensor([ids, ids[::-1]])
    with torch.no_grad():
        a = target(batch, 0)
    b = other(batch, 0)  # grad mode on: the backend still runs (as inference) and matches
    assert not b.requires_grad and _max_diff(a, b) < TOL
    assert torch.equal(target(batch), other(batch))  # pos=None: the eager training forward itself
    with pytest.raises(ContextOverflowError, match="exceed the context of 256"):
        other(torch.tensor([ids]), 250)
    with pytest.raises(RuntimeError, match="exceeds the KV cache's 2"):
        other(torch.zeros(3, 1, dtype=torch.long), 0)
    target.setup_cache(1)


@pytest.mark.parametrize("backend", KEPT)
def test_drafts_built_from_a_target_use_its_backend(target, backend):
    other = to_backend(target, backend)
    cls = backends._CLASSES[backend]
    for name in ("int8", "int4", "small"):
        m = specdec.make_draft(name, other).model
        assert type(m) is cls, name
        # its own cache: running the draft leaves the target's cache alone
        assert m.blocks[0].attn.k_cache.data_ptr() != other.blocks[0].attn.k_cache.data_ptr()


@pytest.mark.parametrize("backend", KEPT)
def test_greedy_texts_equal_eager(target, backend):
    other = to_backend(target, backend)
    ref = generate(target, "ROMEO:", 200, 0, temperature=0).text
    assert generate(other, "ROMEO:", 200, 0, temperature=0).text == ref
    for name in ("int8", "bigram", "int8-dynamic"):  # int8-dynamic: quantized Linears, the eager path inside
        out = speculative_generate(other, specdec.make_draft(name, other), "ROMEO:", 200, 4, 0, temperature=0)
        assert out.text == ref, name
    out = speculative_generate(other, specdec.make_draft("bigram", other), "ROMEO:", 200, 1, 0, temperature=0,
                               tree=trees.TreeSpec.parse("4x2x2x1"))
    assert out.text == ref


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("backend", KEPT)
def test_sampled_speculative_texts_equal_eager_seed_for_seed(target, backend, seed):
    """Same seed, same random stream: only the forward differs, by float rounding far below any draw's
    margin here, so the texts and the statistics are identical."""
    other = to_backend(target, backend)
    for name in ("int8", "bigram"):
        a = speculative_generate(target, specdec.make_draft(name, target), "ROMEO:", 200, 4, seed)
        b = speculative_generate(other, specdec.make_draft(name, other), "ROMEO:", 200, 4, seed)
        assert a.text == b.text and a.stats == b.stats, name


@pytest.mark.parametrize("backend", KEPT)
def test_exactness_checks_pass_on_the_backend(target, backend):
    other = to_backend(target, backend)
    drafts = {n: specdec.make_draft(n, other) for n in ("int8", "bigram")}
    rows = exactness.verify(other, drafts, k=4, samples=3000, seed=0)
    assert [r["verdict"] for r in rows] == ["exact", "exact"], rows
    (joint,) = exactness.verify_joint(other, {"int8": drafts["int8"]}, k=2, samples=150, seed=0)
    assert joint["verdict"] == "exact", joint


def test_to_backend_copies_and_round_trips(target):
    fused = to_backend(target, "fused")
    assert isinstance(fused, FusedGPT) and fused is not target and to_backend(fused, "fused") is fused
    assert fused.wte.weight.data_ptr() != target.wte.weight.data_ptr()  # a copy: the eager target is intact
    back = to_backend(fused, "eager")
    assert type(back) is specdec.GPT and back.blocks[0].attn.k_cache.shape == target.blocks[0].attn.k_cache.shape
    with torch.inference_mode():
        ids = target.ids(corpus.encode(PROMPT)[:9])
        back.setup_cache(1)
        target.setup_cache(1)
        assert torch.equal(back(ids, 0), target(ids, 0))


def test_fused_forward_does_not_run_the_eager_one(target, no_eager_forward):
    """Otherwise every test above would pass with the eager forward in disguise."""
    fused = to_backend(target, "fused")
    dynamic = specdec.make_draft("int8-dynamic", fused).model  # quantized Linears: the eager forward, by design
    no_eager_forward()
    with torch.inference_mode():
        ids = fused.ids(corpus.encode(PROMPT)[:7])
        out = fused(ids, 0)
        assert out.data_ptr() == fused._logits.data_ptr()  # the preallocated logits buffer
        with pytest.raises(AssertionError, match="eager forward ran"):
            dynamic(ids, 0)
        with pytest.raises(AssertionError, match="eager forward ran"):
            fused(ids)  # training windows: eager


def test_numpy_forward_does_not_run_the_eager_one(target, no_eager_forward):
    fast = to_backend(target, "numpy")
    fast.setup_cache(1)
    no_eager_forward()
    with torch.inference_mode():
        ids = fast.ids(corpus.encode(PROMPT)[:7])
        out = fast(ids, 0)
        # the logits are a view of numpy memory and the cache views share the numpy cache: no copies
        assert out.shape == (1, 7, fast.config.vocab_size)
        assert fast.blocks[0].attn.k_cache.data_ptr() == fast._kv[0].ctypes.data
        with pytest.raises(AssertionError, match="eager forward ran"):
            fast(ids)  # training windows: eager


def test_numpy_refolds_weights_written_in_place_and_each_copy_has_its_own_cache(target):
    import copy

    fast = to_backend(target, "numpy")
    ids = fast.ids(corpus.encode(PROMPT)[:9])
    fast.setup_cache(1)
    with torch.inference_mode():
        before = fast(ids, 0).clone()
    twin = copy.deepcopy(fast)  # how quantized drafts are built: a deep copy whose weights are then rewritten
    twin.setup_cache(1)
    assert twin._kv[0].ctypes.data != fast._kv[0].ctypes.data  # its own cache, linked to its own views
    assert twin.blocks[0].attn.v_cache.data_ptr() == twin._kv[0].ctypes.data + twin._kv[0][0, 0, 0].nbytes
    eager = copy.deepcopy(target)
    with torch.no_grad():
        twin.lm_head.weight.mul_(2.0)  # written in place: same storage, a new version
        eager.lm_head.weight.mul_(2.0)
    twin.setup_cache(1)
    eager.setup_cache(1)
    with torch.inference_mode():
        assert _max_diff(twin(ids, 0), eager(ids, 0)) < 2 * TOL
        assert _max_diff(twin(ids, 0), before) > 1.0  # the change reached the folded weights
        assert torch.equal(fast(ids, 0), before)  # and the original kept its own
