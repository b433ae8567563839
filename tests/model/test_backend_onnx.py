"""The onnx backend: ONNX Runtime runs the single-sequence pass and the target-only step; the rest is eager's."""

import copy
import os

import numpy as np
import pytest
import torch

pytest.importorskip("onnxruntime")

import specdec  # noqa: E402
from specdec.measure.anatomy import ort_profile  # noqa: E402
from specdec.model import backend_onnx, backends, corpus, onnx_graph, onnx_session, sampling  # noqa: E402
from specdec.decoding import generate as decode  # noqa: E402
from specdec.decoding import rounds
from specdec.model.backends import to_backend  # noqa: E402

PROMPT = "ROMEO:\nWhat light through yonder window breaks?"


@pytest.fixture
def onnx_target(target):
    m = to_backend(target, "onnx")
    m.setup_cache(1)
    return m


def test_onnx_is_installed_here_and_named_when_it_is_not(monkeypatch):
    assert "onnx" in specdec.BACKENDS and backends.KNOWN[-1] == "onnx"
    monkeypatch.setitem(backends._MISSING, "onnx", "it needs onnxruntime and onnx: pip install 'specdec-bench[onnx]'")
    monkeypatch.delitem(backends._CLASSES, "onnx")
    with pytest.raises(specdec.UnknownBackendError) as info:
        specdec.load_target(backend="onnx")
    msg = str(info.value)
    assert "\n" not in msg and "'onnx' is not installed" in msg and "specdec-bench[onnx]" in msg


def test_the_session_runs_single_sequence_passes_not_the_eager_forward(onnx_target, no_eager_forward):
    m = onnx_target
    no_eager_forward()
    with torch.inference_mode():
        ids = m.ids(corpus.encode(PROMPT)[:7])
        out = m(ids, 0)
        state = backend_onnx._STATE[m]
        assert out.shape == (1, 7, m.config.vocab_size) and out.data_ptr() == state.logits.data_ptr()
        # the cache the session appends to is the one the rest of specdec sees
        assert m.blocks[0].attn.k_cache.data_ptr() == state.cache[0].ctypes.data
        assert m.blocks[2].attn.v_cache.data_ptr() == state.cache[5].ctypes.data
        rng = np.random.default_rng(0)
        assert 0 <= m.sample_step(corpus.encode(PROMPT)[7:8], 7, 1.0, rng) < m.config.vocab_size
        # a tree of a root and two children at pos 8: the "tree" graph, its keys and values written at 8..10
        mask = torch.ones(3, 11, dtype=torch.bool)
        mask[0, 9:] = mask[1, 10] = mask[2, 9] = False
        before = state.cache[0][0, :, 8:11].copy()
        out = m(m.ids(corpus.encode(PROMPT)[8:11]), 8, (torch.tensor([8, 9, 9]), mask))
        assert out.shape == (1, 3, m.config.vocab_size) and not np.array_equal(state.cache[0][0, :, 8:11], before)
        for eager_only in (lambda: m(ids), lambda: m(torch.cat([ids, ids]), 0)):  # training; a batch of 2
            with pytest.raises(AssertionError, match="eager forward ran"):
                eager_only()


@torch.inference_mode()
@pytest.mark.parametrize("temperature", [1.0, 0.7, 1.6])
def test_the_fused_step_draws_what_sampling_draws_from_the_same_uniform(onnx_target, temperature):
    """The graph's sampling tail is `sampling.pick` on the last position's distribution: same u, same index."""
    m = onnx_target
    ids = corpus.encode(PROMPT)
    state = backend_onnx._STATE[m]
    us = np.concatenate([np.random.default_rng(1).random(300), [0.0, 0.5, 1 - 1e-12]])
    for i, u in enumerate(us):
        pos = 20 + i % 25
        m(m.ids(ids[:pos]), 0)  # the cache holds ids[:pos]; then one step at pos, and the same pass by hand
        fused = state.step(ids[pos : pos + 1], pos, float(u), 1.0 / temperature)
        logits = m(m.ids(ids[pos : pos + 1]), pos)[0, -1]
        assert fused == sampling.pick(sampling.probs(logits, temperature), float(u)), (u, pos)
    assert state.step(ids[20:21], 20, 1 - 1e-12, 1.0) == sampling.pick(np.ones(3), 1 - 1e-12) + 81  # V - 1


@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_decode_step_and_generate_draw_the_same_text_as_eager(target, onnx_target, temperature):
    for seed in range(3):
        a = decode.generate(target, PROMPT, 120, seed=seed, temperature=temperature)
        b = decode.generate(onnx_target, PROMPT, 120, seed=seed, temperature=temperature)
        assert a.text == b.text and a.stats.target_passes == b.stats.target_passes == 120


