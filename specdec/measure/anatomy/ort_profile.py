"""ONNX Runtime's own profiler, for the attribution: which kernels an onnx-backend target's runs spent
their time in, by category, less what the profiler itself adds.

ONNX Runtime's profiler stretches a run a lot, so `profiler_cost_us` measures what it adds per kernel here and
now, and the attribution uses the kernels' figures only in proportion (see docs/backends.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import tempfile

import numpy as np

from specdec.model import backend_onnx, onnx_session
from specdec.measure.clock import measured
from specdec.model.gpt import GPT


def kernel_category(op: str, node: str) -> str:
    """The attribution category (`profiler_split.CATEGORIES`) of one kernel ONNX Runtime ran, by its op and node name."""
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
    from onnx import TensorProto, helper

    from specdec.model.onnx_session import runtime  # the optional [onnx] extra, its telemetry off
    from specdec.model.onnx_graph import OPSET

    ort = runtime()
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
            opts = onnx_session.session_options(threads, prefix)
            opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # keep the chain
            session = ort.InferenceSession(model, opts, providers=["CPUExecutionProvider"])
            session.run(None, feed)
            times = []
            for _ in range(3):
                t0 = measured()
                for _ in range(runs):
                    session.run(None, feed)
                times.append((measured() - t0) / runs * 1e6)
            best.append(min(times))
            if prefix is not None:
                kernels, _ = _kernel_events(session.end_profiling())
    inside = sum(us for _, _, us in kernels) / len(kernels)
    return between_us(best[0], best[1], nodes, inside), inside


def between_us(plain_us: float, profiled_us: float, nodes: int, inside_us: float) -> float:
    """µs the profiler adds between kernels: a profiled run's extra time per kernel less what it adds inside the
    kernel's reported time; 0 where a preempted plain run leaves less than nothing."""
    return max(0.0, (profiled_us - plain_us) / nodes - inside_us)


@contextlib.contextmanager
def kernel_profile(model: GPT):
    """While inside, `model` runs sessions built with ONNX Runtime's profiler on; on leaving, the dict it yields
    is filled: category -> µs its kernels took (`kernel_category`), less what the profiler adds inside each
    kernel's time; "profiler_us" -> what it added in all (`profiler_cost_us` per kernel recorded); "runs" ->
    session runs. Yields None for a model without a session (the eager forward). The model's own sessions come
    back afterwards untouched."""
    state = backend_onnx._STATE.get(model)
    if state is None:
        yield None
        return
    out: dict[str, float] = {}
    between, inside = profiler_cost_us(state.threads)
    with tempfile.TemporaryDirectory() as tmp:
        prof = onnx_session.Session(model, state.key, state.threads, profile_prefix=os.path.join(tmp, "ort"))
        prof.bind_cache(state.cache)
        backend_onnx._STATE[model] = prof
        try:
            yield out
        finally:
            backend_onnx._STATE[model] = state
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
