"""The shipped GPT (and the small draft) as GGUF files that llama.cpp loads: a real llama.cpp pair on every
machine, with no download.

llama.cpp's own `convert_hf_to_gguf.py` refuses the `export-hf` output (it wants `n_ctx` in a GPT-2 config,
then does not recognise the character tokenizer's pre-tokenizer), so the file is written directly with the
`gguf` package's writer. The architecture is llama.cpp's "gpt2" graph, which is the shipped block: learned
position embeddings, pre-LayerNorm with weight and bias (eps 1e-5), one fused q|k|v projection split in that
order, tanh GELU, no tied head. That graph requires a bias on every projection; the shipped Linears have none,
so the biases are written as zeros. Tensors keep torch's (out, in) layout: GGUF lists dimensions the other
way round, which is the {in, out} llama.cpp's loader asks for. Everything is float32, so the only differences
from specdec's own forward are llama.cpp's kernels (its GELU reads a float16 table; see tests/test_export_gguf).

The tokenizer is a SentencePiece-style ("llama") vocabulary whose tokens 0..83 are the corpus's characters,
in the corpus's order, so llama.cpp's ids are specdec's ids: no merges can apply (every token is one
character), no space prefix is added and no BOS either. SentencePiece spells a space as U+2581, and llama.cpp
turns it back into " " when it detokenizes. llama.cpp gives such a vocabulary BOS 1, EOS 2 and UNK 0 unless told
otherwise and only accepts ids inside the vocabulary, which would make "!" an end of text; so three special
tokens follow the characters (ids 84..86: <unk>, <s>, </s>). The model has no output for them, so their rows
of the output matrix are set so that their logits are about -1e4 whatever the hidden state (`_never_rows`):
they are never sampled, at any temperature, and the first 84 logits are specdec's. There are no byte tokens
(256 more output rows would cost the small draft a third more per pass), so a character outside the corpus has
nothing to fall back on: llama.cpp's tokenizer then aborts the whole process (std::out_of_range in
byte_to_token). Check text before llama.cpp tokenizes it, as the llama-cpp engine does.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch

from specdec.model import corpus
from specdec.model.gpt import GPT
from specdec.model.train import load_checkpoint, save_checkpoint, shipped_path
from specdec.util.errors import InputError
from specdec.util.files import atomic_path

EXPORTED = ("target", "small")  # the files export_gguf writes (NAME.gguf), from the shipped checkpoints
GROWN = "grown"  # export_grown's files: grown.gguf and grown.pt (model.grow's user-sized target)
SPECIALS = ("<unk>", "<s>", "</s>")  # ids vocab_size.. : llama.cpp's unknown, BOS and EOS, never generated
NEVER_LOGIT = -1.0e4  # the special tokens' logit: exp(-1e4) is 0 in float32, so they are never sampled
SPACE = "\u2581"  # SentencePiece's spelling of " "
TOKEN_NORMAL, TOKEN_UNKNOWN, TOKEN_CONTROL = 1, 2, 3  # gguf.TokenType values


def vocabulary_tokens() -> tuple[list[str], list[int]]:
    """The token texts and types: the corpus's characters (ids as `corpus.encode`), then SPECIALS."""
    chars = [SPACE if ch == " " else ch for ch in corpus.vocabulary()]
    types = [TOKEN_NORMAL] * len(chars) + [TOKEN_UNKNOWN, TOKEN_CONTROL, TOKEN_CONTROL]
    return chars + list(SPECIALS), types


def _never_rows(model: GPT, n: int) -> np.ndarray:
    """n output rows whose logit is NEVER_LOGIT for any input.

    The head reads h = g * xhat + b (ln_f), and LayerNorm makes sum(xhat) = 0 for every position. A row
    w = c / g gives w . h = c * sum(xhat) + c * sum(b / g) = c * sum(b / g): a constant, set to NEVER_LOGIT by c.
    Rounding leaves it within about 1 of that (tests/test_export_gguf checks it on real text).
    """
    g = model.ln_f.weight.detach().double()
    b = model.ln_f.bias.detach().double()
    s = float((b / g).sum()) if bool((g.abs() > 1e-3).all()) else 0.0
    if abs(s) < 1e-3:
        raise ValueError("ln_f's weights leave no constant-logit row for the special tokens; cannot export")
    row = (NEVER_LOGIT / s) / g
    return np.tile(row.numpy().astype(np.float32), (n, 1))