def test_a_deep_copy_builds_its_own_session_and_sees_weights_written_in_place(target, onnx_target):
    m = onnx_target
    ids = m.ids(corpus.encode(PROMPT)[:9])
    with torch.inference_mode():
        before = m(ids, 0).clone()
    twin = copy.deepcopy(m)  # how the int8/int4 drafts are built: a copy whose weights are then rewritten
    eager = copy.deepcopy(target)
    with torch.no_grad():
        twin.lm_head.weight.mul_(2.0)
        eager.lm_head.weight.mul_(2.0)
    twin.setup_cache(1)
    eager.setup_cache(1)
    with torch.inference_mode():
        assert backend_onnx._STATE[twin] is not backend_onnx._STATE[m]
        assert twin.blocks[0].attn.k_cache.data_ptr() != m.blocks[0].attn.k_cache.data_ptr()
        assert (twin(ids, 0) - eager(ids, 0)).abs().max() < 2e-4
        assert (twin(ids, 0) - before).abs().max() > 1.0
        assert torch.equal(m(ids, 0), before)


def test_the_session_takes_torchs_thread_count_when_it_is_built(onnx_target):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        onnx_target.setup_cache(1)
        assert backend_onnx._STATE[onnx_target].threads == 1
        torch.set_num_threads(2)
        onnx_target.setup_cache(1)  # rebuilt: a timing path that sets threads gets them in the runtime too
        assert backend_onnx._STATE[onnx_target].threads == 2
    finally:
        torch.set_num_threads(before)


def test_the_graph_is_a_valid_onnx_model_with_one_attention_kernel_per_block(target):
    import onnx

    for kind, features in (("pass", False), ("pass", True), ("step", False), ("tree", True)):  # each valid
        other = onnx_graph.graph(target, kind, features)
        # the features output only where asked for (a plain pass's would cost every pass a copy and a binding)
        assert ("features" in [o.name for o in other.graph.output]) == features, kind
        onnx.checker.check_model(other, full_check=True)
        names = [t.name for t in other.graph.initializer]
        assert len(names) == len(set(names)), kind
        ops = [n.op_type for n in other.graph.node]
        assert ops.count("GroupQueryAttention") == target.config.n_layer, kind
        assert ops.count("MatMul") == 4 * target.config.n_layer + 1, kind
        gqa = [n for n in other.graph.node if n.op_type == "GroupQueryAttention"]
        # the tree's mask is GQA's attention_bias (its 11th input); chains pass none
        assert all((list(n.input[10:]) == ["bias"]) == (kind == "tree") for n in gqa), kind
    assert "bias" in [i.name for i in onnx_graph.graph(target, "tree").graph.input]
    g = onnx_graph.graph(target, "step")
    assert [o.name for o in g.graph.output][:1] == ["logits"] and g.graph.output[-1].name == "next"
    assert "features" not in [o.name for o in onnx_graph.graph(target, "pass").graph.output]
    with pytest.raises(ValueError, match="allowed with features: pass, tree"):
        onnx_graph.graph(target, "step", features=True)


@torch.inference_mode()
@pytest.mark.parametrize("temperature", [1.0, 0.5, 0.0])
def test_pass_probs_are_the_eager_distributions_of_the_last_positions(target, onnx_target, temperature):
    """rounds.verify's fused path: the graph's softmax, float64 as the rule reads it, for the last n positions."""
    ids = corpus.encode(PROMPT)
    target.setup_cache(1)
    target(target.ids(ids[:30]), 0)
    onnx_target(onnx_target.ids(ids[:30]), 0)
    for n in (1, 3, 5):
        want = sampling.probs(target(target.ids(ids[30:35]), 30)[0, -n:], temperature)
        got = rounds.verify(onnx_target, ids[30:35], 30, n, temperature)
        assert got.shape == (n, target.config.vocab_size) and got.dtype == np.float64
        assert np.abs(got - want).max() < 1e-5 and np.allclose(got.sum(-1), 1.0, atol=1e-5)


@pytest.mark.parametrize("op,node,expected", [
    ("MatMul", "MatMul_5_0", "matmul"), ("FusedMatMul", "x", "matmul"),
    ("GroupQueryAttention", "attn_0", "attention"), ("Gather", "Gather_1_0", "tensor creation"),
    ("Concat", "Concat_9_0", "tensor creation"), ("LayerNormalization", "y", "elementwise"),
    ("SkipLayerNormalization", "y", "elementwise"), ("Gelu", "y", "elementwise"),
    ("Softmax", "probs/softmax", "logits to sample"), ("CumSum", "sample/s.c", "logits to sample"),
])
def test_kernel_category(op, node, expected):
    assert ort_profile.kernel_category(op, node) == expected


