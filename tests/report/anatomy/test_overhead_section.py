"""The report's overhead section: how it splits its seconds, what it records, and how it renders (measurements
faked here; the real ones run in the shared report of test_report)."""

from types import SimpleNamespace

import pytest

import specdec
from specdec.measure.anatomy import attribution as attribution_mod
from specdec.measure.anatomy import profiler_split, roofline
from specdec.report.anatomy import overhead_section, overhead_text
from specdec.measure.anatomy.profiler_split import CATEGORIES
from specdec.measure.anatomy.roofline import Machine
from specdec.model import backends

MACHINE = Machine(matmul_gflops=50.0, cache_gbps=20.0, memory_gbps=5.0, threads=1)


def _scope(measured, profiled):
    cats = dict.fromkeys(CATEGORIES, 0.0)
    cats["matmul"], cats[profiler_split.RESIDUAL] = 10.0, profiled - 10.0
    return {"categories": cats, "measured_us": measured, "profiled_us": profiled, "profiler_us": 100.0,
            "accounted_us": profiled - 100.0, "accounted_ratio": 1.02, "stretch": 1.25, "events_per_unit": 50.0,
            "units_per_block": 4}


@pytest.fixture
def fakes(monkeypatch, clock):
    """Fake attribution (taking `attr_seconds` on the fake decision clock), machine and table, recording their
    arguments."""
    calls = {}

    def attribution(target, draft, k, chars, repeats):
        calls["attribution"] = dict(target=target, draft=draft, k=k, chars=chars, repeats=repeats)
        clock.advance(calls.get("attr_seconds", 3.0))
        return {"step": _scope(900.0, 1400.0), "round": _scope(1500.0, 2600.0)}

    def measure_machine(seconds, threads):
        calls["machine"] = dict(seconds=seconds, threads=threads)
        return MACHINE

    def overhead_table(target, machine, positions, context_pos, seconds):
        calls["table"] = dict(machine=machine, positions=positions, context_pos=context_pos, seconds=seconds)
        return [{"backend": backends.backend_of(target), "positions": T, "measured_us": 500.0,
                 "floor_us": 100.0, "share": 0.8, "flops": 1, "bytes": 1} for T in positions]

    monkeypatch.setattr(attribution_mod, "attribution", attribution)
    monkeypatch.setattr(roofline, "measure_machine", measure_machine)
    monkeypatch.setattr(roofline, "overhead_table", overhead_table)
    return calls


def _run(target, objs=None, device="cpu"):
    return SimpleNamespace(target=target, objs=objs or {}, device=device,
                           knobs={"overhead_chars": 7, "overhead_repeats": 2})


def test_the_attribution_runs_first_and_the_rest_is_split_between_machine_and_table(fakes, target):
    doc = overhead_section.measure(_run(target), 10.0)
    # attribution took 3 s of 10: the machine gets 0.4 * 7 = 2.8 s, the table 0.6 * 7 = 4.2 s
    assert fakes["machine"]["seconds"] == pytest.approx(2.8)
    assert fakes["table"]["seconds"] == pytest.approx(4.2)
    assert fakes["table"]["positions"] == (1, 2, 3, 5, 9) and fakes["table"]["context_pos"] == 100
    assert fakes["table"]["machine"] is MACHINE
    assert (fakes["attribution"]["k"], fakes["attribution"]["chars"], fakes["attribution"]["repeats"]) == (4, 7, 2)
    assert [r["positions"] for r in doc["overhead"]] == [1, 2, 3, 5, 9]


def test_an_attribution_that_overran_leaves_each_figure_its_minimum(fakes, target):
    fakes["attr_seconds"] = 12.0  # more than the 10 s allotted
    overhead_section.measure(_run(target), 10.0)
    assert fakes["machine"]["seconds"] == fakes["table"]["seconds"] == overhead_section.MIN_SECONDS == 0.3


