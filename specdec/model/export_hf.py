"""The shipped GPT (and the small draft) as Hugging Face transformers checkpoints: a real, trained HF pair on
every machine, with no download.

`export_hf(out)` writes `out/target` and `out/small`, each a GPT-2 architecture checkpoint (config.json,
model.safetensors) with a character-level tokenizer (tokenizer.json) whose ids are the corpus's. The shipped
block is GPT-2's (pre-LayerNorm, tanh GELU, a fused q|k|v projection split in that order, learned position
embeddings), so the mapping is a copy: GPT-2's Conv1D stores a Linear's weight transposed, its biases (the
shipped Linears have none) are zero, and the head is untied from the embedding as in the shipped model.

The tokenizer is a BPE model with the 84 characters as its vocabulary and no merges, no normalizer and no
pre-tokenizer, so every character -- spaces and newlines included -- is one token with its corpus id; the
Fuse decoder joins them back without separators.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

import torch

from specdec.model import corpus
from specdec.model.gpt import GPT
from specdec.model.hf import quiet
from specdec.model.train import load_checkpoint, shipped_path
from specdec.util import versions
from specdec.util.errors import InputError
from specdec.util.files import swap_folder

EXPORTED = ("target", "small")  # the folders export_hf writes, from the shipped checkpoints of these names


def char_tokenizer():
    """A transformers fast tokenizer whose tokens are the corpus's characters, ids as `corpus.encode`."""
    from tokenizers import Tokenizer, decoders, models
    from transformers import PreTrainedTokenizerFast

    vocab = {ch: i for i, ch in enumerate(corpus.vocabulary())}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.decoder = decoders.Fuse()
    # clean_up_tokenization_spaces would turn " ," into "," on decode: text must come back as it went in
    return PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)


def gpt2_state(model: GPT) -> dict[str, torch.Tensor]:
    """The shipped model's weights under GPT2LMHeadModel's names and layouts."""
    if not model.plain_linears():
        raise ValueError("only a float GPT with plain bias-free Linears can be exported")
    out = {"transformer.wte.weight": model.wte.weight, "transformer.wpe.weight": model.wpe.weight,
           "transformer.ln_f.weight": model.ln_f.weight, "transformer.ln_f.bias": model.ln_f.bias,
           "lm_head.weight": model.lm_head.weight}
    for i, b in enumerate(model.blocks):
        h = f"transformer.h.{i}."
        for ours, theirs in ((b.ln1, "ln_1"), (b.ln2, "ln_2")):
            out[h + theirs + ".weight"], out[h + theirs + ".bias"] = ours.weight, ours.bias
        for lin, theirs in ((b.attn.qkv, "attn.c_attn"), (b.attn.proj, "attn.c_proj"),
                            (b.mlp.fc, "mlp.c_fc"), (b.mlp.proj, "mlp.c_proj")):
            out[h + theirs + ".weight"] = lin.weight.t()  # Conv1D: (in, out)
            out[h + theirs + ".bias"] = torch.zeros(lin.weight.shape[0])
    return {k: v.detach().to("cpu", torch.float32).contiguous().clone() for k, v in out.items()}


def to_gpt2(model: GPT):
    """A GPT2LMHeadModel computing what `model` computes (within float rounding)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    c = model.config
    cfg = GPT2Config(vocab_size=c.vocab_size, n_positions=c.context, n_embd=c.n_embd, n_layer=c.n_layer,
                     n_head=c.n_head, n_inner=4 * c.n_embd, activation_function="gelu_new",
                     resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, layer_norm_epsilon=1e-5,
                     tie_word_embeddings=False, bos_token_id=None, eos_token_id=None, pad_token_id=None)
    hf = GPT2LMHeadModel(cfg)
    missing, unexpected = hf.load_state_dict(gpt2_state(model), strict=False)
    if missing or unexpected:  # a transformers release that renamed a weight: fail loudly, never half-load
        raise RuntimeError(f"GPT-2 layout mismatch: missing {missing}, unexpected {unexpected}")
    return hf.eval()


def save_folder(model: GPT, folder: Path) -> Path:
    """Write `model` and the character tokenizer as one HF folder, all or nothing: into a temporary folder
    beside it, then swapped into place (`swap_folder`: an older export there is replaced only then)."""
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
    try:
        to_gpt2(model).save_pretrained(tmp, safe_serialization=True)
        char_tokenizer().save_pretrained(tmp)
        swap_folder(tmp, folder)  # the old export stays until the new one is complete beside it
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return folder


def export_hf(out_dir: str | os.PathLike) -> dict[str, Path]:
    """Write the shipped target and the `small` draft under out_dir as `target/` and `small/`; returns
    {name: folder}. Load them back with `model.hf.load_hf(out_dir / "target")`."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise InputError(f"{str(out)!r} exists and is not a folder; give a folder to export into")
    versions.require("transformers")
    quiet()
    folders = {}
    for name in EXPORTED:
        model, _meta = load_checkpoint(shipped_path(name))
        folders[name] = save_folder(model, out / name)
    return folders
