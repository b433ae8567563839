"""The report sized to the model (`report.sizing`): the cost of a token, given by a fake timer, decides
which knobs shrink, in order, and when the budget cannot give a verdict at all."""

from types import SimpleNamespace

import pytest

from specdec.report import build, sizing


@pytest.fixture
def fake(monkeypatch):
    """Generation timed by a fake timer: a target-only token costs `t` s, a speculative one `s` s."""
    cost = {"t": 0.3e-3, "s": 0.2e-3}
    monkeypatch.setattr(sizing, "generate", lambda target, prompt, n, seed, temp: ("t", n))
    monkeypatch.setattr(sizing, "speculative_generate", lambda target, d, prompt, n, k, seed, temp: ("s", n))

    def timed(fn, device):
        side, n = fn()
        return n * cost[side]

    monkeypatch.setattr(sizing, "timed", timed)
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


def test_a_slow_model_sheds_profiling_runs_ks_then_length_in_that_order(fake):
    fake.update(t=10e-3, s=6e-3)  # twenty times the shipped model's cost per token
    run = _run()
    out = sizing.plan(run, 50.0, SHARES)
    step = {"cost": 0, "term": 0, "profiled": 1, "tokens": 1, "token": 2, "adaptive": 2, "workload": 3, "k": 4,
            "generated": 5}
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


def test_the_shipped_model_keeps_its_knobs_on_every_backend_however_slow(fake, target):
    fake.update(t=1.0, s=0.5)
    run = _run()
    run.target = target
    out = sizing.plan(run, 50.0, SHARES)
    assert out["changes"] == [] and "budget_needed" not in out and (run.ks, run.chars) == ([1, 2, 4, 8], 200)


def test_a_report_sized_out_of_profiling_keeps_the_floor_table_and_says_so(target):
    from specdec.report import overhead_section, overhead_text

    run = SimpleNamespace(target=target, device="cpu", knobs={"overhead_chars": 8, "overhead_repeats": 0}, objs={})
    doc = overhead_section.measure(run, 0.7)
    assert doc["attribution"] == {} and [r["positions"] for r in doc["overhead"]] == list(overhead_section.POSITIONS)
    assert "Where the time goes: not measured" in "\n".join(overhead_text.overhead_tables(doc))
