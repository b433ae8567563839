"""The report sized to the model (`report.sizing`): the cost of a token, timed on the fake decision clock or
given to the plan, decides which knobs shrink, in order, and when the budget cannot give a verdict at all."""

from types import SimpleNamespace

import pytest

from specdec.report import build, sizing


@pytest.fixture
def fake(monkeypatch, clock):
    """Generation that takes time on the fake decision clock only: a target-only token `t` s, a speculative
    one `s` s (the probe times it on that clock: the plan's input is a decision's)."""
    cost = {"t": 0.3e-3, "s": 0.2e-3, "draw": 20e-6}
    monkeypatch.setattr(sizing, "generate", lambda target, prompt, n, seed, temp: clock.advance(n * cost["t"]))
    monkeypatch.setattr(sizing, "speculative_generate",
                        lambda target, d, prompt, n, k, seed, temp: clock.advance(n * cost["s"]))
    monkeypatch.setattr(sizing, "first_char_counts",
                        lambda target, d, prompt, k, draws: clock.advance(draws * cost["draw"]))
    return cost


SHARES = dict(build.SHARES)  # the timed sections, their shares summing to 1


def _run(knobs=build.QUICK, runs=9, drafts=("a", "b")):
    item = SimpleNamespace(prompt="ROMEO:", id="x")
    return SimpleNamespace(target=object(), objs=dict.fromkeys(drafts), ks=[1, 2, 4, 8], knobs=dict(knobs),
                           runs=[(item, i) for i in range(runs)], chars=200, temperature=1.0, device="cpu",
                           log=lambda s: None)


def test_a_model_as_cheap_as_the_shipped_one_changes_nothing(fake):
    run = _run()
    out = sizing.plan(run, 50.0, SHARES)
    assert out["changes"] == [] and "budget_needed" not in out
    assert (run.ks, run.chars, len(run.runs), run.knobs) == ([1, 2, 4, 8], 200, 9, build.QUICK)
    assert out["target_token_s"] == pytest.approx(0.3e-3) and out["spec_token_s"] == pytest.approx({"a": 0.2e-3,
                                                                                                 "b": 0.2e-3})
    assert out["draw_s"] == pytest.approx(20e-6)
    # every k at the temperature and the largest again greedy (2c): 9 runs x 200 tokens x (4 + 1) ks x 0.4 ms; the
    # exactness draws: 1 context x (2 drafts + the target) x 5000 draws x 20 µs
    assert out["estimate_s"]["counts"] == pytest.approx(round(9 * 200 * (4 + 1) * 0.4e-3 + 3 * 5000 * 20e-6, 2))


def test_a_slow_model_sheds_profiling_runs_ks_then_length_in_that_order(fake):
    fake.update(t=10e-3, s=6e-3)  # twenty times the shipped model's cost per token
    run = _run()
    out = sizing.plan(run, 50.0, SHARES)
    step = {"cost": 0, "term": 0, "profiled": 1, "tokens": 1, "exactness": 1, "token": 2, "adaptive": 2,
            "workload": 3, "k": 4, "generated": 5}
    steps = [step[c.split(" ")[0]] for c in out["changes"]]
    assert steps == sorted(steps)  # each kind of change only after the ones before it
    assert out["changes"][:2] == ["cost calls per cost sample 10 -> 2", "term calls per cost sample 4 -> 2"]
    assert "workload runs 9 -> 4" in out["changes"] and "budget_needed" not in out
    assert sizing.fits(out["estimate_s"], 50.0, SHARES)


def test_a_budget_no_plan_fits_says_how_long_a_budget_the_model_needs(fake):
    fake.update(t=1.0, s=0.5)  # a second a token
    run = _run()
    out = sizing.plan(run, 50.0, SHARES)
    assert (run.ks, run.chars, len(run.runs)) == ([4], sizing.MIN_CHARS, 1)
    need, e = out["budget_needed"], out["estimate_s"]
    assert need > build.QUICK["budget"] and not sizing.fits(e, 50.0, SHARES)
    assert sizing.fits(e, need - 10.0 + 0.5, SHARES)  # that budget leaves the time this plan needs


