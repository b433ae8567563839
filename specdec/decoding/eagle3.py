"""EAGLE-3 heads in the format the speculators library writes (vLLM's, `speculators_model_type: "eagle3"`), loaded
for the Hugging Face target they were trained on: `make_draft("eagle3:PATH", target)`.

The folder holds `config.json` and `model.safetensors`. The head reads three of the target's layers (EAGLE-3's
feature fusion: `eagle_aux_hidden_state_layer_ids`, ids as vLLM counts them, 0 the embeddings, id j the input of
layer j, which is transformers' `hidden_states[j]`; vLLM's default 2, L/2, L-3 where the config names none),
maps them to one state (`fc`), and runs one decoder layer whose attention reads [e(x_{t+1}); that state] (both
normed: `input_layernorm`, `hidden_norm`) over the positions it has seen, with its own cache; its final norm and
`lm_head` give logits over the draft vocabulary, which `d2t` maps back into the target's (draft id d is target id
d + d2t[d]; a target token outside the draft vocabulary gets probability 0, so the rule stays exact). A round's
first draft comes from the target's states of the positions confirmed since the last round (each position t read
with the token after it: the pending token for the last one); each later draft from the layer's own output at
the position before, fed back in place of `fc`'s (the draft's drafted positions leave its cache when the round
ends: the next round recomputes the confirmed ones from the target's states, as vLLM does).

What is read: `transformer_layer_config` (a Llama layer: hidden size, heads, KV heads, head size, intermediate
size, RMS-norm eps, rope; one layer), `draft_vocab_size`, `norm_before_residual`, `target_hidden_size`,
`eagle_aux_hidden_state_layer_ids`; the weights `embed_tokens` (the target's input embeddings where absent, as
vLLM shares them), `fc` (with or without bias), `layers.0.{input_layernorm, hidden_norm, post_attention_layernorm,
self_attn.{q,k,v,o}_proj, mlp.{gate,up,down}_proj}`, `norm`, `lm_head`, `d2t` and `t2d` (identity where the
draft vocabulary is the target's). What is refused, one line each: another model type or more layers than one,
the later variants' `norm_before_fc`, `fc_norm` and `norm_output`, a target of another width or vocabulary, a
target that cannot hand its layers' states. The layer is transformers' Llama parts (RMS norm, MLP, rotary
embedding), so it needs the `hf` extra, as its target does.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from specdec.decoding.drafts import Draft
from specdec.model import sampling
from specdec.model.protocol import feature_support
from specdec.util.errors import InputError

PREFIX = "eagle3:"  # a draft named eagle3:PATH (`registry.make_draft`)
REFUSED = ("norm_before_fc", "fc_norm", "norm_output")  # later variants' switches this loader does not run


class Eagle3Layer(nn.Module):
    """The one decoder layer: attention over [normed embedding; normed state] (2H in, H out), then the MLP."""

    def __init__(self, cfg, norm_before_residual: bool):
        from transformers.models.llama.modeling_llama import LlamaMLP, LlamaRMSNorm

        super().__init__()
        h, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.heads, self.kv_heads = cfg.num_attention_heads, cfg.num_key_value_heads
        self.head_dim = getattr(cfg, "head_dim", None) or h // self.heads
        self.norm_before_residual = norm_before_residual
        self.input_layernorm, self.hidden_norm = LlamaRMSNorm(h, eps=eps), LlamaRMSNorm(h, eps=eps)
        self.post_attention_layernorm = LlamaRMSNorm(h, eps=eps)
        bias = bool(getattr(cfg, "attention_bias", False))
        self.self_attn = nn.Module()
        self.self_attn.q_proj = nn.Linear(2 * h, self.heads * self.head_dim, bias=bias)
        self.self_attn.k_proj = nn.Linear(2 * h, self.kv_heads * self.head_dim, bias=bias)
        self.self_attn.v_proj = nn.Linear(2 * h, self.kv_heads * self.head_dim, bias=bias)
        self.self_attn.o_proj = nn.Linear(self.heads * self.head_dim, h, bias=bias)
        self.mlp = LlamaMLP(cfg)

    def forward(self, embeds, hidden, cos, sin, cache: list, start: int) -> torch.Tensor:
        """embeds, hidden (1, T, H) at positions start..start+T-1; `cache` [keys, values] of the positions before
        (grown in place). Returns the layer's output (1, T, H), before the final norm."""
        from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

        residual = hidden
        hidden = self.hidden_norm(hidden)
        if self.norm_before_residual:
            residual = hidden
        x = torch.cat([self.input_layernorm(embeds), hidden], dim=-1)
        T = x.shape[1]
        a = self.self_attn
        q = a.q_proj(x).view(1, T, self.heads, self.head_dim).transpose(1, 2)
        k = a.k_proj(x).view(1, T, self.kv_heads, self.head_dim).transpose(1, 2)
        v = a.v_proj(x).view(1, T, self.kv_heads, self.head_dim).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        if cache[0] is not None:
            k, v = torch.cat([cache[0], k], dim=2), torch.cat([cache[1], v], dim=2)
        cache[0], cache[1] = k, v
        groups = self.heads // self.kv_heads
        k, v = k.repeat_interleave(groups, dim=1), v.repeat_interleave(groups, dim=1)
        allowed = torch.arange(k.shape[2])[None, :] <= torch.arange(start, start + T)[:, None]  # causal
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=allowed)
        h = residual + a.o_proj(out.transpose(1, 2).reshape(1, T, -1))
        return h + self.mlp(self.post_attention_layernorm(h))


