"""Shared fixtures: the shipped target and each draft are built once per test session."""

import functools

import pytest
import torch

import specdec


@pytest.fixture(scope="session")
def target():
    torch.set_num_threads(1)
    return specdec.load_target()


@pytest.fixture(scope="session")
def draft_factory(target):
    @functools.lru_cache(maxsize=None)
    def make(name):
        return specdec.make_draft(name, target)

    return make


class FakeClock:
    """A stand-in for the decision clock (`measure.clock.now`): each reading moves it on by `tick` seconds, and
    `advance` moves it by hand (what a section or a timed call "took"), so a schedule's decisions never depend on
    the machine."""

    def __init__(self, start: float = 0.0, tick: float = 0.0):
        self.t, self.tick = start, tick

    def __call__(self) -> float:
        self.t += self.tick
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock():
    """The decision clock (`measure.clock.now`: budgets, deadlines, warm-ups), by hand: it moves only when a
    section, a row's call or a fake engine says it took time, so what a schedule decides is the same on a fast
    and on a loaded machine."""
    from specdec.measure.clock import using

    fake = FakeClock(start=100.0)
    with using(fake):
        yield fake


REPORT_BUDGET = 20.0
# The shared report's decisions run on a FakeClock that moves this much per reading: its budget buys the same
# pairs on a fast machine as on a loaded one (every row its minimum of 3, for the tests' properties), and its
# wall time is that work's, not the budget's. Every warm-up and deadline reads it too (a visit takes ~5
# readings, the overhead section's floors ~50): 0.05 leaves a row 2 pairs, 0.04 every row at least 3.
REPORT_TICK = 0.04


@pytest.fixture(scope="session")
def report_doc(target):
    """One small report shared by test_report and test_report_trees (bigram brings the default trees)."""
    from specdec.report import build as report

    return report.measure(target, ["bigram", "int8"], [1, 2], quick=True, pairs=3, threads=1, chars=60,
                          budget=REPORT_BUDGET, log=lambda s: None, clock=FakeClock(tick=REPORT_TICK),
                          sizing_costs=False)  # the plan as given: the sizing's own tests set its costs


@pytest.fixture(autouse=True, scope="session")
def _session_between_run_record(tmp_path_factory):
    """Reports and calibrations read and append the user's between-run record (machine_record): the session
    (its shared report fixtures too) gets a cache directory of its own, so no test depends on, or writes to,
    the developer's."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("session-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _own_between_run_record(tmp_path_factory, monkeypatch):
    """And every test one more: what one test records, another never reads."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def no_eager_forward(monkeypatch):
    """From here on, any call of the eager forward fails the test (the models are built before it is asked for)."""
    def eager_forward(*args, **kwargs):
        raise AssertionError("the eager forward ran")

    return lambda: monkeypatch.setattr(specdec.GPT, "forward", eager_forward)


@pytest.fixture(scope="session")
def hf_exported(tmp_path_factory):
    """The shipped pair exported as GPT-2 checkpoints (needs transformers): {"target": folder, "small": folder}."""
    pytest.importorskip("transformers")
    return specdec.export_hf(tmp_path_factory.mktemp("hf-export"))


@pytest.fixture(scope="session")
def tiny_llama_dir(tmp_path_factory):
    """A 2-layer Llama, randomly initialised, with a byte-level BPE of 320 tokens trained on the shipped corpus
    (as tests/model/test_hf.py builds it): a second architecture, in tokens, with no download."""
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from specdec.model import corpus

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=320, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tok.train_from_iterator(corpus.paragraphs("train")[:2000], trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, clean_up_tokenization_spaces=False)
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(fast), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None, tie_word_embeddings=False)
    out = tmp_path_factory.mktemp("llama")
    LlamaForCausalLM(cfg).save_pretrained(out)
    fast.save_pretrained(out)
    return out