@torch.inference_mode()
def test_kernel_profile_splits_the_runs_inside_and_leaves_the_sessions_as_they_were(onnx_target):
    m = onnx_target
    before = backend_onnx._STATE[m]
    ids = corpus.encode(PROMPT)
    rng = np.random.default_rng(0)
    with ort_profile.kernel_profile(m) as kernels:
        assert backend_onnx._STATE[m] is not before and kernels == {}
        m(m.ids(ids[:20]), 0)  # the pass graph
        m.sample_step(ids[20:21], 20, 1.0, rng)  # the step graph
    assert backend_onnx._STATE[m] is before
    assert kernels["runs"] == 2
    assert kernels["matmul"] > 0 and kernels["attention"] > 0 and kernels["logits to sample"] > 0
    assert kernels["tensor creation"] > 0 and kernels["elementwise"] > 0
    with ort_profile.kernel_profile(to_backend(m, "eager")) as nothing:
        pass
    assert nothing is None


def test_the_runtime_profilers_own_cost_is_measured_positive():
    _, inside = ort_profile.profiler_cost_us(1, nodes=16, runs=50)
    assert inside > 0  # a (1, 128) Add takes a few ns: what its reported time holds is the profiler's


def test_the_runtime_profilers_cost_between_kernels_is_the_extra_time_less_what_it_adds_inside():
    """The arithmetic, from times set here: 16 kernels, profiled runs 48 µs longer, 1 µs of it inside each."""
    assert ort_profile.between_us(100.0, 148.0, 16, 1.0) == pytest.approx(2.0)
    assert ort_profile.between_us(148.0, 100.0, 16, 1.0) == 0.0  # a preempted plain run: no negative cost


def test_a_model_draft_follows_torchs_threads_from_its_next_generation(onnx_target):
    """A draft built while torch had 2 threads, used after they were set to 1 (what a report does: drafts an
    engine or a caller built before it, then `hygiene.set_threads`): its session is rebuilt at the next reset."""
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(2)
        draft = specdec.make_draft("small", onnx_target)
        assert backend_onnx._STATE[draft.model].threads == 2
        torch.set_num_threads(1)
        decode.speculative_generate(onnx_target, draft, PROMPT, 8, 2, 0, 1.0)
        assert backend_onnx._STATE[draft.model].threads == 1
    finally:
        torch.set_num_threads(before)


@pytest.mark.parametrize("user, expected", [(None, "1"), ("0", "0")])
def test_the_runtime_is_imported_with_its_telemetry_off_unless_the_user_said_otherwise(monkeypatch, user, expected):
    """ONNX Runtime reads ORT_DISABLE_TELEMETRY once, when it starts: set before the import, kept where the user
    set it."""
    if user is None:
        monkeypatch.delenv("ORT_DISABLE_TELEMETRY", raising=False)
    else:
        monkeypatch.setenv("ORT_DISABLE_TELEMETRY", user)
    assert onnx_session.runtime().__name__ == "onnxruntime"
    assert os.environ["ORT_DISABLE_TELEMETRY"] == expected


@torch.inference_mode()
def test_passes_with_and_without_features_interleave_with_the_right_logits(target, onnx_target):
    """The plain pass graph has no features output; the first pass a draft wants features from builds the one that
    has: switching back and forth (same T and other T) gives eager's logits each time, features only when asked."""
    toks = corpus.encode(PROMPT)
    target.setup_cache(1)
    onnx_target.setup_cache(1)
    spans = [(0, 5, False), (5, 8, True), (8, 13, False), (13, 16, True), (16, 19, False)]  # T 5, 3, 5, 3, 3
    try:
        for start, end, want in spans:
            onnx_target.want_features = want
            got = onnx_target(onnx_target.ids(toks[start:end]), start)[0].numpy(force=True).copy()
            ref = target(target.ids(toks[start:end]), start)[0].numpy(force=True)
            np.testing.assert_allclose(got, ref, atol=1e-4, rtol=0)
            if want:
                assert tuple(onnx_target.features.shape) == (1, end - start, target.config.n_embd)
    finally:
        onnx_target.want_features, onnx_target.features = False, None
    state = backend_onnx._STATE[onnx_target]
    assert state.feature_pass is not None
    assert "features" not in [o.name for o in state.session.get_outputs()]
    assert "features" in [o.name for o in state.feature_pass[0].get_outputs()]