class Eagle3Net(nn.Module):
    """The head's parameters under the speculators checkpoint's names."""

    def __init__(self, cfg, target_hidden: int, aux: int, draft_vocab: int, fc_bias: bool, norm_before_residual: bool):
        from transformers.models.llama.modeling_llama import LlamaRMSNorm, LlamaRotaryEmbedding

        super().__init__()
        h = cfg.hidden_size
        self.embed_tokens = nn.Embedding(cfg.vocab_size, h)
        self.fc = nn.Linear(aux * target_hidden, h, bias=fc_bias)
        self.layers = nn.ModuleList([Eagle3Layer(cfg, norm_before_residual)])
        self.norm = LlamaRMSNorm(h, eps=cfg.rms_norm_eps)
        self.lm_head = nn.Linear(h, draft_vocab, bias=False)
        self.register_buffer("d2t", torch.zeros(draft_vocab, dtype=torch.long))
        self.register_buffer("t2d", torch.zeros(cfg.vocab_size, dtype=torch.bool))
        self.rotary = LlamaRotaryEmbedding(config=cfg)

    def step(self, tokens: torch.Tensor, hidden: torch.Tensor, cache: list, start: int) -> torch.Tensor:
        """The layer's output (1, T, H) for the tokens after positions start..start+T-1 and their states."""
        positions = torch.arange(start, start + tokens.shape[-1])[None]
        cos, sin = self.rotary(hidden, positions)
        return self.layers[0](self.embed_tokens(tokens)[None], hidden, cos, sin, cache, start)

    def logits(self, h: torch.Tensor, target_vocab: int) -> torch.Tensor:
        """The next token's logits over the target's vocabulary (-inf outside the draft's) from an output (H,)."""
        draft = self.lm_head(self.norm(h))
        out = torch.full((target_vocab,), float("-inf"), dtype=draft.dtype)
        out[torch.arange(draft.shape[-1]) + self.d2t] = draft
        return out


class Eagle3Draft(Draft):
    """Drafts k tokens a round from the target's fused layers, then its own outputs (see the module)."""

    name = "eagle3"
    batch_unsupported = "an EAGLE-3 head keeps one sequence's attention cache: it drafts for one sequence at a time"

    def __init__(self, net: Eagle3Net, layers: tuple[int, ...], target_vocab: int, path: str):
        self.net = net.eval()
        self.feature_layers = layers
        self.target_vocab = target_vocab
        self.name = f"{PREFIX}{path}"
        self.reset()

    def reset(self) -> None:
        self.cache: list = [None, None]  # the layer's keys and values at positions 0..cached-1
        self.cached = 0  # positions whose cache entries came from the target's states
        # position -> the target's layers there, kept while the position stands (a rollback past the cache's
        # end recomputes its entries from them)
        self.states: dict[int, torch.Tensor] = {}

    def rollback(self, n_valid: int) -> None:
        # position t's entry read token t+1: it stands while tokens[: t + 2] do
        keep = max(min(self.cached, n_valid - 1), 0)
        if keep < self.cached:
            self.cache = [c[:, :, :keep] for c in self.cache]
            self.cached = keep
        self.states = {t: s for t, s in self.states.items() if t < n_valid}

    def take_features(self, features: torch.Tensor, pos: int, row: int = 0) -> None:
        for i in range(features.shape[0]):
            self.states[pos + i] = features[i].clone()  # a copy: the target reuses the tensor

    @torch.inference_mode()
    def propose(self, tokens, k, rng, temperature):
        last = len(tokens) - 2  # the position whose state predicted the pending token
        todo = list(range(self.cached, last + 1))
        missing = [t for t in todo if t not in self.states]
        if missing:
            raise RuntimeError(f"eagle3 drafts from the target's states at positions {todo[0]}..{last}, but has "
                               f"none at {missing[:3]}: the loop hands them after each pass")
        fused = self.net.fc(torch.stack([self.states[t] for t in todo]))[None]
        h = self.net.step(torch.as_tensor(tokens[self.cached + 1 : last + 2]), fused, self.cache, self.cached)[0, -1]
        self.cached = last + 1
        out, qs = [], []
        for j in range(k):
            q = sampling.probs(self.net.logits(h, self.target_vocab), temperature)
            tok = sampling.sample(q, rng)
            out.append(tok)
            qs.append(q)
            if j + 1 < k:  # the next draft reads this one from its own output at the position before
                h = self.net.step(torch.tensor([tok]), h[None, None], self.cache, last + 1 + j)[0, -1]
        self.cache = [c[:, :, : self.cached] for c in self.cache]  # the drafted positions leave the cache
        return out, np.stack(qs)

    def weight_bytes(self) -> int:
        return sum(p.numel() * p.element_size() for p in self.net.parameters())


