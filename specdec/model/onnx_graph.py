"""The target's cached forward of one sequence as an ONNX graph, the graph `backend_onnx` runs.

Attention is ONNX Runtime's `GroupQueryAttention` contrib kernel, the one its own LLM decoding uses: it reads
the KV cache in place and appends the new positions' keys and values to it (past and present bound to the
same memory). Kind "pass" also gives the rule's softmax, "step" samples inside the graph (`_sample_tail`), and
"tree" adds GroupQueryAttention's `attention_bias` input for a token tree's mask.

This module imports `onnx`, the optional [onnx] extra: only `backend_onnx` imports it, when it builds a session.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn
from onnx import TensorProto, helper, numpy_helper

from specdec.model.gpt import GPT

OPSET = 20  # LayerNormalization (17) and Gelu with approximate="tanh" (20)


def graph(model: GPT, kind: str = "pass", features: bool | None = None) -> "onnx.ModelProto":  # noqa: F821
    """The cached forward of one sequence as an ONNX model, `model`'s weights as initializers.

    kind "pass" and "step" (attention by GroupQueryAttention over the whole cache buffer): inputs ids,
    positions (1, T) int64; seqlens_k (1,) int32 = pos + T - 1; total_len () int32 = pos + T; past_key_i,
    past_value_i (1, H, context, hs) per block; inv_temp () float32. Outputs logits (1, T, V); present_key_i,
    present_value_i (the same shape as past: bound to the same memory, GQA appends in place). "pass" adds
    probs (1, T, V) = softmax(logits · inv_temp), what the rule reads; "step" a target-only step's sampling
    (`_sample_tail`): input u () float32, output next () int64.
    kind "tree" (the tree's mask on top of GQA's causal one): the inputs and outputs of "pass" without inv_temp and
    probs, plus bias (1, 1, T, pos + T) float32, 0 where a position may attend and -inf elsewhere.
    With `features` (default: for "tree" only) the graph also outputs features (1, T, C): the states after ln_f,
    the LM head's input, for drafts that read them. A "pass" without that output is the one run while no draft
    asks: the output would cost every run a copy and its binding.
    """
    if kind not in ("pass", "step", "tree"):
        raise ValueError(f"unknown graph kind {kind!r} (allowed: pass, step, tree)")
    features = kind == "tree" if features is None else features
    if features and kind == "step":
        raise ValueError("a target-only step hands no features (allowed with features: pass, tree)")
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
    h = g.layer_norm(x, model.ln_f, "ln_f")
    if features:  # the final hidden states, for drafts that read them
        outputs.append(helper.make_tensor_value_info("features", f32, [1, "T", cfg.n_embd]))
        g.nodes.append(helper.make_node("Identity", [h], ["features"], name="features"))
    g.nodes.append(helper.make_node("MatMul", [h, g.init("lm_head.wT", model.lm_head.weight, transpose=True)],
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
    """logits -> next: `sampling.pick(softmax(last row · inv_temp), u)` as graph nodes (`pick_nodes`)."""
    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.int64), name))
        return name

    last = "s.row"
    bounds = [const("s.row_start", [-1]), const("s.row_end", [2**62]), const("s.row_axis", [1])]
    nodes.append(helper.make_node("Slice", ["logits", *bounds], [last], name=f"sample/{last}"))
    nodes.append(helper.make_node("Mul", [last, "inv_temp"], ["s.z3"], name="sample/s.z3"))  # (1, 1, V)
    nodes.append(helper.make_node("Reshape", ["s.z3", const("s.flat", [-1])], ["s.z"], name="sample/s.z"))  # (V,)
    pick_nodes(nodes, inits, "s.z", "u", vocab, "s.", out="next")


def pick_nodes(nodes: list, inits: list, z: str, u: str, vocab: int, prefix: str, out: str | None = None) -> str:
    """`sampling.pick(softmax(z), u)` over z's last axis as graph nodes, float32; returns the index's name (z's
    shape less its last axis, int64). Names start with `prefix`; the index is named `out` when given.

    The same search as the numpy path: the number of partial sums of exp(z - max z) that are <= u times their
    total, capped at V - 1. Normalising is left out (the search scales u instead), as `pick` does; float32 sums
    against numpy's float64 move a boundary by ~1e-7 of its probability, so a seed draws the same characters
    unless u lands that close to one. The onnx target's fused step and eagle's proposal graph draw through it.
    """
    def const(name: str, value) -> str:
        inits.append(numpy_helper.from_array(np.asarray(value, dtype=np.int64), prefix + name))
        return prefix + name

    def node(op: str, inputs: list[str], name: str, **attrs) -> str:
        nodes.append(helper.make_node(op, inputs, [prefix + name], name=f"sample/{prefix}{name}", **attrs))
        return prefix + name

    last = const("last", [-1])
    e = node("Exp", [node("Sub", [z, node("ReduceMax", [z, last], "max", keepdims=1)], "zc")], "e")
    c = node("CumSum", [e, const("axis", -1)], "c")
    at = node("Mul", [node("Slice", [c, last, const("end", [2**62]), last], "total"), u], "at")
    count = node("ReduceSum", [node("Cast", [node("LessOrEqual", [c, at], "le")], "le64", to=TensorProto.INT64),
                               last], "count", keepdims=0)
    index = out or prefix + "index"
    nodes.append(helper.make_node("Min", [count, const("vmax", vocab - 1)], [index], name=f"sample/{index}"))
    return index
