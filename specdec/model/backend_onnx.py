"""The `onnx` backend: the target's decoding forward as one ONNX graph run by ONNX Runtime with I/O binding.

Why: a pass of this model is per-call overhead (the report's overhead table), and ONNX Runtime walks a graph
of ~36 kernels in C++ with one call from Python. Attention is ONNX Runtime's `GroupQueryAttention` contrib
kernel, the one its own LLM decoding uses: it reads the KV cache in place and appends the new positions'
keys and values to it (past and present bound to the same memory), so a pass copies no cache at all.

How it is wired (I/O binding: no input or output is copied between numpy and the runtime):
- The KV cache is one float32 numpy array per block and per k/v, (batch, n_head, context, head_size) -- the
  eager cache's own layout -- exposed to the rest of specdec as torch views of the same memory
  (`attn.k_cache`, `attn.v_cache`), so `keep_path`, the trees and the eager fallback read and write it.
- ids and positions live in preallocated int64 rows; a pass writes them and the two lengths GQA wants, and
  rebinds only when the number of positions T changes (a decode loop keeps one T).
- The logits are written by the runtime into a preallocated buffer; the returned tensor is a view of it,
  valid until this model's next forward (every caller in specdec samples from it first), as `fused`'s are.

A tree pass needs the tree's mask: its nodes see the cache and their own ancestors only. It runs a third graph
("tree"), the pass graph with GroupQueryAttention's `attention_bias` input bound to the additive mask (0 where
allowed, -inf elsewhere) over the cache and the new positions. GQA's own causal mask is kept underneath, which
is harmless: a node's ancestors come before it in the tree's order, so the tree mask allows nothing the causal
one forbids. The nodes' keys and values land in the cache at pos.., where `keep_path` expects them, with no
copy of the past. What runs the eager forward instead (same weights, same cache memory, so results
agree): training windows (pos=None), batches of more than one sequence, models off the CPU, and the
int8-dynamic draft's quantized Linears.

Variants measured on the development VM (1 thread, a single-position pass at position 100, medians of 15
alternated blocks of 50, 2026-12-01): attention written as plain ONNX ops (Concat of the past with the new
keys and values, Gather, Transpose, MatMul, Softmax; the past fed as a numpy slice) ran 264 us with `run` and
297 us with every input and the cache rebound per pass -- the binding calls cost more than the copies they saved
-- against 306 us for the numpy backend; GroupQueryAttention with the cache bound once and in place ran 205 us
(a 5-position verify pass: 232 us, against numpy's 516). ONNX Runtime's own profiler stretches a run a lot --
profiled, a step took 602 us against 203 us, and the kernels it timed summed to 353 us -- so `kernel_profile`
measures what it adds per kernel and the attribution uses its figures only in proportion.

The session is built from the weights when `setup_cache` sees them new or changed (a draft built from this
model overwrites a copy's weights in place before its first generation) and with torch's intra-op thread count
of that moment; it lives outside the module (`_STATE`), so `copy.deepcopy` makes a model that builds its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile
import time
import weakref

import numpy as np
import torch
import torch.nn as nn

from specdec.model import sampling
from specdec.model.gpt import GPT

try:  # an optional dependency: `pip install specdec-bench[onnx]`; without it the backend is not in BACKENDS
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper
except ImportError:  # pragma: no cover - exercised only where onnxruntime is missing
    ort = None

AVAILABLE = ort is not None
OPSET = 20  # LayerNormalization (17) and Gelu with approximate="tanh" (20)


def graph(model: GPT, kind: str = "pass") -> "onnx.ModelProto":
    """The cached forward of one sequence as an ONNX model, `model`'s weights as initializers.

    kind "pass" and "step" (attention by GroupQueryAttention over the whole cache buffer): inputs ids,
    positions (1, T) int64; seqlens_k (1,) int32 = pos + T - 1; total_len () int32 = pos + T; past_key_i,
    past_value_i (1, H, context, hs) per block; inv_temp () float32. Outputs logits (1, T, V); present_key_i,
    present_value_i (the same shape as past: bound to the same memory, GQA appends in place). "pass" adds
    probs (1, T, V) = softmax(logits · inv_temp), what the rule reads; "step" a target-only step's sampling
    (`_sample_tail`): input u () float32, output next () int64.
    kind "tree" (the tree's mask on top of GQA's causal one): the inputs and outputs of "pass" without inv_temp and
    probs, plus bias (1, 1, T, pos + T) float32, 0 where a position may attend and -inf elsewhere.
    """
    if kind not in ("pass", "step", "tree"):
        raise ValueError(f"unknown graph kind {kind!r} (allowed: pass, step, tree)")
    cfg = model.config
    g = _Builder(cfg)
    f32 = TensorProto.FLOAT
    inputs = [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, "T"]),
              helper.make_tensor_value_info("positions", TensorProto.INT64, [1, "T"])]
    inputs += [helper.make_tensor_value_info("seqlens_k", TensorProto.INT32, [1]),
               helper.make_tensor_value_info("total_len", TensorProto.INT32, [])]
    if kind == "tree":
        inputs.append(helper.make_tensor_value_info("bias", f32, [1, 1, "T", "S"]))
    outputs = [helper.make_tensor_value_info("logits", f32, [1, "T", cfg.vocab_size])]
    x = g.node("Add", [g.node("Gather", [g.init("wte", model.wte.weight), "ids"]),
                       g.node("Gather", [g.init("wpe", model.wpe.weight), "positions"])])  # (1, T, C)
    for i, b in enumerate(model.blocks):
        x = _block(g, x, b, i, kind, inputs, outputs)
    g.nodes.append(helper.make_node("MatMul", [g.layer_norm(x, model.ln_f, "ln_f"),
                                               g.init("lm_head.wT", model.lm_head.weight, transpose=True)],
                                    ["logits"]))
    if kind != "tree":
        inputs.append(helper.make_tensor_value_info("inv_temp", f32, []))
    if kind == "step":
        inputs.append(helper.make_tensor_value_info("u", f32, []))
        outputs.append(helper.make_tensor_value_info("next", TensorProto.INT64, []))
        _sample_tail(g.nodes, g.inits, cfg.vocab_size)
    elif kind == "pass":
        outputs.append(helper.make_tensor_value_info("probs", f32, [1, "T", cfg.vocab_size]))
        g.nodes.append(helper.make_node("Mul", ["logits", "inv_temp"], ["probs/z"], name="probs/mul"))
        g.nodes.append(helper.make_node("Softmax", ["probs/z"], ["probs"], name="probs/softmax", axis=-1))
    model_graph = helper.make_graph(g.nodes, f"specdec_target_{kind}", inputs, outputs, g.inits)
    return helper.make_model(model_graph, opset_imports=[helper.make_opsetid("", OPSET),
                                                         helper.make_opsetid("com.microsoft", 1)])


class _Builder:
    """One graph's nodes and initializers as `graph` adds them, and the helpers that add them."""

    def __init__(self, cfg):
        self.C, self.H, self.ctx = cfg.n_embd, cfg.n_head, cfg.context
        self.hs = cfg.n_embd // cfg.n_head
        self.inits, self.nodes = [], []

    def init(self, name: str, t: torch.Tensor, transpose: bool = False) -> str:
        a = t.detach().to(torch.float32).cpu().numpy()
        self.inits.append(numpy_helper.from_array(np.ascontiguousarray(a.T if transpose else a), name))
        return name

    def node(self, op: str, inputs: list[str], n_out: int = 1, domain: str = "", **attrs) -> str | list[str]:
        outs = [f"{op}_{len(self.nodes)}_{j}" for j in range(n_out)]
        self.nodes.append(helper.make_node(op, inputs, outs, name=outs[0], domain=domain, **attrs))
        return outs[0] if n_out == 1 else outs

    def layer_norm(self, x: str, ln: nn.LayerNorm, name: str) -> str:
        return self.node("LayerNormalization", [x, self.init(f"{name}.w", ln.weight), self.init(f"{name}.b", ln.bias)],
                         axis=-1, epsilon=ln.eps)

    def linear(self, x: str, lin: nn.Linear, name: str) -> str:
        return self.node("MatMul", [x, self.init(f"{name}.wT", lin.weight, transpose=True)])  # (.., in) @ (in, out)