def test_the_document_holds_categories_per_backend_and_the_setup(fakes, target):
    doc = overhead_section.measure(_run(target), 10.0)
    assert set(doc["attribution"]) == {"eager"}
    assert doc["attribution"]["eager"]["step"] == _scope(900.0, 1400.0)["categories"]
    assert list(doc["attribution"]["eager"]["round"]) == list(CATEGORIES)
    setup = doc["overhead_setup"]
    assert setup["machine"] == MACHINE.to_dict() and (setup["draft"], setup["k"]) == ("bigram", 4)
    assert (setup["chars"], setup["repeats"], setup["context_pos"]) == (7, 2, 100)
    assert setup["totals"] == {"eager": {
        "step": {"measured_us": 900.0, "profiled_us": 1400.0, "profiler_us": 100.0, "accounted_us": 1300.0,
                 "accounted_ratio": 1.02, "stretch": 1.25, "events_per_unit": 50.0},
        "round": {"measured_us": 1500.0, "profiled_us": 2600.0, "profiler_us": 100.0, "accounted_us": 2500.0,
                  "accounted_ratio": 1.02, "stretch": 1.25, "events_per_unit": 50.0}}}


def test_the_reports_bigram_is_used_and_one_is_built_when_the_report_has_none(fakes, target, draft_factory):
    mine = draft_factory("bigram")
    overhead_section.measure(_run(target, {"bigram": mine}), 10.0)
    assert fakes["attribution"]["draft"] is mine
    overhead_section.measure(_run(target, {"int8": draft_factory("int8")}), 10.0)
    built = fakes["attribution"]["draft"]
    assert built is not mine and isinstance(built, specdec.Draft)


def test_a_fused_target_is_named_as_fused(fakes, target):
    fused = backends.to_backend(target, "fused")
    doc = overhead_section.measure(_run(fused), 10.0)
    assert set(doc["attribution"]) == {"fused"} and {r["backend"] for r in doc["overhead"]} == {"fused"}
    assert set(doc["overhead_setup"]["totals"]) == {"fused"}


def test_off_the_cpu_nothing_is_measured(fakes, target):
    doc = overhead_section.measure(_run(target, device="cuda"), 10.0)
    assert not fakes  # no fake was called
    assert doc["overhead"] == [] and doc["attribution"] == {}
    assert "the target runs on cuda" in doc["overhead_setup"]["skipped"]
    assert overhead_text.overhead_tables(doc) == ["\n## Overhead\n\nNot measured: the floor model is the CPU's; the target "
                                           "runs on cuda."]


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_the_tables_render_the_rows_and_name_the_backend():
    cats = {name: float(i) for i, name in enumerate(CATEGORIES)}
    doc = {"overhead": [{"backend": "fused", "positions": 1, "measured_us": 400.04, "floor_us": 100.0,
                         "share": 0.75, "flops": 1_202_688, "bytes": 2_413_568},
                        {"backend": "fused", "positions": 9, "measured_us": 500.0, "floor_us": 125.0,
                         "share": 0.75, "flops": 10_000_000, "bytes": 2_500_000}],
           "attribution": {"fused": {"step": cats, "round": {n: 2 * v for n, v in cats.items()}}},
           "overhead_setup": {"machine": MACHINE.to_dict(), "context_pos": 100, "draft": "bigram", "k": 4,
                              "totals": {"fused": {"step": {"measured_us": 20.0, "profiled_us": 28.0},
                                                   "round": {"measured_us": 40.0, "profiled_us": 56.0}}}}}
    lines = "\n".join(overhead_text.overhead_tables(doc)).splitlines()
    assert "## Overhead: the fused target pass against its roofline floor (100 cached positions)" in lines
    start = next(i for i, x in enumerate(lines) if x.startswith("| positions"))
    assert _cells(lines[start]) == ["positions", "measured µs", "floor µs", "overhead share (1 - floor / measured)",
                                    "MFLOP", "KB read"]
    assert _cells(lines[start + 2]) == ["1", "400.0", "100.0", "75.0%", "1.20", "2414"]
    assert _cells(lines[start + 3]) == ["9", "500.0", "125.0", "75.0%", "10.00", "2500"]
    assert any("GEMM 50.0 GFLOP/s, cache reads 20.0 GB/s (memory 5.0 GB/s)" in x for x in lines)
    head = next(i for i, x in enumerate(lines) if x.startswith("### Where the time goes, fused backend"))
    body = [_cells(x) for x in lines[head + 4: head + 4 + len(CATEGORIES) + 2]]
    assert body[0] == ["matmul", "0.0", "0.0"] and body[1] == ["attention", "1.0", "2.0"]
    assert body[len(CATEGORIES) - 1] == [profiler_split.RESIDUAL, "7.0", "14.0"]  # the eighth category, 7 and 2 x 7
    assert body[-2:] == [["profiled (sum of the above)", "28.0", "56.0"],
                         ["measured without the profiler", "20.0", "40.0"]]


