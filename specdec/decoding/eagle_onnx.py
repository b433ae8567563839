"""EAGLE's whole proposal as one ONNX Runtime graph: k drafting steps unrolled, each drawing its token inside the
graph, so a round's k drafts cost one runtime call instead of k numpy steps of some twenty calls each.

The graph reads the handed state f (1, C), the pending token, k uniforms u (one per draft, the ones the numpy
path draws in turn) and 1 / temperature (the greedy graph reads neither); it writes the k drafted tokens and
their logits (k, V). Each step is `eagle._Step`'s arithmetic (LayerNorm over [f; e], two SiLU layers, a linear
map back to C, LayerNorm, the target's head); each token is `sampling.pick` of softmax(logits / temperature) at
its u, as the onnx target's fused step draws (`onnx_graph.pick_nodes`: float32 sums, so a boundary moves by
~1e-7 of its probability against numpy's float64), or the argmax at temperature 0. The draft's q are
`sampling.probs` of the returned logits, the distributions the tokens were drawn from, so the rule stays exact.

Used by `EagleDraft` where onnxruntime is installed (the `onnx` extra); the numpy step serves otherwise, and is
the tests' oracle for this graph.
"""

from __future__ import annotations

import numpy as np
import torch

from specdec.model.onnx_session import runtime, session_options


def available() -> bool:
    try:
        runtime()
    except ImportError:
        return False
    return True


def graph(step, k: int, greedy: bool):  # -> onnx.ModelProto
    """The unrolled proposal of `step` (an `eagle._Step`) at k drafts; greedy: argmax instead of the draws."""
    from onnx import TensorProto, helper, numpy_helper

    from specdec.model.onnx_graph import OPSET, pick_nodes

    C, V = step.head.shape
    nodes, inits = [], []

    def const(name: str, value, dtype=np.float32) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=dtype), name))
        return name

    def node(op: str, inputs: list[str], **attrs) -> str:
        out = f"{op}_{len(nodes)}"
        nodes.append(helper.make_node(op, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, name: str) -> str:
        return node("Add", [node("MatMul", [x, f"{name}.w"]), f"{name}.b"])

    def silu(x: str) -> str:
        return node("Mul", [x, node("Sigmoid", [x])])

    def norm(x: str, name: str) -> str:
        return node("LayerNormalization", [x, f"{name}.g", f"{name}.b"], axis=-1, epsilon=float(getattr(step, name)[2]))

    const("wte", step.wte), const("head", step.head)
    for name, w, b in (("fc1", step.w1, step.b1), ("fc2", step.w2, step.b2), ("fc3", step.w3, step.b3)):
        const(f"{name}.w", w), const(f"{name}.b", b)
    for name in ("ln_in", "ln_out"):
        const(f"{name}.g", getattr(step, name)[0]), const(f"{name}.b", getattr(step, name)[1])
    f, tok, toks, logits = "f", "tok", [], []
    for j in range(k):
        x = norm(node("Concat", [f, node("Gather", ["wte", tok])], axis=-1), "ln_in")  # (1, 2C)
        f = norm(linear(silu(linear(silu(linear(x, "fc1")), "fc2")), "fc3"), "ln_out")  # (1, C)
        z = node("MatMul", [f, "head"])  # (1, V)
        logits.append(z)
        if greedy:  # the first of ties, as numpy's argmax
            tok = node("ArgMax", [z], axis=-1, keepdims=0)
            toks.append(tok)
            continue
        u = node("Gather", ["u", const(f"j{j}", [j], np.int64)])  # (1,)
        tok = pick_nodes(nodes, inits, node("Mul", [z, "inv_temp"]), u, V, f"draw{j}.")  # (1,)
        toks.append(tok)
    nodes.append(helper.make_node("Concat", toks, ["tokens"], axis=0))
    nodes.append(helper.make_node("Concat", logits, ["logits"], axis=0))
    f32, i64 = TensorProto.FLOAT, TensorProto.INT64
    inputs = [helper.make_tensor_value_info("f", f32, [1, C]), helper.make_tensor_value_info("tok", i64, [1])]
    if not greedy:
        inputs += [helper.make_tensor_value_info("u", f32, [k]), helper.make_tensor_value_info("inv_temp", f32, [])]
    outputs = [helper.make_tensor_value_info("tokens", i64, [k]), helper.make_tensor_value_info("logits", f32, [k, V])]
    return helper.make_model(helper.make_graph(nodes, f"eagle_proposal_k{k}", inputs, outputs, inits),
                             opset_imports=[helper.make_opsetid("", OPSET)])


class Proposer:
    """The runtime sessions of one `_Step`, one per (k, greedy), built on first use with torch's thread count as
    their intra-op threads (as the onnx target's sessions), rebuilt when it changes."""

    def __init__(self, step):
        self.step, self.threads, self.sessions = step, 0, {}
        self.feeds = {"f": np.zeros((1, step.head.shape[0]), dtype=np.float32), "tok": np.zeros(1, dtype=np.int64),
                      "inv_temp": np.ones((), dtype=np.float32)}

    def __call__(self, f: np.ndarray, tok: int, k: int, u: np.ndarray,
                 temperature: float) -> tuple[list[int], np.ndarray]:
        """(the k drafted tokens, their logits (k, V) float32) from state f (C,) and the pending token; u: the k
        uniforms the draws read (drawn at temperature 0 too, unread there: the numpy path's stream)."""
        greedy = temperature == 0
        if (threads := torch.get_num_threads()) != self.threads:
            self.threads, self.sessions = threads, {}
        session = self.sessions.get((k, greedy))
        if session is None:
            session = runtime().InferenceSession(graph(self.step, k, greedy).SerializeToString(),
                                                 session_options(threads), providers=["CPUExecutionProvider"])
            self.sessions[k, greedy] = session
        feeds = self.feeds
        feeds["f"][0] = f
        feeds["tok"][0] = tok
        if greedy:
            tokens, logits = session.run(None, {"f": feeds["f"], "tok": feeds["tok"]})
        else:
            feeds["inv_temp"][()] = 1.0 / temperature
            tokens, logits = session.run(None, {**feeds, "u": u.astype(np.float32)})
        return tokens.tolist(), logits
