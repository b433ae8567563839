"""Drafts that read the target: every backend hands the final hidden states of a pass's positions when asked,
the generation loop hands a feature draft those of the accepted positions (one sequence, batched rows), and
nothing changes for any other draft."""

import copy
import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the Hugging Face tests load local folders only

import numpy as np
import pytest
import torch

import specdec
from specdec.decoding import generate as decode
from specdec.decoding.generate import generate, speculative_generate
from specdec.decoding.trees import TreeSpec
from specdec.model.backends import to_backend
from specdec.util.errors import InputError
from tests.feature_oracle import HeadZeroDraft
from tests.model.test_protocol import Counter5

PROMPT = "ROMEO:\nWhat light through yonder window breaks?"
PROMPTS = ["ROMEO:\nWhat light", "JULIET:\nO Romeo, Romeo!", "First Citizen:\nBefore we proceed"]
# float32 rounding only: a cached pass computes in other kernels than a full window (single rows, other
# matmul shapes; measured here up to 5e-6 on every backend, eager's included). Their logits agree to 1e-4.
TOL = 2e-5


def _on(target, backend: str):
    """The shipped target on `backend`, a copy of its own (the session's target is never switched on)."""
    return copy.deepcopy(target) if backend == "eager" else to_backend(target, backend)


@torch.inference_mode()
def _reference(model, tokens: list[int]) -> np.ndarray:
    """The final hidden states (T, C) of a full window from position 0 (no cache), on a copy of `model`."""
    m = copy.deepcopy(model)
    m.want_features = True
    m(m.ids(tokens))
    return m.features[0].numpy(force=True).copy()


def _held(draft: HeadZeroDraft, seq: int, n: int) -> np.ndarray:
    held = draft.sequences[seq]
    assert sorted(held) == list(range(n)), "every confirmed position handed once"
    return np.stack([held[i] for i in range(n)])


@torch.inference_mode()
@pytest.mark.parametrize("backend", specdec.BACKENDS)
def test_a_cached_pass_hands_the_final_hidden_states_of_its_positions(target, backend):
    m = _on(target, backend)
    m.setup_cache(1)
    toks = target.tokenize(PROMPT)
    m.want_features = True
    m(m.ids(toks[:20]), 0)
    first = m.features[0].numpy(force=True).copy()  # a view of a buffer on fused and onnx: copied before the next
    logits = m(m.ids(toks[20:25]), 20)[0].numpy(force=True).copy()
    second = m.features[0].numpy(force=True).copy()
    assert first.shape == (20, 128) and second.shape == (5, 128)
    ref = _reference(target, toks[:25])
    np.testing.assert_allclose(np.concatenate([first, second]), ref, atol=TOL, rtol=0)
    # after ln_f, before the LM head: the head on them is the pass's logits
    head = target.lm_head.weight.numpy(force=True)
    np.testing.assert_allclose(second @ head.T, logits, atol=1e-4, rtol=0)


@torch.inference_mode()
@pytest.mark.parametrize("backend", specdec.BACKENDS)
def test_a_pass_forms_no_features_unless_asked(target, backend):
    m = _on(target, backend)
    m.setup_cache(1)
    m(m.ids(target.tokenize(PROMPT)), 0)
    assert m.want_features is False and m.features is None


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("backend", specdec.BACKENDS)
def test_a_feature_draft_is_handed_every_accepted_positions_state(target, backend, temperature):
    m = _on(target, backend)
    draft = HeadZeroDraft(target.lm_head.weight)
    out = speculative_generate(m, draft, PROMPT, 60, k=3, seed=1, temperature=temperature)
    tokens = target.tokenize(PROMPT) + list(out.ids)
    # positions 0..len-2: the prompt's (from the prefill) and every accepted token's; the last emitted token
    # has not been through the target yet
    np.testing.assert_allclose(_held(draft, 0, len(tokens) - 1), _reference(target, tokens[:-1]),
                               atol=TOL, rtol=0)
    assert draft.calls == out.stats.target_passes  # one hand-off per verify pass, the prefill's included
    assert out.stats.draft_calls <= out.stats.target_passes - 1  # the prefill's round drafts nothing
    assert m.want_features is False and m.features is None  # off again after the generation
    if temperature == 0:
        assert out.text == generate(m, PROMPT, 60, temperature=0).text


def test_feature_drafting_is_deterministic_given_the_seed(target):
    runs = [speculative_generate(target, HeadZeroDraft(target.lm_head.weight), PROMPT, 80, k=4, seed=7)
            for _ in range(2)]
    assert runs[0].text == runs[1].text and runs[0].stats == runs[1].stats
    assert runs[0].stats.accepted > 0 and len(runs[0].text) == 80


def test_adaptive_k_runs_with_a_feature_draft_and_keeps_greedy_output(target):
    out = speculative_generate(target, HeadZeroDraft(target.lm_head.weight), PROMPT, 60, k=2, seed=0,
                               temperature=0, adaptive=True, k_max=6)
    assert out.text == generate(target, PROMPT, 60, temperature=0).text