def _block(g: _Builder, x: str, b: nn.Module, i: int, kind: str, inputs: list, outputs: list) -> str:
    """Transformer block i on x, (1, T, C): its cache inputs and outputs (the whole cache buffer, which GQA
    appends to in place) appended to `inputs` and `outputs`; a tree pass adds its mask as GQA's attention_bias."""
    f32, H, hs = TensorProto.FLOAT, g.H, g.hs
    qkv = g.linear(g.layer_norm(x, b.ln1, f"ln1.{i}"), b.attn.qkv, f"qkv.{i}")  # (1, T, 3C) packed q, k, v
    for which in ("key", "value"):
        inputs.append(helper.make_tensor_value_info(f"past_{which}_{i}", f32, [1, H, g.ctx, hs]))
        outputs.append(helper.make_tensor_value_info(f"present_{which}_{i}", f32, [1, H, g.ctx, hs]))
    y = f"attn_{i}"
    gqa_in = [qkv, "", "", f"past_key_{i}", f"past_value_{i}", "seqlens_k", "total_len"]
    if kind == "tree":  # cos_cache, sin_cache and position_ids unused (learned positions), then attention_bias
        gqa_in += ["", "", "", "bias"]
    g.nodes.append(helper.make_node(  # causal over the cache and the T new positions; scale 1/sqrt(hs)
        "GroupQueryAttention", gqa_in, [y, f"present_key_{i}", f"present_value_{i}"], domain="com.microsoft",
        num_heads=H, kv_num_heads=H))
    x = g.node("Add", [x, g.linear(y, b.attn.proj, f"proj.{i}")])
    h = g.node("Gelu", [g.linear(g.layer_norm(x, b.ln2, f"ln2.{i}"), b.mlp.fc, f"fc.{i}")], approximate="tanh")
    return g.node("Add", [x, g.linear(h, b.mlp.proj, f"mlp_proj.{i}")])