def test_the_shipped_model_keeps_its_knobs_where_they_fit_and_is_sized_like_any_model_where_not(fake, target):
    cheap, slow = _run(), _run()
    cheap.target = slow.target = target
    assert sizing.plan(cheap, 50.0, SHARES)["changes"] == [] and (cheap.ks, cheap.chars) == ([1, 2, 4, 8], 200)
    fake.update(t=10e-3, s=6e-3, draw=1e-3)  # a machine (or a load) that makes every pass and draw slow
    out = sizing.plan(slow, 50.0, SHARES)
    assert "exactness draws per draft and context 5000 -> 2500" in out["changes"]
    assert "workload runs 9 -> 4" in out["changes"] and sizing.fits(out["estimate_s"], 50.0, SHARES)


def test_a_fixed_work_of_many_draws_sheds_draws_then_contexts(fake):
    fake.update(draw=4e-3)  # the draws alone: 3 contexts x 3 rows x 20000 x 4 ms = 720 s; at 2000 draws 72 s
    run = _run(knobs=build.FULL)
    out = sizing.plan(run, 100.0, SHARES)
    draws = [c for c in out["changes"] if c.startswith("exactness")]
    assert draws == ["exactness draws per draft and context 20000 -> 10000",
                     "exactness draws per draft and context 10000 -> 5000",
                     "exactness draws per draft and context 5000 -> 2500",
                     "exactness draws per draft and context 2500 -> 2000", "exactness contexts 3 -> 1"]
    assert (run.knobs["samples"], run.knobs["contexts"]) == (sizing.MIN_SAMPLES, 1)


def test_a_report_sized_out_of_profiling_keeps_the_floor_table_and_says_so(target):
    from specdec.report.anatomy import overhead_section, overhead_text

    run = SimpleNamespace(target=target, device="cpu", knobs={"overhead_chars": 8, "overhead_repeats": 0}, objs={})
    doc = overhead_section.measure(run, 0.7)
    assert doc["attribution"] == {} and [r["positions"] for r in doc["overhead"]] == list(overhead_section.POSITIONS)
    assert "Where the time goes: not measured" in "\n".join(overhead_text.overhead_tables(doc))


SLOW = {"target_token_s": 10e-3, "spec_token_s": {"a": 6e-3, "b": 6e-3}}  # the slow model's costs above


def test_costs_given_to_the_plan_fix_it_without_measuring(monkeypatch):
    """What a test (or a caller who knows the model) passes as `report.measure(sizing_costs=...)`: the plan is
    the one those costs give, on any machine, and nothing is timed."""
    def no_probe(*args):
        raise AssertionError("the plan measured although its costs were given")

    monkeypatch.setattr(sizing, "generate", no_probe)
    monkeypatch.setattr(sizing, "speculative_generate", no_probe)
    run = _run()
    out = sizing.plan(run, 50.0, SHARES, given=SLOW)
    assert out["fixed"] == "given" and out["target_token_s"] == 10e-3
    assert out["changes"][:2] == ["cost calls per cost sample 10 -> 2", "term calls per cost sample 4 -> 2"]
    assert "workload runs 9 -> 4" in out["changes"] and sizing.fits(out["estimate_s"], 50.0, SHARES)


def test_costs_given_size_the_shipped_model_too(target):
    run = _run()
    run.target = target
    out = sizing.plan(run, 50.0, SHARES, given=SLOW)
    assert "workload runs 9 -> 4" in out["changes"]
    assert out["changes"] == sizing.plan(_run(), 50.0, SHARES, given=SLOW)["changes"]  # as any model's
    assert not any(c.startswith("exactness") for c in out["changes"])  # no draw cost given: draws cost nothing


def test_sizing_off_keeps_every_knob_and_measures_nothing(monkeypatch):
    monkeypatch.setattr(sizing, "generate", lambda *a: pytest.fail("measured"))
    run = _run()
    assert sizing.plan(run, 1.0, SHARES, given=False) == {"seconds": 1.0, "changes": [], "fixed": "off"}
    assert (run.ks, run.chars, len(run.runs), run.knobs) == ([1, 2, 4, 8], 200, 9, build.QUICK)
