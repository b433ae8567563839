"""`export_gguf`: the shipped pair as GGUF files that llama.cpp (llama-cpp-python) loads and runs as specdec does.

The [llamacpp] extra is optional (CI's test venv does not install it): without it these tests are skipped.
"""

import os
import stat
import subprocess
import sys

import numpy as np
import pytest
import torch

import specdec
from specdec.model import corpus
from specdec.model.export_gguf import NEVER_LOGIT, SPECIALS, export_gguf
from specdec.model.train import load_checkpoint, shipped_path
from specdec.util.errors import InputError

llama_cpp = pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")

PROMPTS = ["ROMEO:", "JULIET:\nO ", "First Citizen:\nBefore we proceed any further, hear me speak."]
N = 120  # generated tokens per prompt: prompt + N stays inside the 256-position context
# llama.cpp's logits against specdec's over a whole 200-position pass differ by about 0.01 at most: its CPU GELU
# reads a float16 table (ggml-cpu's GGML_GELU_FP16) and its KV cache is float16 by default; with an F32 cache it
# is about 0.009, so the table is most of it. Greedy choices only change where the top two logits are that close.
LOGIT_TOL = 0.05


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    return export_gguf(tmp_path_factory.mktemp("gguf"))


def _llama(path, logits_all=False):
    return llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=1, n_threads_batch=1, verbose=False,
                           logits_all=logits_all)


def _greedy(llama, ids, n):
    llama.reset()
    out = []
    for tok in llama.generate(ids, temp=0.0, top_k=0, top_p=1.0, min_p=0.0, repeat_penalty=1.0):
        out.append(tok)
        if len(out) == n:
            return out


def test_writes_both_files_readable_by_others(exported):
    assert set(exported) == {"target", "small"}
    for path in exported.values():
        assert path.is_file() and path.stat().st_size > 0
        assert stat.S_IMODE(path.stat().st_mode) == 0o666 & ~_umask()  # not mkstemp's private 0600


def _umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


@pytest.mark.parametrize("name", ["target", "small"])
def test_tokenizer_ids_are_the_corpus_ids_and_text_comes_back(exported, name):
    llama = llama_cpp.Llama(model_path=str(exported[name]), vocab_only=True, verbose=False)
    assert llama.n_vocab() == len(corpus.vocabulary()) + len(SPECIALS)
    for text in [corpus.vocabulary(), "ROMEO:\n  What, ho! say 'tis so.\n\n", " leading space", corpus.load_text()[:5000]]:
        ids = llama.tokenize(text.encode(), add_bos=True, special=True)  # add_bos: the file says no BOS
        assert ids == corpus.encode(text)
        assert llama.detokenize(ids).decode() == text
    # the specials are llama.cpp's unknown, BOS and EOS, outside the characters: no character ends a generation
    n = len(corpus.vocabulary())
    assert (llama.token_bos(), llama.token_eos()) == (n + 1, n + 2)


@pytest.mark.parametrize("name", ["target", "small"])
def test_one_pass_logits_agree_and_specials_are_never_sampled(exported, name, target):  # target: torch on 1 thread
    model, _ = load_checkpoint(shipped_path(name))
    ids = corpus.encode(corpus.split_text("val")[:200])
    llama = _llama(exported[name], logits_all=True)
    llama.reset()
    llama.eval(ids)
    theirs = np.array(llama.scores[: len(ids)])
    with torch.inference_mode():
        ours = model(model.ids(ids), 0)[0].numpy()
    n = ours.shape[1]
    assert np.abs(theirs[:, :n] - ours).max() < LOGIT_TOL
    assert np.abs(theirs[:, n:] - NEVER_LOGIT).max() < 1.0  # the constant-logit rows hold on real text


def test_greedy_through_llama_cpp_is_specdecs_greedy_token_for_token(exported, target):
    llama = _llama(exported["target"])
    for prompt in PROMPTS:
        ours = specdec.generate(target, prompt, N, seed=0, temperature=0)
        theirs = _greedy(llama, corpus.encode(prompt), N)
        assert theirs == list(ours.ids), prompt
        assert llama.detokenize(theirs).decode() == ours.text


def test_small_draft_greedy_too(exported, target):  # target: torch on 1 thread (conftest)
    small, _ = load_checkpoint(shipped_path("small"))
    llama = _llama(exported["small"])
    for prompt in PROMPTS[:2]:
        ours = specdec.generate(small, prompt, N, seed=0, temperature=0)
        assert _greedy(llama, corpus.encode(prompt), N) == list(ours.ids), prompt


def test_a_new_export_replaces_the_old_files(tmp_path):
    (tmp_path / "target.gguf").write_text("old")
    paths = export_gguf(tmp_path)
    assert paths["target"].read_bytes()[:4] == b"GGUF"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["small.gguf", "target.gguf"]  # no temporary left


def test_the_command_writes_both_and_says_so_on_stderr(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "specdec.cli", "export-gguf", str(tmp_path / "out")],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0 and proc.stdout == ""
    assert proc.stderr.splitlines() == [f"wrote {tmp_path}/out/target.gguf (target)", f"wrote {tmp_path}/out/small.gguf (small)"]


def test_out_that_is_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="exists and is not a folder"):
        export_gguf(tmp_path / "f")


def test_the_grown_target_through_llama_cpp_is_its_checkpoints_greedy(tmp_path):
    from specdec.model.export_gguf import export_grown

    paths = export_grown(tmp_path, 2, 4, mix=4.0)
    grown, _ = load_checkpoint(paths["checkpoint"])
    llama = _llama(paths["gguf"])
    for prompt in PROMPTS[:2]:
        ours = specdec.generate(grown, prompt, 60, seed=0, temperature=0)
        assert _greedy(llama, corpus.encode(prompt), 60) == list(ours.ids), prompt
