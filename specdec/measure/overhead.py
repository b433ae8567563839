"""Overhead: how large a share of a target pass is work the arithmetic needs, and where the rest goes.

Three pieces. (1) The work a pass must do, counted from the model's shapes: FLOPs and bytes. (2) What this
machine can do, measured here and now by the suite itself (GEMM throughput, cache and memory bandwidth), so
that (1) becomes a floor in microseconds -- a roofline lower bound. Measured pass times against that floor
give the overhead share, 1 - floor / measured. (3) Where the time goes (`attribute`): the sampling code, the
rule and the draft under labels of this module's own driver, timed directly; the rest split by torch.profiler
(self CPU time of aten ops in categories, and a residual -- time no op accounts for: Python and dispatch)
and an ONNX Runtime run by ONNX Runtime's profiler, both in proportion, since a profiler stretches what it
watches. The draft has a category of its own so that a round's target work is not mixed with the draft's: a
bigram draft is numpy the profiler cannot see at all. `attribution` splits a target-only step, the round
generation runs (the lean code) and the old round (the reference code) -- the two rounds in one alternated
run, so that their difference per category is what the lean code brought back.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from specdec.model import backends, sampling
from specdec.decoding import generate as decode
from specdec.measure import hygiene, ort_profile, timing
from specdec.decoding.drafts import Draft
from specdec.model.gpt import GPT, GPTConfig
from specdec.decoding import rule

GEMM_SIZE = 256  # square matmul: 2·256³ = 33.5 MFLOP (~1 ms, so the call's µs of dispatch are < 1 %) on three
# 256 KiB matrices (0.75 MiB in all), which stay in cache as the target's 2.4 MB of weights do
CACHE_BYTES = 2_600_000  # about the target's weights (float32), read again and again: they stay in cache
MEMORY_BYTES = 256 * 2**20  # far beyond any last-level cache (tens of MiB): every read goes to DRAM
CACHE_READS = 8  # reads of the cache buffer per timed call (~1 ms), so timer and dispatch costs vanish

# Categories of `attribution`, in the order they are printed. The last is the residual.
RESIDUAL = "framework dispatch and Python"
SESSION = "onnx runtime session"  # label of a whole ONNX Runtime run (onnx backend), split by its own profiler
CATEGORIES = ("matmul", "attention", "elementwise", "tensor creation", "logits to sample", "the rule", "draft",
              RESIDUAL)
LABELS = ("logits to sample", "the rule", "draft", SESSION)  # record_function labels: their whole span is theirs
OLD_ROUND = "round (old)"  # `attribution`'s scope of the reference round, beside the lean "round"
SCOPES = ("step", OLD_ROUND, "round")  # the scopes in the order the tables and the figure show them
CAME_BACK = "came back"  # the tables' last column: old round less lean round, per category
_MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm", "aten::mv",
           "aten::dot", "aten::addmv"}
_CREATION = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros", "aten::zeros_like",
             "aten::ones", "aten::ones_like", "aten::full", "aten::arange", "aten::cat", "aten::stack",
             "aten::copy_", "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::lift_fresh",
             "aten::scalar_tensor", "aten::tensor", "aten::as_strided", "aten::view", "aten::_unsafe_view",
             "aten::reshape", "aten::transpose", "aten::t", "aten::slice", "aten::select", "aten::narrow",
             "aten::split", "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::alias",
             "aten::resolve_conj", "aten::resolve_neg", "aten::index_select", "aten::embedding", "aten::index",
             "aten::numpy_T", "aten::_reshape_alias", "aten::permute", "aten::fill_", "aten::zero_"}


@dataclass(frozen=True)
class Machine:
    """What this machine did, measured by `measure_machine` (not assumed from a data sheet)."""

    matmul_gflops: float  # GEMM_SIZE² float32 torch.mm, best of the timed calls
    cache_gbps: float  # reading a CACHE_BYTES buffer that stays in cache (.sum()), best of the timed calls
    memory_gbps: float  # reading a MEMORY_BYTES buffer from DRAM (.sum()), best of the timed calls
    threads: int  # torch intra-op threads while measuring

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass(frozen=True)
class PassShape:
    """What a pass's work is counted from: the sizes of one decoder-only architecture's layers.

    The shipped GPT and GPT-2 have a fused or separate q|k|v of C -> 3C, an MLP C -> I -> C and learned position
    embeddings; the Llama family (Llama, Mistral, Qwen2) has grouped key/value heads, a gated MLP (gate and up
    C -> I, down I -> C), RMSNorm (a weight only) and rotary positions (no table to read)."""

    n_layer: int
    width: int  # C, the residual stream
    attn_width: int  # query heads x head size: the attention scores' and output projection's width
    kv_width: int  # key/value heads x head size: the cache's width per layer, keys and values each
    mlp: int  # I, the MLP's inner width
    gated: bool  # three MLP matrices (gate, up, down) instead of two
    vocab: int
    position_table: bool  # a learned position embedding: one row read per new position
    norm_params: int  # floats of one norm (LayerNorm weight and bias 2C, RMSNorm C)
    biases: int  # bias floats per layer
    tied: bool  # lm_head is the token embedding: its rows are read once, as the head

    def linear(self) -> int:
        """Weights of one layer's matrices."""
        C = self.width
        return C * self.attn_width + 2 * C * self.kv_width + self.attn_width * C + (3 if self.gated else 2) * C * self.mlp