def _sample_tail(nodes: list, inits: list, vocab: int) -> None:
    """logits -> next: `sampling.pick(softmax(last row · inv_temp), u)` as graph nodes, float32.

    The same search as the numpy path: the number of partial sums of exp(z - max z) that are <= u times their
    total, capped at V - 1. Normalising is left out (the search scales u instead), as `pick` does; float32 sums
    against numpy's float64 move a boundary by ~1e-7 of its probability, so a seed draws the same characters
    unless u lands that close to one.
    """
    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.int64), name))
        return name

    def node(op: str, inputs: list[str], out: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [out], name=f"sample/{out}", **attrs))
        return out

    last = node("Slice", ["logits", const("s.m1", [-1]), const("s.end", [2**62]), const("s.ax1", [1])], "s.last")
    z = node("Mul", [last, "inv_temp"], "s.z")  # (1, 1, V)
    e = node("Exp", [node("Sub", [z, node("ReduceMax", [z, const("s.ax2", [2])], "s.max", keepdims=1)], "s.zc")],
             "s.e")
    c = node("CumSum", [e, const("s.axis", 2)], "s.c")
    at = node("Mul", [node("Slice", [c, "s.m1", "s.end", "s.ax2"], "s.total"), "u"], "s.at")
    count = node("ReduceSum", [node("Cast", [node("LessOrEqual", [c, at], "s.le")], "s.le64", to=TensorProto.INT64)],
                 "s.count", keepdims=0)
    node("Min", [count, const("s.vmax", vocab - 1)], "next")


