"""The load section: the crossover rule, the cost model at B, the budget's batches, the rendering and the figure
from hand-built documents; and one small run through the report's own runner on the fake clock (what it
records, never how fast anything was)."""

import math

import pytest
import torch

import specdec
from specdec.measure.anatomy import batch_costs
from specdec.measure import workload as wl
from specdec.report import figures, sections
from specdec.report.batch import batch_render, batch_section


def _row(batch, measured, lo, hi, draft="int8", pairs=5):
    return {"draft": draft, "batch": batch, "k": 4, "measured": measured, "ci_low": lo, "ci_high": hi, "pairs": pairs}


FLOOR = {"measured": 1.0, "ci_low": 0.97, "ci_high": 1.03, "pairs": 6}  # the A/A every B is judged against


@pytest.mark.parametrize("rows,answer,batch,after,slower,text", [
    ([_row(1, 1.5, 1.3, 1.7), _row(2, 1.2, 1.05, 1.3), _row(4, 1.0, 0.9, 1.1), _row(8, 0.8, 0.7, 0.9)],
     "crossover", 4, 2, False, "stops paying at B = 4 (pays at B = 2): 1.00x [0.90, 1.10]"),
    ([_row(1, 1.5, 1.3, 1.7), _row(2, 0.8, 0.7, 0.95)], "crossover", 2, 1, True,
     "stops paying at B = 2 (pays at B = 1): 0.80x [0.70, 0.95]"),
    # above 1 but not above the A/A's interval (1.01 < 1.03): not faster beyond the noise, as `specdec load` judges
    ([_row(1, 1.5, 1.3, 1.7), _row(2, 1.1, 1.01, 1.2)], "crossover", 2, 1, False,
     "stops paying at B = 2 (pays at B = 1): 1.10x [1.01, 1.20]"),
    ([_row(1, 1.5, 1.3, 1.7), _row(2, 0.5, 0.1, 0.9, pairs=2), _row(4, 0.9, 0.8, 1.0)], "crossover", 4, 1, False,
     "stops paying at B = 4 (pays at B = 1): 0.90x [0.80, 1.00]"),  # two pairs: no verdict, skipped
    ([_row(1, 0.9, 0.8, 1.05)], "never pays here", 1, None, False,
     "never pays here (not faster beyond the noise even at B = 1): 0.90x [0.80, 1.05]"),
    ([_row(4, 1.1, 1.01, 1.2), _row(1, 0.9, 0.8, 0.95)], "never pays here", 1, None, True,  # sorted by B first
     "never pays here (not faster beyond the noise even at B = 1): 0.90x [0.80, 0.95]"),
])
def test_the_crossover_is_the_first_batch_that_stops_paying(rows, answer, batch, after, slower, text):
    c = batch_section.crossover(rows, FLOOR)
    assert (c["answer"], c["batch"], c["after"], c["slower"], c["text"]) == (answer, batch, after, slower, text)


def test_a_draft_that_pays_everywhere_or_from_a_batch_on_says_so():
    c = batch_section.crossover([_row(1, 2.0, 1.8, 2.2), _row(32, 1.1, 1.04, 1.2)], FLOOR)
    assert c == {"answer": "pays at every level tried", "verdicts": {"1": "pays", "32": "pays"}, "batch": None,
                 "after": 32, "text": "pays at every B tried (up to B = 32)"}
    c = batch_section.crossover([_row(1, 1.0, 0.9, 1.1), _row(2, 1.3, 1.1, 1.5), _row(4, 1.2, 1.1, 1.3)], FLOOR)
    assert c == {"answer": "pays from a level on", "from": 2, "batch": None, "after": 4,
                 "verdicts": {"1": "not distinguishable", "2": "pays", "4": "pays"},
                 "text": "pays from B = 2 on (up to B = 4; it does not pay below B = 2)"}
    assert batch_section.crossover([_row(1, 1.5, 1.3, 1.7, pairs=2)], FLOOR)["text"] == \
        "too few pairs at every B to judge"


def test_the_pass_model_fits_a_line_and_predicts_r_at_b():
    a, b = batch_costs.fit([1, 5, 32], [110.0, 150.0, 420.0])  # 100 + 10 n exactly
    assert a == pytest.approx(100.0) and b == pytest.approx(10.0)
    # r_B = (a + b B (k+1)) / (a + b B): at B = 4, k = 4: (100 + 200) / (100 + 40)
    assert (a + b * 4 * 5) / (a + b * 4) == pytest.approx(300 / 140)
    assert batch_costs.predicted_speedup(3.0, 4, 1.0, 0.05) == pytest.approx(2.5)  # the seed's formula at r = 1
    assert batch_costs.predicted_speedup(3.0, 4, 2.0, 0.25) == pytest.approx(1.0)


