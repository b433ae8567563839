"""The roofline of a target pass: how large a share of it is work the arithmetic needs.

The work a pass must do is counted from the model's shapes (FLOPs and bytes, `pass_flops`, `pass_bytes`); what
this machine can do is measured here and now (`measure_machine`: GEMM throughput, cache and memory bandwidth),
so the work becomes a floor in microseconds -- a roofline lower bound. Measured pass times against that floor
(`overhead_table`) give the overhead share, 1 - floor / measured.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import torch

from specdec.model import backends
from specdec.measure import timing
from specdec.measure.clock import now
from specdec.model.gpt import GPT, GPTConfig

GEMM_SIZE = 256  # square matmul: 2·256³ = 33.5 MFLOP (~1 ms, so the call's µs of dispatch are < 1 %) on three
# 256 KiB matrices (0.75 MiB in all), which stay in cache as the target's 2.4 MB of weights do
CACHE_BYTES = 2_600_000  # about the target's weights (float32), read again and again: they stay in cache
MEMORY_BYTES = 256 * 2**20  # far beyond any last-level cache (tens of MiB): every read goes to DRAM
CACHE_READS = 8  # reads of the cache buffer per timed call (~1 ms), so timer and dispatch costs vanish


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


def _gemm_seconds(seconds: float) -> float:
    a, b = torch.randn(GEMM_SIZE, GEMM_SIZE), torch.randn(GEMM_SIZE, GEMM_SIZE)
    out = torch.empty(GEMM_SIZE, GEMM_SIZE)
    return _best(lambda: torch.mm(a, b, out=out), seconds)


def _cache_seconds(seconds: float) -> float:
    """One read of a buffer that fits the cache (its tensors freed on return, before the memory read)."""
    small = torch.ones(CACHE_BYTES // 4)

    def reads():
        for _ in range(CACHE_READS):
            small.sum()

    return _best(reads, seconds) / CACHE_READS


def _memory_seconds(seconds: float) -> float:
    big = torch.ones(MEMORY_BYTES // 4)  # ones, not empty: every page is touched before it is timed
    return _best(big.sum, seconds)


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
        mm_s, cache_s, memory_s = _gemm_seconds(seconds / 3), _cache_seconds(seconds / 3), _memory_seconds(seconds / 3)
        return Machine(matmul_gflops=2 * GEMM_SIZE**3 / mm_s / 1e9, cache_gbps=CACHE_BYTES / cache_s / 1e9,
                       memory_gbps=MEMORY_BYTES / memory_s / 1e9, threads=torch.get_num_threads())
    finally:
        torch.set_num_threads(before)


def _best(fn: Callable[[], object], seconds: float) -> float:
    """Fastest of fn's calls within `seconds` (at least 2 kept after the warm-up), in seconds."""
    deadline = now() + seconds
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
    deadline = now() + seconds
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