@pytest.mark.parametrize("backend", specdec.BACKENDS)
def test_batched_rows_are_handed_their_own_rows_states(target, backend):
    m = _on(target, backend)
    draft = HeadZeroDraft(target.lm_head.weight)
    outs = speculative_generate(m, draft, PROMPTS, 40, k=3, seed=3)
    for i, (prompt, out) in enumerate(zip(PROMPTS, outs)):
        alone = speculative_generate(m, HeadZeroDraft(target.lm_head.weight), prompt, 40, k=3, seed=3 + i)
        assert out.text == alone.text and out.stats == alone.stats  # a row is what it is alone
        tokens = target.tokenize(prompt) + list(out.ids)
        np.testing.assert_allclose(_held(draft, i, len(tokens) - 1), _reference(target, tokens[:-1]),
                                   atol=TOL, rtol=0)


def test_a_draft_without_take_features_leaves_the_target_untouched(target, draft_factory, monkeypatch):
    m, bigram = copy.deepcopy(target), draft_factory("bigram")
    for name in ("want_features", "features"):  # as loaded: the class's defaults (earlier tests set them)
        vars(m).pop(name, None)
    asked = []  # the length of `tokens` at each propose
    propose = bigram.propose
    monkeypatch.setattr(bigram, "propose", lambda tokens, *a: asked.append(len(tokens)) or propose(tokens, *a))
    out = speculative_generate(m, bigram, PROMPT, 60, k=4, seed=0)
    assert "want_features" not in vars(m) and "features" not in vars(m)  # never switched on, nothing formed
    assert asked[0] == len(PROMPT)  # the first round drafts after the prompt, before any target pass, as always
    assert out.text == speculative_generate(target, bigram, PROMPT, 60, k=4, seed=0).text


def test_trees_refuse_a_feature_draft_in_one_line(target):
    with pytest.raises(InputError) as info:
        speculative_generate(target, HeadZeroDraft(target.lm_head.weight), PROMPT, 20, k=2,
                             tree=TreeSpec.from_widths([2, 2]))
    msg = str(info.value)
    assert "\n" not in msg and msg == decode.TREE_FEATURES.format(name="head-zero")


def test_a_target_without_features_is_refused_in_one_line():
    with pytest.raises(InputError) as info:
        speculative_generate(Counter5(), HeadZeroDraft(torch.zeros(5, 4)), "abc", 5, k=2)
    assert str(info.value) == ("draft 'head-zero' reads the target's features: a draft that reads the target's "
                               "features needs a target with want_features and features; Counter5 has none")


# --- Hugging Face targets: output_hidden_states' last entry, after the final norm --------------------------


@torch.inference_mode()
def test_a_tiny_llama_hands_its_state_after_the_final_norm(tiny_llama_dir):
    llama = specdec.load_hf(tiny_llama_dir)
    toks = llama.tokenize(PROMPT)
    llama.want_features = True
    llama(llama.ids(toks[:8]), 0)
    logits = llama(llama.ids(toks[8:12]), 8)
    feats = llama.features
    assert feats.shape == (1, 4, 32)
    torch.testing.assert_close(llama.model.lm_head(feats), logits, atol=1e-5, rtol=0)
    whole = llama.model.model(input_ids=llama.ids(toks[:12])).last_hidden_state  # after LlamaModel's norm
    torch.testing.assert_close(feats, whole[:, 8:12], atol=1e-5, rtol=0)


def test_a_tiny_llama_speculates_greedily_with_a_feature_draft(tiny_llama_dir):
    llama = specdec.load_hf(tiny_llama_dir)
    draft = HeadZeroDraft(llama.model.get_output_embeddings().weight)
    out = speculative_generate(llama, draft, PROMPT, 30, k=3, seed=0, temperature=0)
    assert out.text == generate(llama, PROMPT, 30, temperature=0).text
    tokens = llama.tokenize(PROMPT) + list(out.ids)
    assert llama.want_features is False and llama.features is None
    with torch.inference_mode():
        llama.want_features = True
        llama(llama.ids(tokens[:-1]))  # a window from position 0, no cache
        ref = llama.features[0].numpy(force=True)
        llama.want_features = False
    np.testing.assert_allclose(_held(draft, 0, len(tokens) - 1), ref, atol=1e-5, rtol=0)


@torch.inference_mode()
def test_the_exported_target_hands_the_native_features(target, hf_exported):
    hf_target = specdec.load_hf(hf_exported["target"])
    toks = target.tokenize(PROMPT)
    hf_target.want_features = True
    hf_target(hf_target.ids(toks[:30]), 0)
    np.testing.assert_allclose(hf_target.features[0].numpy(force=True), _reference(target, toks[:30]),
                               atol=1e-4, rtol=0)