class _Run:
    knobs = {"min_pairs": 2}


def test_the_largest_batches_are_dropped_when_their_pairs_would_not_fit():
    costs = {"batches": {str(B): {"step_us": 1000.0 * B} for B in (1, 2, 4, 8)}}
    passes = {"d": 10}  # the draft's batched passes at B = 1
    # a visit at B: 3 * (chars * step * 2 + passes * step * 1.5) = 3 * (20 + 15) ms * B = 0.105 B s; x 2 pairs
    kept, dropped = batch_section._fit(_Run(), costs, passes, [1, 2, 4, 8], 10, 0.21 * 3 + 0.001)
    assert (kept, dropped) == ([1, 2], [4, 8])
    assert batch_section._fit(_Run(), costs, passes, [1, 2, 4, 8], 10, 0.0) == ([1], [2, 4, 8])


def _doc():
    rows = [{**_row(B, m, m - 0.1, m + 0.1, d), "chars_per_pass": 3.0, "predicted_before": m + 0.05, "pairs": 5,
             "r_predicted": 1 + B / 10, "r_measured": 1 + B / 8, "c_measured": 0.1}
            for d in ("int8", "bigram") for B, m in ((1, 1.4), (4, 1.15), (16, 0.8))]
    load = {"batches": [1, 4, 16], "dropped_batches": [32], "chars": 100, "ks": {"int8": 4, "bigram": 4},
            "noise_floor": {"measured": 1.0, "ci_low": 0.97, "ci_high": 1.03, "pairs": 6, "batch": 8, "width": 0.06},
            "rows": rows, "crossover": {d: batch_section.crossover([r for r in rows if r["draft"] == d], FLOOR)
                                        for d in ("int8", "bigram")}, "unavailable_drafts": {}}
    return {"machine": {"backend": "eager"}, "batch": load}


def test_the_section_renders_every_row_and_the_crossover():
    text = "\n".join(batch_render.batch_lines(_doc()))
    assert text.count("| int8 ") == 3 and text.count("| bigram ") == 3
    assert "int8 k=4: stops paying at B = 16 (pays at B = 4): 0.80x [0.70, 0.90]" in text
    assert "Not measured within the budget: B = 32." in text
    assert batch_render.batch_lines({}) == []
    assert "unavailable: batched only" in "\n".join(batch_render.batch_lines(
        {"batch": {"unavailable": "unavailable: batched only for the shipped GPT"}}))


def test_the_figure_draws_a_line_per_draft():
    pytest.importorskip("matplotlib")
    fig = figures.batch_figure(_doc())
    ax, ax_r = fig.axes
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["int8 k=4", "bigram k=4"]
    assert len(ax_r.get_lines()) == 4  # measured and predicted r_B per draft
    assert figures.batch_figure({"machine": {}, "batch": {"rows": []}}) is None


def test_a_small_load_run_records_every_batch_and_draft(clock):
    """On the fake clock: the pairs' count and the batches kept do not depend on the machine's speed (a budget
    of 1000 s fits both batches whatever a pass costs here; the precision ends the pairs after min_pairs). A
    target of its own: the batches leave its cache with 2 rows."""
    torch.set_num_threads(1)
    target = specdec.load_target()
    clock.tick = 0.001
    knobs = {"min_pairs": 3, "precision": 1e9, "cost_samples": 3, "batch_k": 2, "batch_chars": 8,
             "batch_sizes": [1, 2]}
    work = wl.load_workload(wl.DEFAULT_WORKLOAD, chars=8, max_k=2)
    run = sections.ReportRun(target, ["bigram", "int4"], [2], knobs, "cpu", 8, 1.0, work.cycled(8), lambda s: None)
    run.objs = {n: specdec.make_draft(n, target) for n in run.drafts}
    load = batch_section.measure(run, 1000.0)["batch"]
    assert load["batches"] == [1, 2] and load["dropped_batches"] == [] and load["ks"] == {"bigram": 2, "int4": 2}
    assert {(r["draft"], r["batch"]) for r in load["rows"]} == {(d, B) for d in ("bigram", "int4") for B in (1, 2)}
    assert all(r["pairs"] == 3 and math.isfinite(r["r_predicted"]) and r["chars_per_pass"] >= 1 for r in load["rows"])
    assert set(load["crossover"]) == {"bigram", "int4"} and load["noise_floor"]["batch"] == 2
    assert set(load["costs"]["batches"]) == {"1", "2"} and load["costs"]["fit"]["widths"] == [1, 3, 32]
