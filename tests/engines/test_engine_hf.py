"""The transformers engine (`--engine transformers`): transformers' own assisted generation and prompt lookup on
the shipped pair exported as GPT-2 folders, and on a tiny random Llama pair, with no download."""

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # before anything imports huggingface_hub: no test may reach the network

import pytest
import torch

pytest.importorskip("transformers")

import specdec
from specdec.engines.base import Engine, EngineOptions, Spec
from specdec.engines.registry import open_engine
from specdec.util.errors import InputError

PROMPT = "ROMEO:\nWhat light through yonder window breaks?"
N = 40


@pytest.fixture(scope="module")
def engine(hf_exported):
    """The exported pair: the small draft by path and prompt lookup."""
    eng = open_engine("transformers", EngineOptions(target=f"hf:{hf_exported['target']}",
                                                    drafts=[f"hf:{hf_exported['small']}", "prompt-lookup"]))
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def small(hf_exported):
    return f"hf:{hf_exported['small']}"


@pytest.fixture(scope="module")
def greedy(engine):
    return engine.generate(PROMPT, N, 0, 0.0)


def _consistent(result, k: int, n: int) -> None:
    """Counts as the engine defines them: each round emits its accepted tokens + 1 in one target pass."""
    rounds = result.target_passes
    assert len(result.tokens) == n and 0 <= result.accepted <= result.drafted <= k * rounds
    assert result.accepted + rounds == n
    hist = result.accepted_per_position
    assert len(hist) == k + 1 and sum(hist) <= rounds  # rounds that drafted nothing are not in it
    assert sum(i * c for i, c in enumerate(hist)) == result.accepted


def test_target_only_is_exactly_n_tokens_one_pass_each_and_specdecs_own_greedy_text(engine, greedy, target):
    assert isinstance(engine, Engine) and engine.units == "characters"
    assert len(greedy.tokens) == N and greedy.target_passes == N and (greedy.drafted, greedy.accepted) == (0, 0)
    own = specdec.generate(target, prompt=PROMPT, chars=N, seed=0, temperature=0.0)
    assert greedy.text == own.text and greedy.tokens == list(own.ids)


@pytest.mark.parametrize("k", [1, 3, 5])
def test_greedy_assisted_matches_target_only_and_specdecs_own_loop_count_for_count(engine, greedy, small, target, k):
    out = engine.generate(PROMPT, N, 0, 0.0, Spec(small, k))
    assert out.tokens == greedy.tokens
    _consistent(out, k, N)
    # the same pair, k and end rule (never draft past the last token: min(k, left - 1)) in specdec's loop
    own = specdec.speculative_generate(target, specdec.make_draft("small", target), prompt=PROMPT, chars=N, k=k,
                                       seed=0, temperature=0.0).stats
    assert (out.drafted, out.accepted, out.target_passes, out.accepted_per_position) == \
        (own.drafted, own.accepted, own.target_passes, own.accepted_per_position)


@pytest.mark.parametrize("k", [2, 4])
def test_greedy_prompt_lookup_matches_target_only_with_consistent_counts(engine, greedy, k):
    out = engine.generate(PROMPT, N, 0, 0.0, Spec("prompt-lookup", k))
    assert out.tokens == greedy.tokens
    _consistent(out, k, N)
    # Not asserted equal to specdec's prompt-lookup draft: transformers takes the *first* match of the longest
    # n-gram (up to 2) and near the end drafts up to k tokens however few may still be emitted (the surplus is
    # cut after the verify pass), where specdec's loop drafts at most left - 1; the counts differ by a few.


def test_an_end_of_text_the_model_would_emit_is_suppressed_so_exactly_n_come_out(engine, greedy, small):
    cfg = engine.model.generation_config
    old = (cfg.eos_token_id, cfg.pad_token_id)
    eos = greedy.tokens[0]  # a token greedy decoding emits at once: it would end the text there
    cfg.eos_token_id = cfg.pad_token_id = eos
    try:
        base = engine.generate(PROMPT, N, 0, 0.0)
        assert len(base.tokens) == N and eos not in base.tokens
        for spec in (Spec(small, 3), Spec("prompt-lookup", 3)):
            assert engine.generate(PROMPT, N, 0, 0.0, spec).tokens == base.tokens
            sampled = engine.generate(PROMPT, N, 1, 1.0, spec)
            assert len(sampled.tokens) == N and eos not in sampled.tokens
    finally:
        cfg.eos_token_id, cfg.pad_token_id = old


def test_sampled_runs_are_reproducible_with_the_same_seed_and_differ_with_another(engine, small):
    for spec in (None, Spec(small, 3), Spec("prompt-lookup", 3)):
        a = engine.generate(PROMPT, N, 7, 0.8, spec)
        assert engine.generate(PROMPT, N, 7, 0.8, spec) == a
        assert len(a.tokens) == N and engine.generate(PROMPT, N, 8, 0.8, spec).tokens != a.tokens
        if spec is not None:
            _consistent(a, 3, N)


def test_no_draft_length_state_carries_from_one_call_to_the_next(engine, small):
    alone = engine.generate(PROMPT, N, 0, 0.0, Spec(small, 2))
    engine.generate(PROMPT, N, 0, 0.0, Spec(small, 6))
    assistant = engine.assistants[small][1]
    # what transformers' default "heuristic" schedule leaves behind after a call that accepted everything
    assistant.generation_config.num_assistant_tokens_schedule = "heuristic"
    assistant.generation_config.num_assistant_tokens = 11
    assistant.generation_config.assistant_confidence_threshold = 0.4
    again = engine.generate(PROMPT, N, 0, 0.0, Spec(small, 2))
    assert again == alone
    cfg = assistant.generation_config
    assert (cfg.num_assistant_tokens, cfg.num_assistant_tokens_schedule, cfg.assistant_confidence_threshold) == \
        (2, "constant", 0.0)