LLAMA_FAMILY = ("llama", "mistral", "qwen2")  # model types whose shapes `pass_shape` reads (plus gpt2)


def model_config(target):
    """The configuration a target's pass is shaped by: a Hugging Face model's own config, else target.config."""
    return getattr(getattr(target, "model", None), "config", None) or target.config


def pass_shape(config) -> PassShape | None:
    """The shapes of a pass, from the shipped GPTConfig or a Hugging Face config of a known architecture
    (gpt2, LLAMA_FAMILY); None for anything else -- the work is then unknown, never guessed."""
    if isinstance(config, GPTConfig):
        C = config.n_embd
        return PassShape(config.n_layer, C, C, C, 4 * C, False, config.vocab_size, True, 2 * C, 0, False)
    kind = getattr(config, "model_type", None)
    get = lambda *names: next((getattr(config, n) for n in names if getattr(config, n, None) is not None), None)
    tied = bool(getattr(config, "tie_word_embeddings", False))
    if kind == "gpt2":
        C, L = config.n_embd, config.n_layer
        inner = config.n_inner or 4 * C
        # Conv1D biases: c_attn 3C, attn c_proj C, c_fc I, mlp c_proj C
        return PassShape(L, C, C, C, inner, False, config.vocab_size, True, 2 * C, 3 * C + C + inner + C, tied)
    if kind not in LLAMA_FAMILY:
        return None
    C, L, heads = get("hidden_size"), get("num_hidden_layers"), get("num_attention_heads")
    if None in (C, L, heads, get("intermediate_size")):
        return None
    head = get("head_dim") or C // heads
    kv = (get("num_key_value_heads") or heads) * head
    inner = config.intermediate_size
    attn_bias = kind == "qwen2" or bool(getattr(config, "attention_bias", False))
    biases = (heads * head + 2 * kv if attn_bias else 0) + (C if getattr(config, "attention_bias", False) else 0)
    biases += 2 * inner + C if getattr(config, "mlp_bias", False) else 0
    return PassShape(L, C, heads * head, kv, inner, True, config.vocab_size, False, C, biases, tied)


def _windowed(config, keys: int) -> bool:
    """The pass attends over more keys than the config's sliding window: not what `pass_flops` counts."""
    window = getattr(config, "sliding_window", None)
    return isinstance(window, int) and getattr(config, "use_sliding_window", True) and keys > window


def pass_flops(config, positions: int, context_pos: int) -> int | None:
    """FLOPs of one cached forward over `positions` new positions after `context_pos` cached ones; None when the
    config's architecture is not one `pass_shape` knows (or its sliding window would cut the keys).

    2 FLOPs per multiply-add. Per layer: the Linear layers (the shipped GPT's qkv C→3C, proj C→C, fc C→4C,
    proj 4C→C: 2·T·12·C²; in general `PassShape.linear`) and attention QKᵀ and AV over all context_pos + T keys
    (the masked kernel computes every score) 2·2·T·(context_pos+T)·(query heads x head size). Then lm_head (the
    shipped model's own weight, not tied to wte) 2·T·C·V. LayerNorm, GELU, softmax, rotary embeddings, the
    residual adds and the embedding sum are not counted: O(T·C) each against O(T·C²), well under 1 % here, and
    not what a floor is made of.
    """
    shape = pass_shape(config)
    T, S = positions, context_pos + positions
    if shape is None or _windowed(config, S):
        return None
    per_layer = 2 * T * shape.linear() + 2 * 2 * T * S * shape.attn_width
    return shape.n_layer * per_layer + 2 * T * shape.width * shape.vocab


