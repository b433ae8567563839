"""One ONNX Runtime session of the `onnx` backend's target (`backend_onnx.OnnxGPT`): the runtime imported with its
telemetry off, the session options, the graphs built from the model's weights, and the buffers and I/O
bindings a pass, a tree pass and a target-only step run with.

How it is wired (I/O binding: no input or output is copied between numpy and the runtime):
- The KV cache is one float32 numpy array per block and per k/v, (batch, n_head, context, head_size) -- the
  eager cache's own layout -- exposed to the rest of specdec as torch views of the same memory
  (`attn.k_cache`, `attn.v_cache`), so `keep_path`, the trees and the eager fallback read and write it.
- ids and positions live in preallocated int64 rows; a pass writes them and the two lengths GQA wants, and
  rebinds only when the number of positions T changes (a decode loop keeps one T).
- The logits are written by the runtime into a preallocated buffer; the returned tensor is a view of it,
  valid until this model's next forward (every caller in specdec samples from it first), as `fused`'s are.
  So are the features (the pass and tree graphs' extra output, the states after ln_f), handed as
  `model.features` only while `want_features` is set; a target-only step (`sample_step`) hands none.
"""

from __future__ import annotations

import os
import weakref

import numpy as np
import torch

from specdec.model.gpt import GPT


# ONNX Runtime (1.29 on, outside Windows) starts a telemetry thread that wakes on a wall-clock timer and tallies
# every run: work of its own inside the runs and beside them, as much as the clock allows. Its documented opt-out,
# read once when the runtime starts, is set here unless the user set it: the runs measured are the model's own.
TELEMETRY = ("ORT_DISABLE_TELEMETRY", "1")


def runtime():
    os.environ.setdefault(*TELEMETRY)
    import onnxruntime

    return onnxruntime


def _graph(model: GPT, kind: str, features: bool | None = None) -> bytes:
    from specdec.model.onnx_graph import graph

    return graph(model, kind, features).SerializeToString()


def session_options(threads: int, profile_prefix: str | None = None) :
    """Session options: `threads` intra-op threads, sequential, every graph optimisation; with
    `profile_prefix`, ONNX Runtime's profiler on (files under that prefix)."""
    ort = runtime()
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


class Session:
    """One built session, its binding and the buffers it reads and writes (one model's; `backend_onnx._STATE` holds it)."""

    def __init__(self, model: GPT, key: tuple, threads: int, profile_prefix: str | None = None):
        cfg = model.config
        opts = session_options(threads, profile_prefix)
        self.key, self.threads, self.opts = key, threads, opts
        self.model = weakref.proxy(model)  # the step and tree graphs are built on first use, from the same weights
        self.session = runtime().InferenceSession(_graph(model, "pass"), opts,
                                            providers=["CPUExecutionProvider"])
        self.binding = self.session.io_binding()
        self.stepper = None  # (session, binding) of graph "step", built by the first `step`
        # (session, binding, bound T, its logits view, its features view) of the pass graph with the features output,
        # built by the first pass a draft wants features from; the plain pass graph has no such output (it would cost
        # every pass). The views are kept with the binding: a slice per pass is a torch op inside the round
        self.feature_pass: list | None = None
        self.tree_session = None  # (session, binding) of graph "tree", built by the first `tree_run`
        self.ids = np.zeros((1, cfg.context), dtype=np.int64)
        self.positions = np.zeros((1, cfg.context), dtype=np.int64)
        self.seqlens = np.zeros(1, dtype=np.int32)
        self.total = np.zeros((), dtype=np.int32)
        self.logits = torch.zeros(1, cfg.context, cfg.vocab_size)  # the runtime writes here (torch's memory)
        self.logits_np = self.logits.numpy()  # the same memory, for the paths that never touch torch
        # the graphs' features output (pass and tree), always bound here: an unbound output would be allocated
        # by the runtime every run; the model hands a view of it only while it wants features
        self.features = torch.zeros(1, cfg.context, cfg.n_embd)
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
        return [self.session] + [s[0] for s in (self.feature_pass, self.stepper, self.tree_session) if s]

    def _bind_lengths(self, b, inv_temp: bool = True) -> None:
        b.bind_input("seqlens_k", "cpu", 0, np.int32, [1], self.seqlens.ctypes.data)
        b.bind_input("total_len", "cpu", 0, np.int32, [], self.total.ctypes.data)
        if inv_temp:  # the tree graph has none: its logits go to `sampling.probs`
            b.bind_input("inv_temp", "cpu", 0, np.float32, [], self.inv_temp.ctypes.data)

    def bind_cache(self, cache: list[np.ndarray]) -> None:
        """Bind sequence 0 of each cache array as past and present (the same memory: GQA appends in place)."""
        self.cache = cache
        for b in [self.binding] + [s[1] for s in (self.feature_pass, self.stepper, self.tree_session) if s]:
            for j, a in enumerate(cache):
                name = f"{('key', 'value')[j % 2]}_{j // 2}"
                shape = [1, *a.shape[1:]]
                b.bind_input(f"past_{name}", "cpu", 0, np.float32, shape, a.ctypes.data)
                b.bind_output(f"present_{name}", "cpu", 0, np.float32, shape, a.ctypes.data)

    def _bind_t(self, b, T: int, probs: bool = True, features: bool = True) -> None:
        """(Re)bind ids, positions, logits (and probs, features) as T positions (buffers' starts, so only T
        changes a binding)."""
        V = self.logits.shape[-1]
        b.bind_input("ids", "cpu", 0, np.int64, [1, T], self.ids.ctypes.data)
        b.bind_input("positions", "cpu", 0, np.int64, [1, T], self.positions.ctypes.data)
        b.bind_output("logits", "cpu", 0, np.float32, [1, T, V], self.logits.data_ptr())
        if features:
            b.bind_output("features", "cpu", 0, np.float32, [1, T, self.features.shape[-1]], self.features.data_ptr())
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
        if self.model.want_features:
            return self._feature_pass(T)
        if T != self.bound_t:
            self._bind_t(self.binding, T, features=False)
            self.bound_t, self.view = T, self.logits[:, :T]
        self.session.run_with_iobinding(self.binding)
        return T

    def _feature_pass(self, T: int) -> int:
        """`_pass` for a model whose draft wants features: the pass graph with the features output."""
        if self.feature_pass is None:
            session = runtime().InferenceSession(_graph(self.model, "pass", features=True), self.opts,
                                           providers=["CPUExecutionProvider"])
            b = session.io_binding()
            self._bind_lengths(b)
            self.feature_pass = [session, b, 0, None, None]
            self.bind_cache(self.cache)
        session, b, bound, view, features = self.feature_pass
        if T != bound:
            self._bind_t(b, T)
            view, features = self.logits[:, :T], self.features[:, :T]
            self.feature_pass[2:] = [T, view, features]
        self.view, self.bound_t = view, 0  # the plain pass rebinds (and re-slices) when next run
        session.run_with_iobinding(b)
        self.model.features = features
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
            session = runtime().InferenceSession(_graph(self.model, "tree"), self.opts,
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
        if self.model.want_features:
            self.model.features = self.features[:, :T]
        return self.logits_np[:, :T]

    def step(self, ids: list[int], pos: int, u: float, inv_temp: float) -> int:
        """One target-only step in one run: the pass over ids at pos, then the sample drawn with u."""
        if self.stepper is None:
            session = runtime().InferenceSession(_graph(self.model, "step"), self.opts,
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
            self._bind_t(b, T, probs=False, features=False)
            self.step_t = T
        session.run_with_iobinding(b)
        return int(self.next)