def kernel_category(op: str, node: str) -> str:
    """The attribution category (`overhead.CATEGORIES`) of one kernel ONNX Runtime ran, by its op and node name."""
    if node.startswith(("sample/", "probs/")):  # the sampling tail and the rule's softmax: `graph`'s names
        return "logits to sample"
    if op in ("MatMul", "FusedMatMul", "Gemm"):
        return "matmul"
    if "Attention" in op:
        return "attention"
    if op in ("Gather", "Concat", "Reshape", "Transpose", "Split", "Identity", "Slice", "Cast", "Squeeze",
              "Unsqueeze"):
        return "tensor creation"
    return "elementwise"  # LayerNormalization (and its fused Skip form), Gelu, Add, Mul, Softmax, ...


def _kernel_events(path: str) -> tuple[list[tuple[str, str, float]], int]:
    """(op, node name, µs) of every kernel in an ONNX Runtime profile file, and the number of model runs."""
    with open(path) as f:
        events = json.load(f)
    runs = sum(1 for e in events if e.get("cat") == "Session" and e["name"] == "model_run")
    return [(e["args"].get("op_name", ""), e["name"][: -len("_kernel_time")], float(e["dur"])) for e in events
            if e.get("cat") == "Node" and e["name"].endswith("_kernel_time")], runs


def profiler_cost_us(threads: int, nodes: int = 64, runs: int = 300) -> tuple[float, float]:
    """What ONNX Runtime's profiler adds per kernel it records, here and now: (between kernels, inside the
    kernel's own reported time), µs. Measured on a chain of `nodes` Adds of a (1, 128) row, whose own work is
    a few ns: every reported µs of theirs is the profiler's, and the rest of what the profiled runs took beyond
    plain ones is its bookkeeping between them (best of three blocks of `runs` each)."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 128])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 128])
    chain = [helper.make_node("Add", ["x" if i == 0 else f"h{i}", "x"], ["y" if i == nodes - 1 else f"h{i + 1}"],
                              name=f"add{i}") for i in range(nodes)]
    model = helper.make_model(helper.make_graph(chain, "chain", [x], [y]),
                              opset_imports=[helper.make_opsetid("", OPSET)]).SerializeToString()
    feed = {"x": np.ones((1, 128), dtype=np.float32)}
    with tempfile.TemporaryDirectory() as tmp:
        best = []
        for prefix in (None, os.path.join(tmp, "chain")):
            opts = _options(threads, prefix)
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the chain
            session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            session.run(None, feed)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                for _ in range(runs):
                    session.run(None, feed)
                times.append((time.perf_counter() - t0) / runs * 1e6)
            best.append(min(times))
            if prefix is not None:
                kernels, _ = _kernel_events(session.end_profiling())
    inside = sum(us for _, _, us in kernels) / len(kernels)
    return max(0.0, (best[1] - best[0]) / nodes - inside), inside


@contextlib.contextmanager
def kernel_profile(model: GPT):
    """While inside, `model` runs sessions built with ONNX Runtime's profiler on; on leaving, the dict it yields
    is filled: category -> µs its kernels took (`kernel_category`), less what the profiler adds inside each
    kernel's time; "profiler_us" -> what it added in all (`profiler_cost_us` per kernel recorded); "runs" ->
    session runs. Yields None for a model without a session (the eager forward). The model's own sessions come
    back afterwards untouched."""
    state = _STATE.get(model)
    if state is None:
        yield None
        return
    out: dict[str, float] = {}
    between, inside = profiler_cost_us(state.threads)
    with tempfile.TemporaryDirectory() as tmp:
        prof = _Session(model, state.key, state.threads, profile_prefix=os.path.join(tmp, "ort"))
        prof.bind_cache(state.cache)
        _STATE[model] = prof
        try:
            yield out
        finally:
            _STATE[model] = state
            kernels, runs = [], 0
            for session in prof.sessions():
                got, n = _kernel_events(session.end_profiling())
                kernels += got
                runs += n
            for op, node, us in kernels:
                cat = kernel_category(op, node)
                out[cat] = out.get(cat, 0.0) + max(0.0, us - inside)
            out["profiler_us"] = len(kernels) * (between + inside)
            out["runs"] = runs


def _options(threads: int, profile_prefix: str | None = None) -> "ort.SessionOptions":
    """Session options: `threads` intra-op threads, sequential, every graph optimisation; with
    `profile_prefix`, ONNX Runtime's profiler on (files under that prefix)."""
    opts = ort.SessionOptions()
    if profile_prefix is not None:  # `kernel_profile`: every session built from these options profiles
        opts.enable_profiling = True
        opts.profile_file_prefix = profile_prefix
    opts.intra_op_num_threads = threads
    opts.inter_op_num_threads = 1
    opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")  # no busy-waiting thread pool
    opts.log_severity_level = 3  # warnings about the optimised graph are not the user's business
    return opts