def pass_bytes(config, positions: int, context_pos: int, dtype_bytes: int = 4) -> int | None:
    """Bytes one such pass must read at least once: every weight it uses and the KV cache it attends over; None
    where `pass_flops` is None.

    Linear weights (12·C² per layer for the shipped GPT) and biases, and lm_head C·V; the T rows of wte (unless
    tied to lm_head, read whole already) and of a learned position table that the pass looks up (not the whole
    tables); the norms' weights (and biases), 2·n_layer + 1 norms; keys and values of context_pos + T positions
    in every layer, 2·n_layer·(context_pos+T)·(key/value width). Activations (a few KB) and the boolean mask
    are left out.
    """
    shape = pass_shape(config)
    T, S = positions, context_pos + positions
    if shape is None or _windowed(config, S):
        return None
    C, L = shape.width, shape.n_layer
    rows = (0 if shape.tied else T * C) + (T * C if shape.position_table else 0)
    weights = L * (shape.linear() + shape.biases) + C * shape.vocab + rows + (2 * L + 1) * shape.norm_params
    return (weights + 2 * L * S * shape.kv_width) * dtype_bytes


def measure_machine(seconds: float = 2.0, threads: int = 1) -> Machine:
    """GEMM throughput and cache and memory read bandwidth of this machine, measured for `seconds`.

    Each figure has a third of the time, its calls timed one by one (timing.round_robin, the first discarded).
    The best call is kept, not the median: these are capabilities, and load or an interrupt only ever makes
    a call slower, so the fastest call is the closest to what the hardware does -- and a floor built from them
    stays a lower bound. torch's threads are set to `threads` meanwhile and restored after.
    """
    if not (math.isfinite(seconds) and seconds > 0):
        raise ValueError(f"seconds must be a positive number, got {seconds}")
    before = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        a, b = torch.randn(GEMM_SIZE, GEMM_SIZE), torch.randn(GEMM_SIZE, GEMM_SIZE)
        out = torch.empty(GEMM_SIZE, GEMM_SIZE)
        mm_s = _best(lambda: torch.mm(a, b, out=out), seconds / 3)
        small = torch.ones(CACHE_BYTES // 4)

        def reads():
            for _ in range(CACHE_READS):
                small.sum()

        cache_s = _best(reads, seconds / 3) / CACHE_READS
        del a, b, out, small
        big = torch.ones(MEMORY_BYTES // 4)  # ones, not empty: every page is touched before it is timed
        memory_s = _best(big.sum, seconds / 3)
        del big
        return Machine(matmul_gflops=2 * GEMM_SIZE**3 / mm_s / 1e9, cache_gbps=CACHE_BYTES / cache_s / 1e9,
                       memory_gbps=MEMORY_BYTES / memory_s / 1e9, threads=torch.get_num_threads())
    finally:
        torch.set_num_threads(before)


def _best(fn: Callable[[], object], seconds: float) -> float:
    """Fastest of fn's calls within `seconds` (at least 2 kept after the warm-up), in seconds."""
    deadline = time.perf_counter() + seconds
    samples = timing.round_robin({"fn": fn}, samples=100_000, number=1, deadline=deadline, min_samples=2)
    return float(samples["fn"].min())


def floor_us(flops: int, bytes_: int, machine: Machine) -> float:
    """Roofline lower bound of a pass in µs: max(flops at GEMM speed, bytes at cache bandwidth).

    Cache bandwidth, not memory: the target's weights (2.4 MB) and its KV cache stay in cache between passes
    of a generation loop, so nothing is fetched from DRAM in steady state.
    """
    return max(flops / (machine.matmul_gflops * 1e3), bytes_ / (machine.cache_gbps * 1e3))


@torch.inference_mode()
def overhead_table(target: GPT, machine: Machine, positions: tuple[int, ...] = (1, 2, 3, 5, 9),
                   context_pos: int = 100, seconds: float = 2.0) -> list[dict]:
    """Measured pass time (the target's backend) against the floor, one row per width T in `positions`, at
    `context_pos`.

    The cache is filled to context_pos first; the widths are timed round-robin (timing.round_robin, 10 calls
    a sample) until `seconds` have passed, so a slow moment lands on all of them, and each row keeps the
    median of its samples: the typical pass, as generation pays it.
    """
    context = target.config.context
    if not (0 <= context_pos and context_pos + max(positions) <= context and min(positions) >= 1):
        raise ValueError(f"positions {min(positions)}..{max(positions)} at context_pos {context_pos} must be "
                         f">= 1 and fit the context of {context}")
    tokens = timing.corpus_tokens(target)[: context_pos + max(positions)].tolist()
    target.setup_cache(1)
    if context_pos:
        target(target.ids(tokens[:context_pos]), 0)
    fns = {T: (lambda x=target.ids(tokens[context_pos : context_pos + T]): target(x, context_pos))
           for T in positions}
    for fn in fns.values():
        timing.warm_up(fn, seconds=0.02)
    deadline = time.perf_counter() + seconds
    samples = timing.round_robin(fns, samples=100_000, number=10, deadline=deadline, min_samples=3)
    rows, backend = [], backend_name(target)
    cfg, dtype_bytes = model_config(target), _dtype_bytes(target)
    for T in positions:
        flops, nbytes = pass_flops(cfg, T, context_pos), pass_bytes(cfg, T, context_pos, dtype_bytes)
        measured = float(np.median(samples[T])) * 1e6
        floor = None if flops is None else floor_us(flops, nbytes, machine)  # unknown work: no floor
        rows.append({"backend": backend, "positions": T, "measured_us": measured, "floor_us": floor,
                     "share": None if floor is None else 1 - floor / measured, "flops": flops, "bytes": nbytes})
    return rows


UNKNOWN = "unknown"  # how a figure that cannot be counted for this target reads (never a guess)


def known(value, spec: str, scale: float = 1.0) -> str:
    """value / scale formatted by `spec`, or UNKNOWN for None (work `pass_flops` cannot count)."""
    return UNKNOWN if value is None else format(value / scale, spec)


def backend_name(target) -> str:
    """What runs the target's pass, as the overhead rows and the report name it: the shipped GPT's backend, or
    "transformers" for a Hugging Face model, else the target's class."""
    if isinstance(target, GPT):
        return backends.backend_of(target)
    return "transformers" if hasattr(target, "tokenizer") and hasattr(target, "model") else type(target).__name__


def _dtype_bytes(target) -> int:
    """Bytes of one weight as the pass reads it: the target's dtype where it has one (an HF model in bf16: 2)."""
    dtype = getattr(target, "dtype", None)
    return dtype.itemsize if isinstance(dtype, torch.dtype) else 4


def category(name: str) -> str:
    """The category of an aten op by its name; anything neither matmul, attention nor a creation, copy, view
    or indexing op is arithmetic on elements or rows (add, mul, gelu, layer_norm, softmax, where, ...)."""
    if name in _MATMUL:
        return "matmul"
    if "attention" in name:
        return "attention"
    if name in _CREATION:
        return "tensor creation"
    return "elementwise"


def attribute(run: Callable[[object], int], repeats: int = 9, per_event_us: float | None = None,
              inside: Callable[[], contextlib.AbstractContextManager] | None = None) -> dict:
    """Split `run`'s time into CATEGORIES, µs per unit of work: labelled spans timed directly, the rest split by
    torch.profiler.

    run(mode) does one block of work and returns its units (steps, rounds, calls), wrapping its sampling, rule,
    draft and session code in `_label(mode, LABEL)`: mode False runs bare, "time" times each label's span with
    perf_counter (about a microsecond a span) and True records it for torch.profiler. After one discarded
    bare block, each repeat runs a bare and a timed block (in turn first); then `repeats` profiled blocks run.
    The bare blocks give `measured_us` (median), the median timed block the split.
    - A label's µs are its spans in that timed block.
    - The rest (the target's forward and the loop around it) is that block's wall time less the spans. The
      profiler splits it: every op outside the labels gives its self CPU time to the category of its outermost
      aten op (the call the Python code made: linear's t and mm are matmul, SDPA's where and empty are
      attention, layer_norm's empty is elementwise); what it attributes to no op -- Python and dispatch between
      ops -- less its own cost (the events it recorded outside the labels times what one costs it here,
      `profiler_cost_us` or `per_event_us`: `profiler_us`), is RESIDUAL. Those profiled µs, which the profiler
      stretches (`stretch`: profiled rest over timed rest), are scaled onto the timed rest in proportion.
    - A SESSION span (the onnx backend's pass with its softmax or sampling, one ONNX Runtime run) is split the
      same way by ONNX Runtime's own profiler, which `inside()` turns on around the profiled blocks
      (`ort_profile.kernel_profile`: category -> µs of its kernels, and what that profiler added, measured on
      a chain of tiny kernels, which is taken out of the profiled span): its kernels' µs in proportion, and
      the rest of the span -- the runtime's executor, the binding, the Python around the run -- to RESIDUAL.
    So the categories sum to `accounted_us`, the median timed block's wall time, which is held against
    `measured_us`: how much timing the spans disturbed the work. As everywhere in specdec, that comparison is
    a ratio of neighbours: `accounted_ratio` is the median over repeats of a timed block's time over the bare
    block beside it, which a burst of load spanning several blocks cannot bias as it can the two medians.
    """
    return attribute_alternated({"run": run}, repeats, per_event_us, inside)["run"]


def attribute_alternated(runs: dict[str, Callable[[object], int]], repeats: int = 9,
                         per_event_us: float | None = None,
                         inside: Callable[[], contextlib.AbstractContextManager] | None = None) -> dict[str, dict]:
    """`attribute` of several runs in one alternated run: name -> its scope.

    Their bare and timed blocks interleave -- each repeat runs every run's bare block, one after the other in
    the order given, and then every run's timed block (the timed ones first in every other repeat) -- so slow
    drift and a burst of load land on all of them alike, and the difference between two runs (the old and the
    lean round) is a difference of neighbours. The profiled blocks, which only give proportions, run one run
    at a time, each under its own `inside()`: an inner profiler's kernels belong to the run it watched.
    """
    for run in runs.values():
        run(False)  # discarded: first calls build caches (a table draft's tempered rows, onnx bindings)
    per_event = profiler_cost_us() if per_event_us is None else per_event_us
    blocks = _timed_blocks(runs, repeats)
    out = {}
    for name, run in runs.items():
        measured, timed = blocks[name]
        prof = _profiled_blocks(run, repeats, inside)
        # the median timed block, against the median bare one: a burst of load lands in one block, not in both
        accounted, spans = sorted(timed, key=lambda t: t[0])[(len(timed) - 1) // 2]
        cats, profiled, own, scale = _split_rest(accounted, spans, prof, per_event)
        _split_session(cats, spans, prof)
        ratio = float(np.median([t[0] / b for t, b in zip(timed, measured)]))  # a timed block over its bare twin
        out[name] = {"categories": cats, "measured_us": float(np.median(measured)), "accounted_us": accounted,
                     "accounted_ratio": ratio,
                     "profiled_us": profiled, "profiler_us": own, "stretch": 1 / scale if scale else 0.0,
                     "events_per_unit": prof.events / prof.units, "units_per_block": prof.units // repeats}
    return out


def _timed_blocks(runs: dict[str, Callable[[object], int]],
                  repeats: int) -> dict[str, tuple[list[float], list[tuple[float, dict]]]]:
    """`repeats` rounds of every run's bare block and every run's timed block, bare or timed first in turn, the
    runs interleaved in each: name -> (bare µs per unit, [(timed µs per unit, label -> its spans' µs per
    unit)])."""
    out = {name: ([], []) for name in runs}
    for i in range(repeats):
        with hygiene.no_gc():  # a collection would land in one block only
            for mode in (False, "time") if i % 2 == 0 else ("time", False):  # alternated: neither always first
                for name, run in runs.items():
                    _SPANS.clear()
                    t0 = time.perf_counter()
                    n = run(mode)
                    us = (time.perf_counter() - t0) / n * 1e6
                    measured, timed = out[name]
                    if mode:
                        timed.append((us, {label: sec / n * 1e6 for label, sec in _SPANS.items()}))
                    else:
                        measured.append(us)
    return out


@dataclass
class _Profile:
    """What `repeats` profiled blocks recorded, summed over the blocks."""

    wall_s: float  # their wall time
    units: int  # units of work they did
    events: int  # events the profiler recorded
    outside_events: int  # ... of which outside every label
    totals: dict[str, float]  # category or label -> µs (`_aggregate`)
    kernels: dict | None  # what `inside()` yielded: ONNX Runtime's kernels by category (None: no session)


def _profiled_blocks(run: Callable[[object], int], repeats: int,
                     inside: Callable[[], contextlib.AbstractContextManager] | None) -> _Profile:
    """`repeats` blocks under torch.profiler, with any inner profiler on: they only give proportions, so they
    run after the timed pairs."""
    quiet_profiler()
    prof = _Profile(0.0, 0, 0, 0, {}, None)
    with inside() if inside is not None else contextlib.nullcontext() as kernels:
        for _ in range(repeats):
            with hygiene.no_gc(), _torch_profile() as torch_prof:
                t0 = time.perf_counter()
                prof.units += run(True)
                prof.wall_s += time.perf_counter() - t0
            evs = torch_prof.events()
            prof.events += len(evs)
            got, outside = _aggregate(evs)
            prof.outside_events += outside
            for name, us in got.items():
                prof.totals[name] = prof.totals.get(name, 0.0) + us
    prof.kernels = kernels  # filled as the inner profiler closed
    return prof


def _split_rest(accounted: float, spans: dict[str, float], prof: _Profile,
                per_event: float) -> tuple[dict[str, float], float, float, float]:
    """The categories of a timed block (its wall time `accounted`, its labels' `spans`), all but a SESSION
    span's share: the labels' spans as timed, the rest by the profiled blocks' proportions, less the profiler's
    own cost. Returns (categories, profiled µs per unit, the profiler's own µs per unit, the scale from
    profiled to timed rest)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for name in LABELS:
        if name != SESSION:
            out[name] = spans.get(name, 0.0)
    rest = accounted - sum(spans.get(name, 0.0) for name in LABELS)
    profiled = prof.wall_s * 1e6 / prof.units
    own = prof.outside_events / prof.units * per_event
    seen = {name: us / prof.units for name, us in prof.totals.items() if name not in LABELS}
    in_labels = sum(prof.totals.get(n, 0.0) for n in LABELS) / prof.units
    unseen = max(0.0, profiled - own - in_labels - sum(seen.values()))
    rest_profiled = sum(seen.values()) + unseen
    scale = rest / rest_profiled if rest_profiled > 0 else 0.0
    for name, us in seen.items():
        out[name] = us * scale
    out[RESIDUAL] = unseen * scale
    return out, profiled, own, scale


def _split_session(out: dict[str, float], spans: dict[str, float], prof: _Profile) -> None:
    """Add a SESSION span's µs to `out`: by ONNX Runtime's kernels in proportion, the rest of the span to
    RESIDUAL (all of it without a kernel profile: the run counts as dispatch, as the profiler would call it)."""
    session, session_profiled = spans.get(SESSION, 0.0), prof.totals.get(SESSION, 0.0) / prof.units
    if session <= 0:
        return
    kernels = prof.kernels
    in_kernels = {name: us / prof.units for name, us in (kernels or {}).items() if name in out}
    if session_profiled > 0 and in_kernels:  # the profiled span, less what ONNX Runtime's profiler added
        session_profiled -= kernels.get("profiler_us", 0.0) / prof.units
        s_scale = session / max(session_profiled, sum(in_kernels.values()))
        for name, us in in_kernels.items():
            out[name] += us * s_scale
        out[RESIDUAL] += session - sum(in_kernels.values()) * s_scale
    else:
        out[RESIDUAL] += session


def quiet_profiler() -> None:
    """torch.profiler's kineto logs `USDT: ... profiler_start` / `profiler_stop` at its highest severity each time
    a profile starts and stops (an attribution starts dozens); only a level above every severity (6) silences
    them. Kineto reads KINETO_LOG_LEVEL when the first profile starts, so both places here that start profiles
    (`_profiled_blocks`, `profiler_cost_us`) call this first -- the CLI and library users alike; a level the
    user set wins."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def profiler_cost_us(calls: int = 2000, repeats: int = 3) -> float:
    """µs torch.profiler adds per event it records, on this machine now: a loop of `calls` tiny aten ops timed
    without and with the profiler (best of `repeats` each), the difference over the events recorded."""
    quiet_profiler()
    a, b, out = torch.ones(4), torch.ones(4), torch.empty(4)

    def loop() -> None:
        for _ in range(calls):
            torch.add(a, b, out=out)

    def best(profiled: bool) -> tuple[float, int]:
        times, n = [], 0
        for _ in range(repeats):
            with hygiene.no_gc(), (_torch_profile() if profiled else contextlib.nullcontext()) as prof:
                t0 = time.perf_counter()
                loop()
                times.append(time.perf_counter() - t0)
            n = len(prof.events()) if profiled else 0
        return min(times), n

    loop()
    plain, _ = best(False)
    with_profiler, n = best(True)
    return max(0.0, (with_profiler - plain) / max(n, 1) * 1e6)


def _aggregate(events) -> tuple[dict[str, float], int]:
    """µs by category over one profile's events (no residual), and how many events lay outside every label."""
    totals: dict[str, float] = {}
    outside = 0
    for e in events:
        chain = [e]
        while chain[-1].cpu_parent is not None:
            chain.append(chain[-1].cpu_parent)
        labels = [x for x in chain if x.name in LABELS]
        if labels:  # inside a label: only the outermost label's own event counts, with its whole span
            if e is labels[-1]:
                totals[e.name] = totals.get(e.name, 0.0) + e.cpu_time_total
            continue
        outside += 1
        ops = [x for x in chain if x.name.startswith("aten::")]
        if not ops:  # another annotation: its ops count by themselves, its own time is the residual's
            continue
        cat = category(ops[-1].name)
        totals[cat] = totals.get(cat, 0.0) + e.self_cpu_time_total
    return totals, outside


def attribution(target: GPT, draft: Draft, k: int, chars: int = 40, seed: int = 0, repeats: int = 9,
                lean: bool = True) -> dict:
    """Where a target-only step and a speculative round spend their time: {"step": ..., "round": ...,
    OLD_ROUND: ...}.

    Each scope is `attribute` of a block generating `chars` characters after timing.COST_PROMPT (mid-context,
    as the cost measurements run) by generation's own code -- `decode.step` in generate's loop, the draft's
    propose and `decode.settle_round` in speculative_generate's -- the prompt's prefill done before the clock
    starts; µs are per step (one character) and per round. Every block starts from the same state and seed,
    so profiled and unprofiled blocks run the same rounds. The labels are this driver's own (`_labelled`), so
    generation itself pays nothing for them.

    lean: the round as `speculative_generate(lean=...)` runs it. True (the default): "round" is the lean code
    and OLD_ROUND the reference code beside it (the draft's `propose_reference`, `decode.proposer(draft,
    False)`), both in one alternated run (`attribute_alternated`: lean, old, lean, old, ...) from the same state
    and seed -- the same rounds, the same tokens -- so their difference per category is what the lean code
    brought back. The rule and the target's pass are the same code in both. False: "round" is the reference
    code, and there is no OLD_ROUND.
    """
    prompt = decode.check_request(target, timing.COST_PROMPT, chars, k=k)
    per_event = profiler_cost_us()
    inside = functools.partial(ort_profile.kernel_profile, target)  # onnx: ONNX Runtime's profiler splits its runs
    rounds = {"round": _rounds(target, draft, prompt, chars, k, seed, lean)}
    if lean:
        rounds[OLD_ROUND] = _rounds(target, draft, prompt, chars, k, seed, lean=False)
    return {"step": attribute(_steps(target, prompt, chars, seed), repeats, per_event, inside),
            **attribute_alternated(rounds, repeats, per_event, inside)}



def _torch_profile():
    """torch.profiler over the CPU, imported where used: `import specdec` does not pay for it."""
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU])


_SPANS: dict[str, float] = {}  # label -> seconds, filled by the "time" mode of `_label`


class _Span:
    """Adds the seconds its `with` block takes to _SPANS[name]."""

    __slots__ = ("name", "t0")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc) -> None:
        _SPANS[self.name] = _SPANS.get(self.name, 0.0) + time.perf_counter() - self.t0


def _label(mode, name: str):
    """A label's span: timed (mode "time"), recorded for torch.profiler (mode True) or nothing (False)."""
    if mode == "time":
        return _Span(name)
    if not mode:
        return contextlib.nullcontext()
    from torch.profiler import record_function  # imported where used: `import specdec` does not pay for it

    return record_function(name)


def _prefill(target: GPT, prompt: list[int]) -> int:
    """The cache holds the prompt but its last character, which every loop below feeds first."""
    target.setup_cache(1)
    target(target.ids(prompt[:-1]), 0)
    return len(prompt) - 1


def _steps(target: GPT, prompt: list[int], chars: int, seed: int) -> Callable[[object], int]:
    @torch.inference_mode()
    def run(mode) -> int:
        tokens, pos = list(prompt), _prefill(target, prompt)
        rng = np.random.default_rng(seed)
        with _labelled(mode, target, sample="logits to sample") as t:
            for _ in range(chars):  # generate's loop
                nxt = decode.step(t, tokens[pos:], pos, 1.0, rng)
                pos = len(tokens)
                tokens.append(nxt)
        return chars

    return run


def _rounds(target: GPT, draft: Draft, prompt: list[int], chars: int, k: int, seed: int,
            lean: bool = True) -> Callable[[object], int]:
    propose = decode.proposer(draft, lean)  # what speculative_generate(lean=lean) proposes with

    @torch.inference_mode()
    def run(mode) -> int:
        tokens, pos = list(prompt), _prefill(target, prompt)
        draft.reset()
        propose(tokens[:-1], 1, np.random.default_rng(seed), 1.0)  # the draft holds the prompt too
        draft.rollback(pos)
        rng = np.random.default_rng(seed)
        stats = decode.GenerationStats(k=k, accepted_per_position=[0] * (k + 1))
        # in a round, `sampling.sample` runs only when nothing was drafted: it emits what the rule would have
        with _labelled(mode, target, sample="the rule") as t:
            while (left := chars - (len(tokens) - len(prompt))) > 0:  # speculative_generate's loop
                kr = min(k, left - 1)
                with _label(mode, "draft"):
                    drafted, q = propose(tokens, kr, rng, 1.0) if kr > 0 else ([], None)
                pos, _ = decode.settle_round(t, draft, tokens, pos, drafted, q, rng, 1.0, stats)
        return stats.target_passes  # a pass a round

    return run


@contextlib.contextmanager
def _labelled(mode, target: GPT, sample: str):
    """Inside: generate's own calls into `sampling` and `rule` run under the labels -- `probs` "logits to
    sample", `sample` under `sample`, `accept_reject` "the rule" -- and the target to pass runs its fused
    session calls (onnx: `sample_step`, `pass_probs`) as SESSION spans. Mode False changes nothing: the bare
    blocks run exactly what generation runs.

    So the blocks call `decode.step` and `decode.settle_round` themselves, and a change in generation is
    attributed without a copy of it here to follow. The labels go in through the module references generate
    looks its helpers up by, restored on leaving: generate has no label hook of its own, and this way
    generation pays nothing for them."""
    if not mode:
        yield target
        return
    fused = [name for name in ("sample_step", "pass_probs") if getattr(target, name, None) is not None]
    seams = decode.sampling, decode.rule
    decode.sampling = _Labels(sampling, mode, probs="logits to sample", sample=sample)
    decode.rule = _Labels(rule, mode, accept_reject="the rule")
    try:
        yield _Labels(target, mode, **dict.fromkeys(fused, SESSION)) if fused else target
    finally:
        decode.sampling, decode.rule = seams


class _Labels:
    """`inner` as its callers see it, the functions named in `labels` (those it has) run under their label."""

    def __init__(self, inner, mode, **labels: str):
        self._inner = inner
        for name, label in labels.items():
            fn = getattr(inner, name, None)
            if fn is not None:
                setattr(self, name, _labelled_call(fn, mode, label))

    def __getattr__(self, name: str):
        return getattr(self._inner, name)

    def __call__(self, *args, **kwargs):
        return self._inner(*args, **kwargs)


def _labelled_call(fn: Callable, mode, label: str) -> Callable:
    def call(*args, **kwargs):
        with _label(mode, label):
            return fn(*args, **kwargs)

    return call


def render(machine: Machine, rows: list[dict], attr: dict, context_pos: int = 100) -> str:
    """The machine's figures, the floor table and the attribution table as plain text."""
    lines = [f"machine ({machine.threads} thread{'s' if machine.threads > 1 else ''}): GEMM {GEMM_SIZE}x{GEMM_SIZE} "
             f"{machine.matmul_gflops:.1f} GFLOP/s, cache read {machine.cache_gbps:.1f} GB/s, memory read "
             f"{machine.memory_gbps:.1f} GB/s", "",
             f"{rows[0]['backend']} target pass after {context_pos} cached positions: median measured time against "
             f"the roofline "
             f"floor", f"{'positions':>9} {'measured µs':>12} {'floor µs':>9} {'overhead':>9} "
             f"{'MFLOP':>7} {'KB':>7}"]
    for r in rows:
        lines.append(f"{r['positions']:>9} {r['measured_us']:>12.1f} {known(r['floor_us'], '.1f'):>9} "
                     f"{known(r['share'], '.1%'):>9} {known(r['flops'], '.2f', 1e6):>7} {known(r['bytes'], '.0f', 1e3):>7}")
    lines += ["", "where the time goes (µs; labelled spans timed, the rest split by torch.profiler's self CPU "
              "time; the residual is what it cannot see)"
              + (f"; {CAME_BACK}: {OLD_ROUND} less round, what the lean round saved" if OLD_ROUND in attr else ""),
              f"{'category':32}" + "".join(f" {h:>11}" for h in scope_header(attr))]

    def row(what: str, values: dict[str, float], spec: str = ".1f", difference: bool = True) -> str:
        return (f"{what:32}" + "".join(f" {c:>11}" for c in scope_cells(values, spec, difference))).rstrip()

    for name in CATEGORIES:
        lines.append(row(name, {scope: a["categories"][name] for scope, a in attr.items()}))
    for key, what in (("accounted_us", "accounted (sum of the above)"), ("measured_us", "measured untimed"),
                      ("accounted_ratio", "accounted / untimed (pairs)"), ("profiled_us", "profiled wall time"),
                      ("stretch", "profiler's stretch of the rest")):
        ratio = key in ("stretch", "accounted_ratio")
        lines.append(row(what, {scope: a[key] for scope, a in attr.items()}, ".3f" if ratio else ".1f", not ratio))
    return "\n".join(lines)


def scope_header(scopes) -> list[str]:
    """The attribution table's columns after the category: the scopes there are, in SCOPES order, and CAME_BACK
    where the old round is among them (an attribution with lean=False, or a report saved before, has none)."""
    return [s for s in SCOPES if s in scopes] + ([CAME_BACK] if OLD_ROUND in scopes else [])


def scope_cells(values: dict[str, float], spec: str = ".1f", difference: bool = True) -> list[str]:
    """One row of the attribution table under `scope_header(values)`: each scope's value formatted by `spec`,
    and CAME_BACK, the old round's less the lean round's (blank where `difference` is False: a ratio's
    difference means nothing)."""
    cells = [format(values[s], spec) for s in SCOPES if s in values]
    if OLD_ROUND in values:
        cells.append(format(values[OLD_ROUND] - values["round"], spec) if difference else "")
    return cells