def test_an_older_report_with_the_old_round_renders_step_and_round_only():
    """A report saved by an older version also holds "round (old)": the table shows step and round only."""
    step = {name: 1.0 for name in CATEGORIES}
    old = {name: 10.0 * (i + 1) for i, name in enumerate(CATEGORIES)}  # 10 .. 80
    lean = {**old, "draft": 12.5}

    def totals(accounted, measured, ratio):
        return {"measured_us": measured, "profiled_us": 0.0, "profiler_us": 0.0, "accounted_us": accounted,
                "accounted_ratio": ratio, "stretch": 1.25, "events_per_unit": 1.0}

    doc = {"overhead": [{"backend": "eager", "positions": 1, "measured_us": 400.0, "floor_us": 100.0,
                         "share": 0.75, "flops": 1, "bytes": 1}],
           "attribution": {"eager": {"step": step, "round": lean, "round (old)": old}},
           "overhead_setup": {"machine": MACHINE.to_dict(), "context_pos": 100, "draft": "bigram", "k": 4,
                              "totals": {"eager": {"step": totals(8.0, 7.5, 1.01), "round": totals(302.5, 300.0, 1.02),
                                                   "round (old)": totals(360.0, 350.0, 1.03)}}}}
    text = "\n".join(overhead_text.overhead_tables(doc))
    lines = text.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("| category"))
    assert _cells(lines[head]) == ["category", "step", "round"]
    body = {c[0]: c[1:] for c in map(_cells, lines[head + 2: head + 2 + len(CATEGORIES) + 4])}
    assert body["draft"] == ["1.0", "12.5"]
    assert body["accounted (sum of the above)"] == ["8.0", "302.5"]
    assert body["accounted / untimed (median of neighbouring blocks)"] == ["1.010", "1.020"]
    assert "round (old)" not in text and "came back" not in text


def test_a_report_without_the_old_round_renders_its_two_columns():
    """report.json from before the old round was measured: step and round only, no difference, no prose on it."""
    cats = {name: float(i) for i, name in enumerate(CATEGORIES)}
    totals = {"measured_us": 20.0, "profiled_us": 0.0, "profiler_us": 0.0, "accounted_us": 21.0,
              "accounted_ratio": 1.05, "stretch": 1.5, "events_per_unit": 1.0}
    doc = {"overhead": [{"backend": "eager", "positions": 1, "measured_us": 400.0, "floor_us": 100.0,
                         "share": 0.75, "flops": 1, "bytes": 1}],
           "attribution": {"eager": {"step": cats, "round": {n: 2 * v for n, v in cats.items()}}},
           "overhead_setup": {"machine": MACHINE.to_dict(), "context_pos": 100, "draft": "bigram", "k": 4,
                              "totals": {"eager": {"step": totals, "round": {**totals, "measured_us": 40.0}}}}}
    text = "\n".join(overhead_text.overhead_tables(doc))
    lines = text.splitlines()
    head = next(i for i, x in enumerate(lines) if x.startswith("| category"))
    assert _cells(lines[head]) == ["category", "step", "round"]
    assert _cells(lines[head + 3]) == ["attention", "1.0", "2.0"]
    assert _cells(lines[head + 2 + len(CATEGORIES) + 1]) == ["measured untimed", "20.0", "40.0"]
    assert "round (old)" not in text and "came back" not in text


def test_a_report_saved_before_the_section_renders_without_it():
    assert overhead_text.overhead_tables({}) == []
