"""The Hugging Face adapter, without a download: the shipped pair exported as GPT-2 checkpoints and a tiny
random Llama with a tokenizer made from the shipped corpus, both through the public Python API."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub: no test may reach the network

import numpy as np
import pytest
import torch

pytest.importorskip("transformers")

import specdec
from specdec.decoding import rule
from specdec.model import corpus
from specdec.model.hf import HFModelError, HFTarget

SEEDS = (0, 1, 2)
PROMPT = "ROMEO:\nWhat light through yonder window breaks?"


@pytest.fixture(scope="module")
def exported(hf_exported):
    return hf_exported  # the session's export (tests/conftest.py)


@pytest.fixture(scope="module")
def hf_target(exported):
    torch.set_num_threads(1)
    return specdec.load_hf(exported["target"])


@pytest.fixture(scope="module")
def llama_dir(tiny_llama_dir):
    return tiny_llama_dir  # a 2-layer random Llama in its own 320-token BPE (tests/conftest.py)


@pytest.fixture(scope="module")
def llama(llama_dir):
    return specdec.load_hf(llama_dir)


# --- the export ------------------------------------------------------------------------------------------


def test_export_writes_gpt2_safetensors_folders_with_a_character_tokenizer(exported, hf_target):
    import json

    for name in ("target", "small"):
        files = {p.name for p in exported[name].iterdir()}
        assert {"config.json", "model.safetensors", "tokenizer.json"} <= files
        assert not any(f.endswith(".bin") for f in files)
        assert json.loads((exported[name] / "config.json").read_text())["model_type"] == "gpt2"
    text = "KING RICHARD III:\n  Now is the winter, of our discontent;\n\n"
    assert hf_target.tokenize(text) == corpus.encode(text)
    assert hf_target.detokenize(corpus.encode(text)) == text
    assert hf_target.corpus_vocabulary and (hf_target.vocab_size, hf_target.context) == (84, 256)
    assert isinstance(hf_target, specdec.Target) and hf_target.tree_unsupported is None


def _feed(model, tokens, steps):
    """Logits of each (start, stop) pass in order, for the shipped GPT or an HFTarget."""
    out = []
    for a, b in steps:
        out.append(model(model.ids(tokens[a:b]), a)[0])
    return out


@torch.inference_mode()
def test_logits_match_the_native_forward_at_positions_and_after_rollbacks(target, hf_target):
    tokens = corpus.encode(PROMPT)
    # prefill 20; single steps; a 5-position verify pass; roll back 3 and re-run; back to 7; a pass at 0
    steps = [(0, 20), (20, 21), (21, 22), (22, 27), (24, 29), (29, 30), (7, 12), (12, 13), (0, 4)]
    target.setup_cache(1)
    hf_target.setup_cache(1)
    for native, adapted in zip(_feed(target, tokens, steps), _feed(hf_target, tokens, steps)):
        assert native.shape == adapted.shape
        assert (native - adapted).abs().max().item() < 1e-4
    assert hf_target.cached() == 4  # the cache is cropped, not re-filled: it holds exactly the last pass


@torch.inference_mode()
def test_rollback_crops_the_cache_and_never_re_runs_the_prefix(hf_target, monkeypatch):
    from transformers import DynamicCache

    crops, fed = [], []
    real = DynamicCache.crop
    monkeypatch.setattr(DynamicCache, "crop", lambda self, n: (crops.append(n), real(self, n))[1])
    hook = hf_target.model.transformer.wte.register_forward_pre_hook(lambda m, a: fed.append(a[0].shape[1]))
    try:
        tokens = corpus.encode(PROMPT)
        hf_target(hf_target.ids(tokens[:30]), 0)
        hf_target(hf_target.ids(tokens[26:31]), 26)  # 4 rejected: crop(-4), then 5 new positions
        hf_target.rollback(20)
        hf_target(hf_target.ids(tokens[20:21]), 20)
    finally:
        hook.remove()
    assert crops == [-4, -11] and fed == [30, 5, 1]
    assert hf_target.cached() == 21


def test_greedy_text_is_identical_to_native(target, hf_target, exported):
    want = specdec.generate(target, "ROMEO:", 150, seed=0, temperature=0).text
    assert specdec.generate(hf_target, "ROMEO:", 150, seed=0, temperature=0).text == want
    small = specdec.make_draft(f"hf:{exported['small']}", hf_target)
    assert specdec.speculative_generate(hf_target, small, "ROMEO:", 150, k=4, temperature=0).text == want


@pytest.mark.parametrize("name", ["bigram", "ngram", "small", "prompt-lookup"])
def test_acceptance_and_pass_counts_equal_native_for_fixed_seeds(target, hf_target, draft_factory, name):
    """Logits agree within ~1e-5, far below what moves one of these draws: every count is the native one."""
    hf_draft = specdec.make_draft(name, hf_target)
    for seed in SEEDS:
        for temperature in (0.0, 1.0):
            a = specdec.speculative_generate(target, draft_factory(name), "ROMEO:", 120, k=4, seed=seed,
                                             temperature=temperature)
            b = specdec.speculative_generate(hf_target, hf_draft, "ROMEO:", 120, k=4, seed=seed,
                                             temperature=temperature)
            assert b.text == a.text
            assert (b.stats.target_passes, b.stats.accepted, b.stats.accepted_per_position) == \
                   (a.stats.target_passes, a.stats.accepted, a.stats.accepted_per_position)


def test_target_only_sampled_text_equals_native(target, hf_target):
    for seed in SEEDS:
        assert specdec.generate(hf_target, "JULIET:", 120, seed=seed).text == \
               specdec.generate(target, "JULIET:", 120, seed=seed).text


def test_trees_through_the_adapter_equal_native(target, hf_target, draft_factory):
    spec = specdec.TreeSpec.parse("4x2x1")
    a = specdec.speculative_generate(target, draft_factory("bigram"), "ROMEO:", 80, k=1, seed=3, tree=spec)
    b = specdec.speculative_generate(hf_target, specdec.make_draft("bigram", hf_target), "ROMEO:", 80, k=1,
                                     seed=3, tree=spec)
    assert b.text == a.text and b.stats.target_passes == a.stats.target_passes


def _all_drafts(hf_target, draft_factory, exported):
    """Every shipped draft (the quantized ones are copies of the same weights: passed as objects) plus the
    prompt lookup and the exported small model as an HF draft."""
    out = {n: draft_factory(n) for n in ("int8", "int4", "int8-dynamic")}
    out.update({n: specdec.make_draft(n, hf_target) for n in ("bigram", "ngram", "small", "prompt-lookup")})
    out["hf:small"] = specdec.make_draft(f"hf:{exported['small']}", hf_target)
    return out


def test_verify_through_the_adapter_is_exact_for_every_draft_and_equals_native(target, hf_target,
                                                                               draft_factory, exported):
    drafts = _all_drafts(hf_target, draft_factory, exported)
    rows = specdec.verify(hf_target, drafts, k=4, samples=20_000, seed=0)
    assert [r["draft"] for r in rows if r["verdict"] != "exact"] == []
    native = {r["draft"]: r for r in specdec.verify(target, {n: draft_factory(n) for n in specdec.DRAFTS},
                                                     k=4, samples=20_000, seed=0)}
    for r in rows:  # same draws, same counts: the rows agree to float rounding of p
        if r["draft"] in native:
            assert r["tv"] == pytest.approx(native[r["draft"]]["tv"], abs=1e-6)


@pytest.mark.parametrize("broken", ["always_accept", "residual_is_p"])
def test_verify_through_the_adapter_catches_a_broken_rule(hf_target, monkeypatch, broken):
    if broken == "always_accept":
        monkeypatch.setattr(rule, "accept_reject", lambda p, q, drafted, rng: (len(drafted), 0))
    else:
        monkeypatch.setattr(rule, "residual", lambda p, q: p / p.sum())
    (row,) = specdec.verify(hf_target, {"bigram": specdec.make_draft("bigram", hf_target)}, k=4, samples=20_000)
    assert row["verdict"] == "CHECK" and row["tv"] > row["baseline_tv_max"]


def test_half_precision_runs_and_hands_float32_logits(exported, target):
    h = specdec.load_hf(exported["target"], dtype="bfloat16")
    logits = h(h.ids(corpus.encode("ROMEO:")), 0)
    assert logits.dtype == torch.float32 and h.dtype == torch.bfloat16
    native = target(target.ids(corpus.encode("ROMEO:")))
    assert (logits - native).abs().max().item() < 0.5  # bf16 keeps ~3 significant digits of these weights
    assert len(specdec.generate(h, "ROMEO:", 20, seed=0).text) == 20


# --- a second architecture, in tokens -----------------------------------------------------------------------


def test_a_tiny_llama_generates_in_its_own_tokens(llama):
    assert isinstance(llama, HFTarget) and not llama.corpus_vocabulary and llama.vocab_size == 320
    out = specdec.generate(llama, PROMPT, 30, seed=0)
    assert out.stats.chars == 30 and out.stats.target_passes == 30
    assert len(llama.tokenize(PROMPT)) < len(PROMPT)  # subword tokens: fewer than characters
    assert llama.detokenize(llama.tokenize(PROMPT)) == PROMPT


def test_a_tiny_llama_speculates_exactly_with_every_draft_that_fits_it(llama):
    """bigram and n-gram counted on the corpus in the Llama's tokens, prompt lookup; greedy equality, and the
    chain and tree rounds."""
    want = specdec.generate(llama, PROMPT, 40, seed=0, temperature=0).text
    for name, opts in (("bigram", {}), ("ngram", {"order": 3}), ("prompt-lookup", {})):
        d = specdec.make_draft(name, llama, **opts)
        out = specdec.speculative_generate(llama, d, PROMPT, 40, k=4, seed=0, temperature=0)
        assert out.text == want and out.stats.chars == 40
    bigram = specdec.make_draft("bigram", llama)
    assert bigram.vocab_size == 320 and bigram.propose(llama.tokenize("ROMEO"), 2, np.random.default_rng(0),
                                                       1.0)[1].shape == (2, 320)
    tree = specdec.speculative_generate(llama, bigram, PROMPT, 40, k=1, seed=0, temperature=0,
                                        tree=specdec.TreeSpec.parse("3x2"))
    assert tree.text == want


def test_a_tiny_llama_verifies_exact(llama):
    drafts = {n: specdec.make_draft(n, llama) for n in ("bigram", "prompt-lookup")}
    rows = specdec.verify(llama, drafts, k=4, samples=20_000, seed=0)
    assert [r["verdict"] for r in rows] == ["exact", "exact"]


# --- bad input: one line, a dedicated error, nothing written ---------------------------------------------


def _one_line(exc_info) -> str:
    msg = str(exc_info.value)
    assert "\n" not in msg
    return msg


def test_a_missing_path_and_an_uncached_id_are_refused_offline(tmp_path):
    with pytest.raises(HFModelError) as info:
        specdec.load_hf(tmp_path / "nothing-here")
    assert "no model folder" in _one_line(info) and "--allow-download" in str(info.value)
    with pytest.raises(HFModelError) as info:
        specdec.load_hf("specdec-test/not-a-cached-model")
    msg = _one_line(info)
    assert "'specdec-test/not-a-cached-model'" in msg and "local Hugging Face cache" in msg
    assert list(tmp_path.iterdir()) == []


def test_a_folder_that_is_not_a_model_is_refused(tmp_path):
    (tmp_path / "notes.txt").write_text("hello")
    with pytest.raises(HFModelError) as info:
        specdec.load_hf(tmp_path)
    assert "has no config.json" in _one_line(info)
    with pytest.raises(HFModelError) as info:
        specdec.load_hf(tmp_path / "notes.txt")
    assert "is a file, not a model folder" in _one_line(info)
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(HFModelError) as info:
        specdec.load_hf(tmp_path)
    assert "cannot load" in _one_line(info)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "notes.txt"]


def test_a_draft_with_another_vocabulary_is_refused_naming_both(hf_target, llama_dir, exported):
    with pytest.raises(HFModelError) as info:
        specdec.make_draft(f"hf:{llama_dir}", hf_target)
    msg = _one_line(info)
    assert f"{str(llama_dir)!r}, 320 tokens, 320 logits" in msg
    assert f"{str(exported['target'])!r}, 84 tokens, 84 logits" in msg


def test_a_bad_dtype_names_the_allowed_ones(exported):
    with pytest.raises(HFModelError, match=r"unknown dtype 'float8' \(allowed: float32, float16, bfloat16\)"):
        specdec.load_hf(exported["target"], dtype="float8")
