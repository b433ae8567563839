"""The llama.cpp engine on the exported shipped pair: exact, deterministic checks of its output and counts, and its
bad inputs. The [llamacpp] extra is optional (CI's test venv does not install it): without it these are skipped.
"""

import numpy as np
import pytest

import specdec
from specdec.engines.base import Engine, EngineOptions, Spec
from specdec.engines.registry import open_engine
from specdec.util.errors import InputError

pytest.importorskip("llama_cpp")
pytest.importorskip("gguf")

from specdec.model import export_gguf as exporter  # noqa: E402  (imports gguf when it writes)
from specdec.model.train import load_checkpoint, shipped_path  # noqa: E402

PROMPTS = ["ROMEO:", "First Citizen:\nBefore we proceed any further, hear me speak.\n\nAll:\nSpeak, speak.\n\n"]
N = 40  # tokens per generation: enough rounds to count, a fraction of a second each


@pytest.fixture(scope="module")
def engine():
    eng = open_engine("llama-cpp", EngineOptions(drafts=["prompt-lookup", "small"]))
    yield eng
    eng.close()


def test_it_is_an_engine_that_says_what_it_loaded(engine):
    assert isinstance(engine, Engine) and engine.name == "llama-cpp" and engine.units == "tokens"
    assert engine.drafts() == ["prompt-lookup", "small"]
    d = engine.describe()
    assert d["n_ctx"] == 256 and d["threads"] == 1 and d["target"].endswith("target.gguf")
    assert d["drafts"]["small"].endswith("small.gguf")


@pytest.mark.parametrize("prompt", PROMPTS)
def test_target_only_is_specdecs_greedy_output_one_pass_per_token(engine, target, prompt):
    base = engine.generate(prompt, N, seed=0, temperature=0)
    ours = specdec.generate(target, prompt, N, seed=0, temperature=0)
    assert base.tokens == list(ours.ids) and base.text == ours.text
    assert base.target_passes == N and base.drafted is None and base.accepted is None


@pytest.mark.parametrize("draft", ["prompt-lookup", "small"])
@pytest.mark.parametrize("k", [1, 4])
def test_greedy_speculative_is_target_only_token_for_token_with_consistent_counts(engine, draft, k):
    for prompt in PROMPTS:
        base = engine.generate(prompt, N, seed=0, temperature=0)
        spec = engine.generate(prompt, N, seed=0, temperature=0, spec=Spec(draft, k))
        assert spec.tokens == base.tokens and spec.text == base.text
        assert 0 <= spec.accepted <= spec.drafted
        hist = spec.accepted_per_position
        assert len(hist) == k + 1 and sum(i * c for i, c in enumerate(hist)) == spec.accepted
        assert spec.drafted <= k * sum(hist)  # every round that drafted is in the histogram, k at most each
        # the prefill yields the first token, every later pass the accepted drafts plus one token of its own
        assert spec.target_passes == N - spec.accepted


@pytest.mark.parametrize("k", [1, 3])
def test_small_draft_counts_equal_specdecs_own_loop_on_the_same_pair(engine, target, k):
    """llama.cpp samples the first token from the prefill before drafting; specdec's first round drafts from the
    prompt. So the engine's rounds are specdec's run from the prompt plus that first token, for one token fewer:
    the same drafts (greedy, the same weights) against the same target choices give the same counts, and one
    pass more (the prefill)."""
    small = specdec.make_draft("small", target)
    for prompt in PROMPTS:
        got = engine.generate(prompt, N, seed=0, temperature=0, spec=Spec("small", k))
        ours = specdec.speculative_generate(target, small, prompt + got.text[0], N - 1, k, seed=0, temperature=0)
        assert (got.drafted, got.accepted) == (ours.stats.drafted, ours.stats.accepted), prompt
        assert got.accepted_per_position == ours.stats.accepted_per_position
        assert got.target_passes == ours.stats.target_passes + 1


def test_sampled_output_is_seeded_and_the_same_with_a_draft(engine):
    """llama-cpp-python keeps a draft token when the target's own sampled token equals it, so each emitted
    token is one draw of the target's seeded sampler, in the same order as without a draft."""
    a = engine.generate(PROMPTS[0], N, seed=1, temperature=0.8)
    assert engine.generate(PROMPTS[0], N, seed=1, temperature=0.8).tokens == a.tokens
    assert engine.generate(PROMPTS[0], N, seed=1, temperature=0.8, spec=Spec("small", 3)).tokens == a.tokens
    assert engine.generate(PROMPTS[0], N, seed=2, temperature=0.8).tokens != a.tokens