class _Session:
    """One built session, its binding and the buffers it reads and writes (one model's; see `_STATE`)."""

    def __init__(self, model: GPT, key: tuple, threads: int, profile_prefix: str | None = None):
        cfg = model.config
        opts = _options(threads, profile_prefix)
        self.key, self.threads, self.opts = key, threads, opts
        self.model = weakref.proxy(model)  # the step and tree graphs are built on first use, from the same weights
        self.session = ort.InferenceSession(graph(model, "pass").SerializeToString(), opts,
                                            providers=["CPUExecutionProvider"])
        self.binding = self.session.io_binding()
        self.stepper = None  # (session, binding) of graph "step", built by the first `step`
        self.tree_session = None  # (session, binding) of graph "tree", built by the first `tree_run`
        self.ids = np.zeros((1, cfg.context), dtype=np.int64)
        self.positions = np.zeros((1, cfg.context), dtype=np.int64)
        self.seqlens = np.zeros(1, dtype=np.int32)
        self.total = np.zeros((), dtype=np.int32)
        self.logits = torch.zeros(1, cfg.context, cfg.vocab_size)  # the runtime writes here (torch's memory)
        self.logits_np = self.logits.numpy()  # the same memory, for the paths that never touch torch
        self.arange = np.arange(cfg.context, dtype=np.int64)  # positions are a slice of it: no range conversion
        self.probs = np.zeros((1, cfg.context, cfg.vocab_size), dtype=np.float32)
        self.cache: list[np.ndarray] = []  # per block: keys, values (batch, H, context, hs)
        self.bound_t = 0  # the T of the current binding of ids, positions and logits; 0 = none yet
        self.u = np.zeros((), dtype=np.float32)
        self.inv_temp = np.ones((), dtype=np.float32)
        self.next = np.zeros((), dtype=np.int64)
        self.step_t = 0  # as bound_t, for the stepper's binding
        self._bind_lengths(self.binding)

    def sessions(self) -> list:
        """Every session built so far: the pass's, and the step's and the tree's once they ran."""
        return [self.session] + ([self.stepper[0]] if self.stepper else []) + (
            [self.tree_session[0]] if self.tree_session else [])

    def _bind_lengths(self, b, inv_temp: bool = True) -> None:
        b.bind_input("seqlens_k", "cpu", 0, np.int32, [1], self.seqlens.ctypes.data)
        b.bind_input("total_len", "cpu", 0, np.int32, [], self.total.ctypes.data)
        if inv_temp:  # the tree graph has none: its logits go to `sampling.probs`
            b.bind_input("inv_temp", "cpu", 0, np.float32, [], self.inv_temp.ctypes.data)

    def bind_cache(self, cache: list[np.ndarray]) -> None:
        """Bind sequence 0 of each cache array as past and present (the same memory: GQA appends in place)."""
        self.cache = cache
        for b in [self.binding] + [s[1] for s in (self.stepper, self.tree_session) if s]:
            for j, a in enumerate(cache):
                name = f"{('key', 'value')[j % 2]}_{j // 2}"
                shape = [1, *a.shape[1:]]
                b.bind_input(f"past_{name}", "cpu", 0, np.float32, shape, a.ctypes.data)
                b.bind_output(f"present_{name}", "cpu", 0, np.float32, shape, a.ctypes.data)

    def _bind_t(self, b, T: int, probs: bool = True) -> None:
        """(Re)bind ids, positions, logits (and probs) as T positions (buffers' starts, so only T changes a
        binding)."""
        V = self.logits.shape[-1]
        b.bind_input("ids", "cpu", 0, np.int64, [1, T], self.ids.ctypes.data)
        b.bind_input("positions", "cpu", 0, np.int64, [1, T], self.positions.ctypes.data)
        b.bind_output("logits", "cpu", 0, np.float32, [1, T, V], self.logits.data_ptr())
        if probs:
            b.bind_output("probs", "cpu", 0, np.float32, [1, T, V], self.probs.ctypes.data)

    def _lengths(self, T: int, pos: int, positions: np.ndarray | None = None) -> None:
        """Write the T positions (pos.. in order, or a tree's `positions`) and the two lengths GQA reads."""
        self.positions[0, :T] = self.arange[pos : pos + T] if positions is None else positions
        self.seqlens[0] = pos + T - 1
        self.total[()] = pos + T

    def _pass(self, ids, pos: int) -> int:
        """Run the pass graph over ids (a row of T ids) at pos; returns T. Outputs land in logits and probs."""
        T = len(ids)
        self.ids[0, :T] = ids
        self._lengths(T, pos)
        if T != self.bound_t:
            self._bind_t(self.binding, T)
            self.bound_t, self.view = T, self.logits[:, :T]
        self.session.run_with_iobinding(self.binding)
        return T

    def run(self, idx: torch.Tensor, pos: int) -> torch.Tensor:
        self._pass(idx.numpy(force=True)[0], pos)
        return self.view

    def distributions(self, ids: list[int], pos: int, n: int, inv_temp: float) -> np.ndarray:
        """The pass over ids at pos; the last n positions' distributions at temperature 1/inv_temp, (n, V)
        float64 (the rule subtracts them; as `sampling.probs` gives), from the graph's softmax."""
        self.inv_temp[()] = inv_temp
        T = self._pass(ids, pos)
        return self.probs[0, T - n : T].astype(np.float64)  # the one copy: float32 to the rule's float64

    def last_logits(self, ids: list[int], pos: int, n: int) -> np.ndarray:
        """The pass over ids at pos; the last n positions' logits (n, V) float32, a view valid until the next
        pass (temperature 0 reads their argmax: the forward's logits, without a torch tensor either way)."""
        T = self._pass(ids, pos)
        return self.logits_np[0, T - n : T]

    def tree(self, idx: torch.Tensor, pos: int, tree: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        """A tree pass (graph "tree") from `forward`'s tensors: `tree_run` on them as numpy, the bool mask made
        additive here (the reference round's path; `OnnxGPT.tree_logits` is the lean one)."""
        bias = np.where(tree[1].numpy(force=True), np.float32(0.0), np.float32(-np.inf))
        return torch.from_numpy(self.tree_run(idx.numpy(force=True), pos, tree[0].numpy(force=True)[None], bias))

    def tree_run(self, ids: np.ndarray, pos: int, positions: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """Graph "tree" over ids and positions (1, T) int64 under the additive mask bias (T, pos + T) float32,
        bound as it is (no copy); the nodes' keys and values land in the cache at pos.. (where `keep_path`
        expects them). Returns the logits (1, T, V) float32: a view, valid until this model's next pass."""
        if self.tree_session is None:
            session = ort.InferenceSession(graph(self.model, "tree").SerializeToString(), self.opts,
                                           providers=["CPUExecutionProvider"])
            b = session.io_binding()
            self._bind_lengths(b, inv_temp=False)
            self.tree_session = (session, b)
            self.bind_cache(self.cache)
        session, b = self.tree_session
        T = ids.shape[1]
        self.ids[0, :T] = ids[0]
        self._lengths(T, pos, positions[0])
        bias = np.ascontiguousarray(bias, dtype=np.float32)  # (T, pos + T): already so from `attention_lean`
        self._bind_t(b, T, probs=False)
        b.bind_input("bias", "cpu", 0, np.float32, [1, 1, T, pos + T], bias.ctypes.data)
        session.run_with_iobinding(b)
        return self.logits_np[:, :T]

    def step(self, ids: list[int], pos: int, u: float, inv_temp: float) -> int:
        """One target-only step in one run: the pass over ids at pos, then the sample drawn with u."""
        if self.stepper is None:
            session = ort.InferenceSession(graph(self.model, "step").SerializeToString(), self.opts,
                                           providers=["CPUExecutionProvider"])
            b = session.io_binding()
            self._bind_lengths(b)
            b.bind_input("u", "cpu", 0, np.float32, [], self.u.ctypes.data)
            b.bind_output("next", "cpu", 0, np.int64, [], self.next.ctypes.data)
            self.stepper = (session, b)
            self.bind_cache(self.cache)
        T = len(ids)
        self.ids[0, :T] = ids
        self._lengths(T, pos)
        self.u[()] = u
        self.inv_temp[()] = inv_temp
        session, b = self.stepper
        if T != self.step_t:
            self._bind_t(b, T, probs=False)
            self.step_t = T
        session.run_with_iobinding(b)
        return int(self.next)


_STATE: "weakref.WeakKeyDictionary[OnnxGPT, _Session | None]" = weakref.WeakKeyDictionary()


class OnnxGPT(GPT):
    """`GPT` whose single-sequence cached forward runs as an ONNX Runtime session (see the module docstring)."""

    def setup_cache(self, batch: int = 1) -> None:
        """Allocate the cache (numpy arrays, torch views as `attn.k_cache` / `attn.v_cache`) and (re)build the
        session when the weights or torch's thread count changed since the last call. Every generation calls
        this first, so a pass never checks them."""
        state = self._session()
        cache = state.cache if state is not None else getattr(self, "_np_cache", [])
        if cache and cache[0].shape[0] >= batch and self.blocks[0].attn.k_cache.data_ptr() == cache[0].ctypes.data:
            if state is not None and state.cache is not cache:
                state.bind_cache(cache)
            return
        cfg = self.config
        shape = (batch, cfg.n_head, cfg.context, cfg.n_embd // cfg.n_head)
        cache = [np.zeros(shape, dtype=np.float32) for _ in range(2 * cfg.n_layer)]
        for j, block in enumerate(self.blocks):
            block.attn.k_cache = torch.from_numpy(cache[2 * j])
            block.attn.v_cache = torch.from_numpy(cache[2 * j + 1])
        self._np_cache = cache
        if state is not None:
            state.bind_cache(cache)
        self.cache_batch = batch

    def _session(self) -> _Session | None:
        """This model's session, rebuilt when the weights changed (`GPT.weights_key`) or torch's threads did;
        None when the eager forward must run (off the CPU, or quantized Linears)."""
        key = self.weights_key()
        threads = torch.get_num_threads()
        state = _STATE.get(self)
        if state is not None and state.key == key and state.threads == threads:
            return state
        if not self.plain_linears() or self.device.type != "cpu":
            _STATE[self] = None
            return None
        new = _Session(self, key, threads)
        cache = getattr(self, "_np_cache", [])
        if cache and self.blocks[0].attn.k_cache.data_ptr() == cache[0].ctypes.data:
            new.bind_cache(cache)
        _STATE[self] = new
        return new

    def forward(self, idx: torch.Tensor, pos: int | None = None,
                tree: tuple[torch.Tensor, torch.Tensor] | None = None) -> torch.Tensor:
        state = _STATE.get(self)
        if pos is None:  # a training window: eager, with gradients
            return super().forward(idx, pos, tree)
        if state is None or not state.cache or idx.shape[0] != 1:
            with torch.no_grad():  # the eager forward on the same cache memory; inference, as the session's
                return super().forward(idx, pos, tree)
        self._check_pass(1, idx.shape[1], pos)
        return state.run(idx, pos) if tree is None else state.tree(idx, pos, tree)

    def tree_logits(self, ids: list[int], pos: int, positions: np.ndarray, bias: np.ndarray) -> np.ndarray:
        """A tree pass without torch (`decode.settle_tree_round`'s lean path): ids (T,) from `pos`, positions (T,)
        int64 and the additive mask (T, pos + T) float32 of `Tree.attention_lean(..., additive=True)`; logits
        (T, V) float32. The same graph fed the same values as `forward` with a tree, so the same logits. Models
        without a session take the eager forward."""
        state = _STATE.get(self)
        if state is None or not state.cache:
            attn = (torch.from_numpy(positions), torch.from_numpy(bias == 0))
            return self(self.ids(ids), pos, attn)[0].numpy(force=True)
        self._check_pass(1, len(ids), pos)
        return state.tree_run(np.array(ids, dtype=np.int64)[None], pos, positions[None], bias)[0]

    def keep_path_lean(self, pos: int, slots) -> None:
        """`keep_path` on the numpy arrays the cache is (one gather and copy per array, no torch op): the lean
        tree round's. The same entries move, so the same cache; a cache that is not those arrays (not set up
        since a copy) takes `keep_path`."""
        cache = getattr(self, "_np_cache", None)
        if not cache or self.blocks[0].attn.k_cache.data_ptr() != cache[0].ctypes.data:
            return self.keep_path(pos, slots)
        n = len(slots)
        if n == 0 or list(slots) == list(range(pos, pos + n)):
            return
        idx = np.asarray(slots, dtype=np.intp)
        for a in cache:  # advanced indexing copies before the write: slots[i] >= pos + i, so reads come first
            a[:, :, pos : pos + n] = a[:, :, idx]

    def pass_probs(self, ids: list[int], pos: int, n: int, temperature: float) -> np.ndarray:
        """The target's distributions (n, V) at the last n of the positions a pass over `ids` at `pos` scores
        (`decode.verify`): softmax inside the graph, so the logits never go through torch and numpy's float64
        softmax. Temperature 0 reads the pass's logits (one-hot at their argmax); models without a session take the
        forward and `sampling.probs`."""
        state = _STATE.get(self)
        if state is None or not state.cache:
            return sampling.probs(self(self.ids(ids), pos)[0, -n:], temperature)
        self._check_pass(1, len(ids), pos)
        if temperature <= 0:  # one-hot at the logits' argmax: `sampling.probs` of the same logits `forward` gives
            return sampling.probs(state.last_logits(ids, pos, n), temperature)
        return state.distributions(ids, pos, n, 1.0 / temperature)

    def sample_step(self, ids: list[int], pos: int, temperature: float, rng: np.random.Generator) -> int:
        """One character of target-only generation (`decode.step`): the pass over `ids` at `pos` and the sample
        from its last position, in a single session run (logits to sample inside the graph). One uniform from
        `rng` per call, as `sampling.sample` draws, so a seed gives the same text as the other backends.
        Temperature 0 takes the pass graph's logits and `sampling` (no torch op); models without a session the
        eager forward."""
        state = _STATE.get(self)
        if state is None or not state.cache:
            logits = self(self.ids(ids), pos)[0, -1]
            return sampling.sample(sampling.probs(logits, temperature), rng)
        self._check_pass(1, len(ids), pos)
        if temperature <= 0:  # the argmax of the pass's logits, as the forward gives them, without torch
            return sampling.sample(sampling.probs(state.last_logits(ids, pos, 1)[0], temperature), rng)
        return state.step(ids, pos, rng.random(), 1.0 / temperature)
