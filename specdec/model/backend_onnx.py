"""The `onnx` backend: the target's decoding forward as one ONNX graph run by ONNX Runtime with I/O binding.

Why: a pass of this model is per-call overhead (the report's overhead table), and ONNX Runtime walks a graph
of ~36 kernels in C++ with one call from Python. Attention is ONNX Runtime's `GroupQueryAttention` contrib
kernel, the one its own LLM decoding uses: it reads the KV cache in place and appends the new positions'
keys and values to it (past and present bound to the same memory), so a pass copies no cache at all.

How it is wired (I/O binding: no input or output is copied between numpy and the runtime): `onnx_session`.

A tree pass needs the tree's mask: its nodes see the cache and their own ancestors only. It runs a third graph
("tree"), the pass graph with GroupQueryAttention's `attention_bias` input bound to the additive mask (0 where
allowed, -inf elsewhere) over the cache and the new positions. GQA's own causal mask is kept underneath, which
is harmless: a node's ancestors come before it in the tree's order, so the tree mask allows nothing the causal
one forbids. The nodes' keys and values land in the cache at pos.., where `keep_path` expects them, with no
copy of the past. What runs the eager forward instead (same weights, same cache memory, so results
agree): training windows (pos=None), batches of more than one sequence, models off the CPU, and the
int8-dynamic draft's quantized Linears.

The session is built from the weights when `setup_cache` sees them new or changed (a draft built from this
model overwrites a copy's weights in place before its first generation) and with torch's intra-op thread count
of that moment; it lives outside the module (`_STATE`), so `copy.deepcopy` makes a model that builds its own.

Measured variants of this design are in docs/backends.md, with the command that reproduces them.
"""

from __future__ import annotations

import importlib.util
import weakref

import numpy as np
import torch

from specdec.model import sampling
from specdec.model.gpt import GPT
from specdec.model.onnx_session import Session

# An optional dependency (`pip install specdec-bench[onnx]`); without it the backend is not in BACKENDS. It is
# imported where a session is built, so `import specdec` does not pay for onnx and onnxruntime.
AVAILABLE = importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None


_STATE: "weakref.WeakKeyDictionary[OnnxGPT, Session | None]" = weakref.WeakKeyDictionary()


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
        with torch.inference_mode(False):  # views a later forward outside inference mode may write (as eager's)
            for j, block in enumerate(self.blocks):
                block.attn.k_cache = torch.from_numpy(cache[2 * j])
                block.attn.v_cache = torch.from_numpy(cache[2 * j + 1])
        self._np_cache = cache
        if state is not None:
            state.bind_cache(cache)
        self.cache_batch = batch

    def _session(self) -> Session | None:
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
        new = Session(self, key, threads)
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
        """A tree pass without torch (`rounds.settle_tree_round`'s lean path): ids (T,) from `pos`, positions (T,)
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
        (`rounds.verify`): softmax inside the graph, so the logits never go through torch and numpy's float64
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
        """One character of target-only generation (`rounds.step`): the pass over `ids` at `pos` and the sample
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
