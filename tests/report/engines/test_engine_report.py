"""The engine report (`report.engine_build`, `engine_render`): specdec's own loop as an engine gives the counts
its own generation gives; a fake engine on a fake clock shows the fit, the greedy check and the missing counts."""

import json

import pytest

import specdec
from specdec.engines.base import Engine, EngineError, EngineOptions, EngineResult, Spec
from specdec.engines.own import OwnEngine
from specdec.engines.registry import ENGINES, engine_class, open_engine
from specdec.report.engines import engine_build, engine_render
from specdec.util.errors import InputError

QUIET = dict(log=lambda s: None)


class FakeEngine:
    """Generates `max_new` copies of one id; each call moves the fake clock by `per_token` seconds a token
    (`spec_per_token` when speculative). Counts only where `counts` is True; `differs` makes greedy
    speculative output differ at position 3."""

    units = "tokens"

    def __init__(self, clock, name="fake", per_token=0.01, spec_per_token=0.005, counts=True, differs=False):
        self.name, self.clock, self.counts, self.differs = name, clock, counts, differs
        self.per_token, self.spec_per_token = per_token, spec_per_token

    def describe(self):
        return {"engine": self.name}

    def drafts(self):
        return ["d"]

    def generate(self, prompt, max_new, seed, temperature, spec=None):
        self.clock.advance(max_new * (self.per_token if spec is None else self.spec_per_token))
        ids = [7] * max_new
        if spec is not None and self.differs and temperature == 0:
            ids[3] = 8
        if spec is None:
            return EngineResult("x" * max_new, ids, 0, 0, max_new, None)
        if not self.counts:
            return EngineResult("x" * max_new, ids)
        rounds = -(-max_new // (spec.k + 1))
        return EngineResult("x" * max_new, ids, rounds * spec.k, max_new - rounds, rounds, None)

    def close(self):
        pass


def test_the_fake_engine_is_an_engine(clock):
    assert isinstance(FakeEngine(clock), Engine)


def test_every_engine_the_registry_names_is_a_class_with_open():
    for name in ENGINES:
        try:
            cls = engine_class(name)
        except InputError as exc:  # an engine whose extra is not installed says which
            assert "pip install 'specdec-bench[" in str(exc)
            continue
        assert callable(cls.open)


def test_an_unknown_engine_is_input_error_naming_the_allowed_ones():
    with pytest.raises(InputError, match="unknown engine 'vllm' .allowed: specdec, transformers, llama-cpp, openai"):
        engine_class("vllm")


def test_specdecs_own_engine_gives_the_counts_of_its_own_generation(target):
    e = OwnEngine(target, {"bigram": specdec.make_draft("bigram", target)}, None)
    got = e.generate("ROMEO:", 30, 3, 1.0, Spec("bigram", 4))
    want = specdec.speculative_generate(target, specdec.make_draft("bigram", target), "ROMEO:", 30, 4, 3, 1.0)
    assert got.tokens == list(want.ids) and got.text == want.text
    assert (got.drafted, got.accepted, got.target_passes) == (want.stats.drafted, want.stats.accepted,
                                                             want.stats.target_passes)
    plain = e.generate("ROMEO:", 30, 3, 1.0)
    assert (plain.drafted, plain.accepted, plain.target_passes) == (0, 0, 30)
    with pytest.raises(InputError, match="draft 'ngram' was not opened .opened: bigram"):
        e.generate("ROMEO:", 30, 3, 1.0, Spec("ngram", 4))


def test_open_engine_builds_the_named_drafts_for_the_shipped_target():
    e = open_engine("specdec", EngineOptions(drafts=["bigram"]))
    assert e.drafts() == ["bigram"] and e.describe()["target"]["name"] == "shipped"


def test_an_engine_report_counts_every_configuration_over_the_runs_and_checks_greedy(clock):
    doc = engine_build.measure([FakeEngine(clock)], [1, 3], budget=100.0, chars=12, prompt="ROMEO:", **QUIET)
    acc = {(a["draft"], a["k"]): a for a in doc["acceptance"]}
    # 12 tokens, k=1: 6 rounds of 2; k=3: 3 rounds of 4 (one run: --prompt)
    assert (acc["d", 1]["drafted"], acc["d", 1]["accepted"], acc["d", 1]["target_passes"]) == (6, 6, 6)
    assert (acc["d", 3]["drafted"], acc["d", 3]["accepted"], acc["d", 3]["target_passes"]) == (9, 9, 3)
    assert acc["d", 3]["chars_per_pass"] == 4.0 and acc["d", 3]["acceptance"] == 1.0
    assert [g["equal"] for g in doc["greedy_equality"]] == [True, True]
    assert {(r["engine"], r["draft"], r["k"]) for r in doc["speedup"]} == {("fake", "d", 1), ("fake", "d", 3)}
    assert doc["fit"]["dropped"] == [] and "budget_needed" not in doc["fit"]
    # counts: 1 + 2; greedy: 1 + 2; then per visit the row's two calls and one warm-up (its 8 tokens take 0.08
    # or 0.04 s of the fake clock, past the 0.03-s warm-up: the warm-up reads the same clock as the budget)
    floor, rows = doc["noise_floors"]["fake"], doc["speedup"]
    assert doc["calls"]["fake"] == 6 + 3 * (floor["pairs"] + sum(r["pairs"] for r in rows))
    assert min(r["pairs"] for r in rows) >= 5 <= floor["pairs"]  # FULL's minimum: the warm-ups no longer eat it
    json.dumps(doc)  # report.json


def test_the_clock_passed_to_the_report_decides_its_plan_as_the_installed_one_does():
    """`measure(clock=...)`: no fixture, no patch; the warm-ups and the budget read the clock handed in (one
    warm-up call a visit, the minimum pairs bought) -- which rows get the pairs after the minimum follows the
    rows' measured spread, a measurement, so only the plan's arithmetic is asserted."""
    from tests.conftest import FakeClock

    fake = FakeClock(start=100.0)
    doc = engine_build.measure([FakeEngine(fake)], [1, 3], budget=100.0, chars=12, prompt="ROMEO:", clock=fake,
                               **QUIET)
    pairs = [r["pairs"] for r in doc["speedup"]] + [doc["noise_floors"]["fake"]["pairs"]]
    assert doc["calls"]["fake"] == 6 + 3 * sum(pairs) and min(pairs) >= 5 and fake.t > 100.0


def test_counts_an_engine_does_not_report_are_said_so(clock):
    doc = engine_build.measure([FakeEngine(clock, counts=False)], [2], budget=100.0, chars=12, prompt="ROMEO:",
                               **QUIET)
    a = doc["acceptance"][0]
    assert (a["drafted"], a["accepted"], a["acceptance"], a["chars_per_pass"]) == (None, None, None, None)
    assert engine_render.NOT_REPORTED in engine_render.render(doc)


def test_greedy_output_that_differs_is_a_warning_and_out_of_the_answer(clock):
    doc = engine_build.measure([FakeEngine(clock, differs=True)], [2], budget=100.0, chars=12, prompt="ROMEO:", **QUIET)
    g = doc["greedy_equality"][0]
    assert (g["equal"], g["first_difference"], g["compared"]) == (False, 3, "ids")
    assert any("differs from target-only at position 3" in w for w in doc["warnings"])
    assert doc["headline"]["fake"]["drafts"][0]["config"] is None


def test_a_budget_too_small_for_every_row_keeps_each_drafts_best_k(clock):
    # one run of every configuration costs 1.2 + 0.6 + 0.6 s of fake time; 3 pairs of the floor and two rows
    # need 3 * (2.4 + 1.8 + 1.8) = 18 s, of one row 12.6 s: a 22-s budget leaves 12.8 s after the reserve,
    # the counts and the greedy check (4.8 s)
    doc = engine_build.measure([FakeEngine(clock, per_token=0.1, spec_per_token=0.05)], [1, 2], budget=22.0,
                               chars=12, prompt="ROMEO:", **QUIET)
    assert doc["fit"]["dropped"] == ["fake d k=2"] and [r["k"] for r in doc["speedup"]] == [1]
    assert "budget_needed" not in doc["fit"]


def test_a_budget_that_gives_no_verdict_says_how_long_a_budget_the_model_needs(clock):
    doc = engine_build.measure([FakeEngine(clock, per_token=1.0, spec_per_token=0.5)], [2], budget=30.0, chars=12,
                               prompt="ROMEO:", **QUIET)
    need = doc["fit"]["budget_needed"]
    assert need > 30 and any(f"--budget {need}" in w for w in doc["warnings"])


def test_two_engines_render_side_by_side(clock):
    doc = engine_build.measure([FakeEngine(clock, name="a"), FakeEngine(clock, name="b", spec_per_token=0.004)], [2],
                               budget=100.0, chars=12, prompt="ROMEO:", **QUIET)
    text = engine_render.render(doc)
    assert "## The engines side by side" in text and "a speedup" in text and "b speedup" in text
    assert set(doc["noise_floors"]) == {"a", "b"} and set(doc["headline"]) == {"a", "b"}


class DyingEngine(FakeEngine):
    """Fails with an EngineError (a server that stopped answering) at its `dies_at`-th call."""

    def __init__(self, clock, dies_at):
        super().__init__(clock)
        self.calls, self.dies_at = 0, dies_at

    def generate(self, prompt, max_new, seed, temperature, spec=None):
        self.calls += 1
        if self.calls >= self.dies_at:
            raise EngineError("http://127.0.0.1:9: connection refused")
        return super().generate(prompt, max_new, seed, temperature, spec)


def test_an_engine_that_dies_mid_run_leaves_what_was_timed_marked_incomplete(clock):
    # counts: calls 1-2, greedy: 3-4; then visits of 3 calls (a warm-up, the two timed), the rows' order rotating
    # each round: floor 5-7, row 8-10; row 11-13, floor 14-16; floor 17-19, row 20 (its warm-up), 21 (its first
    # timed call): the engine dies inside the pairs, with three of the floor and two of the row whole
    doc = engine_build.measure([DyingEngine(clock, dies_at=21)], [2], budget=100.0, chars=12, prompt="ROMEO:", **QUIET)
    assert doc["incomplete"] == "EngineError: http://127.0.0.1:9: connection refused"
    (row,), floor = doc["speedup"], doc["noise_floors"]["fake"]
    assert (floor["pairs"], row["pairs"]) == (3, 2)
    for r in (row, floor):
        assert len(r["ratios"]) == r["pairs"] == len(r["pair_items"])
    assert engine_render.render(doc).count("INCOMPLETE") == 1


class SlowerRounds(FakeEngine):
    """As FakeEngine, but a round keeps one draft fewer: more target passes for the same tokens."""

    def generate(self, prompt, max_new, seed, temperature, spec=None):
        out = super().generate(prompt, max_new, seed, temperature, spec)
        if spec is not None and out.target_passes is not None:
            rounds = -(-max_new // spec.k)
            out.target_passes, out.accepted = rounds, max_new - rounds
        return out


def test_compare_reads_engine_reports_and_names_rows_by_engine(clock):
    from specdec.report.compare import compare, report_doc

    a = engine_build.measure([FakeEngine(clock)], [2], budget=100.0, chars=12, prompt="ROMEO:", **QUIET)
    b = engine_build.measure([SlowerRounds(clock)], [2], budget=100.0, chars=12, prompt="ROMEO:", **QUIET)
    for doc in (a, b):
        assert report_doc._required(doc) == ("machine", "settings", "acceptance", "speedup")
    text, worse = compare.compare(a, b)
    # 12 tokens at k=2: 4 rounds of 3 against 6 rounds of 2
    assert worse["fake d k=2 target passes"] and "fake d k=2 speedup" in text
    assert "fake d k=2 acceptance" in worse
    own = {**a, "settings": {**a["settings"], "engines": None}}
    with pytest.raises(InputError, match=r"engines \['fake'\] vs \['specdec \(its own report\)'\]"):
        compare.compare(a, own)


def test_an_incomplete_run_is_written_beside_the_report_never_over_it(clock, tmp_path, monkeypatch, capsys):
    from specdec.cli.commands import main

    real = engine_build.measure
    monkeypatch.setattr(engine_build, "measure",  # the engine stops answering inside the pairs
                        lambda engines, ks, **kw: real([DyingEngine(clock, dies_at=20)], ks, **{**kw, "budget": 100.0}))
    out = tmp_path / "report"
    out.mkdir()
    (out / "report.md").write_text("the earlier report")
    code = main(["report", "--engine", "specdec", "specdec", "--drafts", "bigram", "--ks", "2", "--chars", "12",
                 "--prompt", "ROMEO:", "--out", str(out)])
    assert code == 1 and "INCOMPLETE" in capsys.readouterr().out
    assert (out / "report.md").read_text() == "the earlier report"
    assert json.loads((tmp_path / "report-incomplete" / "report.json").read_text())["incomplete"].startswith("EngineError")