def gguf_tensors(model: GPT) -> dict[str, np.ndarray]:
    """The model's weights under llama.cpp's gpt2 tensor names, float32, torch layout (see module docstring)."""
    if not model.plain_linears():
        raise ValueError("only a float GPT with plain bias-free Linears can be exported")

    def f32(t: torch.Tensor) -> np.ndarray:
        return t.detach().to("cpu", torch.float32).contiguous().numpy().copy()

    head = np.concatenate([f32(model.lm_head.weight), _never_rows(model, len(SPECIALS))])
    out = {"token_embd.weight": np.concatenate([f32(model.wte.weight),
                                                np.zeros((len(SPECIALS), model.config.n_embd), np.float32)]),
           "position_embd.weight": f32(model.wpe.weight),
           "output_norm.weight": f32(model.ln_f.weight), "output_norm.bias": f32(model.ln_f.bias),
           "output.weight": head}
    for i, b in enumerate(model.blocks):
        h = f"blk.{i}."
        for ours, theirs in ((b.ln1, "attn_norm"), (b.ln2, "ffn_norm")):
            out[h + theirs + ".weight"], out[h + theirs + ".bias"] = f32(ours.weight), f32(ours.bias)
        for lin, theirs in ((b.attn.qkv, "attn_qkv"), (b.attn.proj, "attn_output"),
                            (b.mlp.fc, "ffn_up"), (b.mlp.proj, "ffn_down")):
            out[h + theirs + ".weight"] = f32(lin.weight)  # (out, in): GGUF's {in, out}
            out[h + theirs + ".bias"] = np.zeros(lin.weight.shape[0], np.float32)
    return out


def write_gguf(model: GPT, path: str | os.PathLike, name: str = "specdec") -> Path:
    """Write `model` as one GGUF file at `path`, all or nothing (a temporary file beside it, then renamed)."""
    import gguf  # the optional [llamacpp] extra: imported only when asked for

    c = model.config
    tokens, types = vocabulary_tokens()
    n = len(corpus.vocabulary())
    if c.vocab_size != n:
        raise ValueError(f"the model has {c.vocab_size} outputs, the corpus {n} characters")
    path = Path(path)
    with atomic_path(path) as tmp:
        w = gguf.GGUFWriter(str(tmp), arch="gpt2")
        w.add_name(name)
        w.add_context_length(c.context)
        w.add_embedding_length(c.n_embd)
        w.add_feed_forward_length(4 * c.n_embd)
        w.add_block_count(c.n_layer)
        w.add_head_count(c.n_head)
        w.add_layer_norm_eps(model.ln_f.eps)
        w.add_file_type(gguf.LlamaFileType.ALL_F32)
        w.add_tokenizer_model("llama")
        w.add_token_list(tokens)
        w.add_token_scores([0.0] * len(tokens))
        w.add_token_types(types)
        w.add_unk_token_id(n)
        w.add_bos_token_id(n + 1)
        w.add_eos_token_id(n + 2)
        w.add_add_bos_token(False)
        w.add_add_eos_token(False)
        w.add_add_space_prefix(False)
        for key, arr in gguf_tensors(model).items():
            w.add_tensor(key, arr)
        w.write_header_to_file()
        w.write_kv_data_to_file()
        w.write_tensors_to_file()
        w.close()
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp's file is private; a model file is read by servers too
    return path


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """OUT as a folder export_gguf can write into: InputError naming it when it, or a file it would write,
    is in the way (a file where the folder goes, a folder where a .gguf goes)."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{str(out)!r} exists and is not a folder; give a folder to export into")
    for name in EXPORTED + (GROWN,):
        if (out / f"{name}.gguf").is_dir():
            raise InputError(f"{str(out / f'{name}.gguf')!r} is a folder; export-gguf writes a file there")
    return out


def export_gguf(out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write the shipped target and the `small` draft as out_dir/target.gguf and out_dir/small.gguf;
    returns {name: path}. Load them with `llama_cpp.Llama(model_path=...)`."""
    out = check_out_dir(out_dir)
    paths = {}
    for name in EXPORTED:
        model, _meta = load_checkpoint(shipped_path(name))
        paths[name] = write_gguf(model, out / f"{name}.gguf", name=f"specdec-{name}")
    return paths


def export_grown(out_dir: str | os.PathLike, r: int, n_layer: int, mix: float, seed: int = 0) -> dict[str, Path]:
    """`model.grow`'s user-sized target from the shipped one, as out_dir/grown.gguf (for llama.cpp) and
    out_dir/grown.pt (a checkpoint for specdec's own loop: `--target out_dir/grown.pt`); returns {kind: path}.
    Its truncated draft is the shipped target itself (target.gguf, or the shipped checkpoint)."""
    from specdec.model import grow  # the model layer's one builder of a grown target

    out = check_out_dir(out_dir)
    shipped, meta = load_checkpoint(shipped_path("target"))
    grown, recipe = grow.grow(shipped, r, n_layer, mix=mix, seed=seed)
    ckpt = out / f"{GROWN}.pt"
    save_checkpoint(grown, {**meta, "grow": recipe}, ckpt)
    return {"gguf": write_gguf(grown, out / f"{GROWN}.gguf", name="specdec-grown"), "checkpoint": ckpt}