def _config(folder: Path) -> dict:
    path = folder / "config.json"
    if not path.is_file():
        raise InputError(f"eagle3: no config.json in {str(folder)!r} (a speculators EAGLE-3 folder holds config.json "
                         f"and model.safetensors)")
    cfg = json.loads(path.read_text())
    kind = cfg.get("speculators_model_type")
    if kind != "eagle3":
        raise InputError(f"eagle3: {str(path)!r} has speculators_model_type {kind!r}; this loader reads 'eagle3'")
    layer = cfg.get("transformer_layer_config") or {}
    if layer.get("model_type", "llama") != "llama" or layer.get("num_hidden_layers", 1) != 1:
        raise InputError(f"eagle3: the layer is {layer.get('model_type')!r} with {layer.get('num_hidden_layers')} "
                         f"layers; this loader runs one Llama layer (model_type 'llama', num_hidden_layers 1)")
    on = [name for name in REFUSED if cfg.get(name)]
    if on:
        raise InputError(f"eagle3: {', '.join(on)} set in {str(path)!r}; this loader runs the EAGLE-3 head without "
                         f"them ({', '.join(REFUSED)} all false)")
    return cfg


def load(path: str, target) -> Eagle3Draft:
    """The EAGLE-3 head in folder `path` (speculators format) for Hugging Face target `target`, checked against it."""
    from safetensors.torch import load_file
    from transformers import LlamaConfig

    folder = Path(path)
    cfg = _config(folder)
    layer = LlamaConfig(**{k: v for k, v in cfg["transformer_layer_config"].items() if k != "architectures"})
    n = getattr(target, "hidden_layers", None)
    if n is None:
        raise InputError(f"eagle3: the target {type(target).__name__} hands no layer states (an hf:PATH target does)")
    width = int(target.model.config.hidden_size)
    target_hidden = int(cfg.get("target_hidden_size") or layer.hidden_size)
    if target_hidden != width or layer.vocab_size != target.vocab_size:
        raise InputError(f"eagle3: the head was made for a target of width {target_hidden} and vocabulary "
                         f"{layer.vocab_size}; this one has {width} and {target.vocab_size}")
    layers = tuple(cfg.get("eagle_aux_hidden_state_layer_ids") or (2, n // 2, n - 3))
    if why := feature_support(target, layers):
        raise InputError(f"eagle3: {why}")
    weights_file = folder / "model.safetensors"
    if not weights_file.is_file():
        raise InputError(f"eagle3: no model.safetensors in {str(folder)!r}")
    weights = {k: v for k, v in load_file(str(weights_file)).items() if not k.startswith("verifier")}
    draft_vocab = int(cfg.get("draft_vocab_size") or layer.vocab_size)
    net = Eagle3Net(layer, target_hidden, len(layers), draft_vocab, "fc.bias" in weights,
                    bool(cfg.get("norm_before_residual")))
    if "embed_tokens.weight" not in weights:  # vLLM shares the target's input embeddings then
        weights["embed_tokens.weight"] = target.model.get_input_embeddings().weight.detach().float()
    if "d2t" not in weights and draft_vocab == layer.vocab_size:
        weights["d2t"] = torch.zeros(draft_vocab, dtype=torch.long)
        weights["t2d"] = torch.ones(layer.vocab_size, dtype=torch.bool)
    try:
        net.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in weights.items()}, strict=True)
    except RuntimeError as e:
        raise InputError(f"eagle3: {str(weights_file)!r} does not hold the head's weights: "
                         f"{str(e).splitlines()[0]}") from None
    return Eagle3Draft(net, layers, target.vocab_size, path)