def test_the_hook_is_gone_after_each_call_even_a_failing_one(engine, small):
    model = engine.model
    engine.generate(PROMPT, 5, 0, 0.0, Spec(small, 2))
    assert "_get_candidate_generator" not in model.__dict__ and not model._forward_hooks
    with pytest.raises(InputError, match="k must be at least 1"):
        engine.generate(PROMPT, 5, 0, 0.0, Spec(small, 0))
    with pytest.raises(InputError, match="exceeds the context"):
        engine.generate(PROMPT, 1000, 0, 0.0, Spec(small, 2))
    assert "_get_candidate_generator" not in model.__dict__ and not model._forward_hooks


def test_default_target_exports_the_shipped_pair_and_names_its_small_draft():
    eng = open_engine("transformers", EngineOptions(drafts=["small"], threads=1))
    try:
        folder = eng.export_dir
        assert eng.drafts() == ["small"] and folder.is_dir()
        out = eng.generate("KING:\n", 12, 0, 0.0, Spec("small", 2))
        _consistent(out, 2, 12)
        info = eng.describe()
        assert info["transformers"] and info["schedule"]["num_assistant_tokens_schedule"] == "constant"
        assert info["threads"] == 1 and info["dtype"] == "float32"
    finally:
        eng.close()
    assert not folder.exists()


def test_a_tiny_llama_pair_in_tokens(tmp_path, tiny_llama_dir):
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tok = AutoTokenizer.from_pretrained(tiny_llama_dir)
    torch.manual_seed(1)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                      num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    LlamaForCausalLM(cfg).save_pretrained(tmp_path / "draft")
    tok.save_pretrained(tmp_path / "draft")
    draft = f"hf:{tmp_path / 'draft'}"
    eng = open_engine("transformers", EngineOptions(target=f"hf:{tiny_llama_dir}", drafts=[draft, "prompt-lookup"]))
    assert eng.units == "tokens"
    base = eng.generate(PROMPT, 16, 0, 0.0)
    for spec in (Spec(draft, 3), Spec("prompt-lookup", 3)):
        out = eng.generate(PROMPT, 16, 0, 0.0, spec)
        assert out.tokens == base.tokens
        _consistent(out, 3, 16)
    eng.close()


@pytest.mark.parametrize("case", ["unknown draft", "draft in another vocabulary", "not a model", "bad target",
                                  "shipped draft beside a user's target", "dtype", "threads"])
def test_bad_input_is_one_line_naming_the_value(case, hf_exported, tiny_llama_dir, tmp_path):
    target = f"hf:{hf_exported['target']}"
    options, named = {
        "unknown draft": (EngineOptions(target=target, drafts=["bigram"]), "'bigram'"),
        "draft in another vocabulary": (EngineOptions(target=target, drafts=[f"hf:{tiny_llama_dir}"]), "vocabulary"),
        "not a model": (EngineOptions(target=f"hf:{tmp_path}", drafts=[]), str(tmp_path)),
        "bad target": (EngineOptions(target="shipped.pt", drafts=[]), "'shipped.pt'"),
        "shipped draft beside a user's target": (EngineOptions(target=target, drafts=["small"]), "'small'"),
        "dtype": (EngineOptions(target=target, dtype="int3"), "'int3'"),
        "threads": (EngineOptions(target=target, threads=0), "got 0"),
    }[case]
    with pytest.raises(InputError) as info:
        open_engine("transformers", options)
    message = str(info.value)
    assert "\n" not in message and named in message
    if case in ("unknown draft", "shipped draft beside a user's target"):
        assert "allowed: prompt-lookup, hf:PATH" in message


def test_unknown_spec_draft_names_the_opened_ones(engine):
    with pytest.raises(InputError, match=r"unknown draft 'small' \(allowed: hf:.*prompt-lookup\)"):
        engine.generate(PROMPT, 5, 0, 0.0, Spec("small", 2))


def test_an_installed_transformers_without_the_hook_is_refused_naming_the_version(monkeypatch):
    import transformers
    from transformers.generation import candidate_generator as cg
    from transformers.generation.utils import GenerationMixin

    from specdec.engines.hf_assisted import HOOK_VERSION, check_hook

    monkeypatch.setattr(transformers, "__version__", "5.0.0")
    with pytest.raises(InputError, match=r"transformers 5\.0\.0 is older .*transformers>=5\.24\.0"):
        check_hook()
    monkeypatch.setattr(transformers, "__version__", "9.0.0")
    monkeypatch.delattr(GenerationMixin, "_get_candidate_generator")
    with pytest.raises(InputError, match=f"_get_candidate_generator; the transformers engine needs transformers>={HOOK_VERSION}"):
        check_hook()
    monkeypatch.undo()
    monkeypatch.setattr(transformers, "__version__", "9.0.0")
    monkeypatch.setattr(cg.CandidateGenerator, "update_candidate_strategy", lambda self, ids, scores: None)
    with pytest.raises(InputError, match="update_candidate_strategy is not"):
        check_hook()


def test_a_missing_hf_extra_is_the_registrys_one_line_error(monkeypatch):
    import sys

    from specdec.engines.registry import engine_class

    monkeypatch.delitem(sys.modules, "specdec.engines.hf_assisted", raising=False)
    monkeypatch.setitem(sys.modules, "transformers", None)  # as if not installed
    with pytest.raises(InputError, match=r"engine transformers needs the \[hf\] extra"):
        engine_class("transformers")