def test_every_call_pays_its_prefill(engine):
    """Nothing carries from one call to the next: the same request evaluates the whole prompt again, after a
    speculative call as after a target-only one (a cached prompt would show fewer tokens evaluated)."""
    n_prompt = len(engine.tokenize(PROMPTS[1]))
    for spec in (None, None, Spec("small", 2), None):
        engine.generate(PROMPTS[1], N, seed=0, temperature=0, spec=spec)
        if spec is None:
            assert engine.llama.evaluated == n_prompt + N - 1
        else:  # the prompt, every kept token and every rejected draft
            assert engine.llama.evaluated >= n_prompt + N - 1


def _other_vocabulary(monkeypatch, path):
    tokens, types = exporter.vocabulary_tokens()
    tokens = [tokens[1], tokens[0]] + tokens[2:]  # two characters swapped: same size, other texts
    model, _ = load_checkpoint(shipped_path("small"))
    with monkeypatch.context() as m:  # undone before the engine exports the shipped target
        m.setattr(exporter, "vocabulary_tokens", lambda: (tokens, types))
        return exporter.write_gguf(model, path)


def test_bad_inputs_are_one_line_input_errors_naming_the_value(tmp_path, monkeypatch, engine):
    (tmp_path / "not.gguf").write_text("not a model")
    (tmp_path / "trunc.gguf").write_bytes(b"GGUF" + bytes(20))
    other = _other_vocabulary(monkeypatch, tmp_path / "other.gguf")
    cases = [
        (EngineOptions(drafts=["bigram"]), "unknown draft 'bigram' for the llama-cpp engine (allowed: prompt-lookup, "
         "small, gguf:PATH)"),
        (EngineOptions(target=f"gguf:{tmp_path}/nowhere.gguf"), "no such file"),
        (EngineOptions(target=f"gguf:{tmp_path}/not.gguf"), "not.gguf' is not a GGUF file"),
        (EngineOptions(target=f"gguf:{tmp_path}/trunc.gguf"), "trunc.gguf' is not a readable GGUF file"),
        (EngineOptions(target="hf:./model"), "'hf:./model': the llama-cpp engine loads GGUF files, give gguf:PATH"),
        (EngineOptions(drafts=["gguf:"]), "'gguf:': the llama-cpp engine loads GGUF files"),
        (EngineOptions(drafts=[f"gguf:{other}"]), "has another vocabulary than the target (87 tokens against 87; "
         "token 0 is b'\\xe2\\x96\\x81' against b'\\n')"),
        (EngineOptions(threads=0), "threads must be at least 1, got 0"),
        (EngineOptions(dtype="float16"), "dtype 'float16': the llama-cpp engine computes in the GGUF file's own"),
    ]
    for options, message in cases:
        with pytest.raises(InputError) as info:
            open_engine("llama-cpp", options).close()
        assert message in str(info.value) and "\n" not in str(info.value)
    for kwargs, message in [(dict(prompt="ROMEO: é"), "character 'é' has no token"),
                            (dict(spec=Spec("gguf:x.gguf", 2)), "draft 'gguf:x.gguf' was not opened"),
                            (dict(spec=Spec("small", 0)), "k must be at least 1, got 0"),
                            (dict(max_new=300), "exceed the context of 256"),
                            (dict(seed=-1), "seed must be in 0..4294967294 for llama.cpp, got -1"),
                            (dict(temperature=np.nan), "temperature must be 0 or a finite number")]:
        args = dict(prompt="ROMEO:", max_new=N, seed=0, temperature=0) | kwargs
        with pytest.raises(InputError, match=message):
            engine.generate(**args)


def test_a_users_gguf_pair_from_paths(tmp_path, target):
    """gguf:PATH for the target and a draft: here the exported pair itself, as a user would give it."""
    paths = exporter.export_gguf(tmp_path)
    eng = open_engine("llama-cpp", EngineOptions(target=f"gguf:{paths['target']}", drafts=[f"gguf:{paths['small']}"],
                                                 threads=2))
    try:
        assert eng.describe()["threads"] == 2
        got = eng.generate(PROMPTS[0], 12, seed=0, temperature=0, spec=Spec(f"gguf:{paths['small']}", 2))
        assert got.tokens == list(specdec.generate(target, PROMPTS[0], 12, seed=0, temperature=0).ids)
        assert got.drafted > 0
    finally:
        eng.close()
