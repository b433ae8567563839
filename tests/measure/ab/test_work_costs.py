"""The cost table's work figures: instructions per pass and per drafted token beside the cost table's times
(hand-made documents; the counting itself is ab's counting worker, tested in test_ab.py and below)."""

import json

import pytest

from specdec.measure.ab import ab_work, work_costs
from specdec.measure.work import work
from specdec.report import render


def _doc(pass_instr: int = 2_000_000, bigram_instr: int = 400_000, draft_k: int = 4) -> dict:
    return {"costs": {"target_pass_us": 500.0, "drafts": {"bigram": {"char_us": 10.0}, "int8": {"char_us": 90.0}}},
            "work": {"counter": "callgrind", "name": "callgrind", "draft_k": draft_k, "seconds": 3.0,
                     "method": work_costs.METHOD, "rows": {"pass 1": _layouts(pass_instr),
                                                           "draft bigram": _layouts(bigram_instr)}}}


def _layouts(n: int, spread: int = 0) -> list[dict]:
    """A row as `work_costs.measure` records it: a Count dict per layout, n - spread, n, n + spread (mean n)."""
    return [{"fewest": n + d, "alloc": 100, "counts": [], "warmup": 24, "spread": 0.0} for d in (-spread, 0, spread)]


def test_a_drafted_token_is_its_call_over_draft_k_and_time_per_instruction_is_time_over_work():
    f = work_costs.figures(_doc())
    # 500 us / 2,000,000 instructions = 0.25 ns; bigram 400,000 / 4 = 100,000 a token, 10 us / 100,000 = 0.1 ns
    assert f == {"pass": {"instructions": 2_000_000, "us": 500.0, "ns_per_instruction": 0.25},
                 "draft bigram": {"instructions": 100_000, "us": 10.0, "ns_per_instruction": 0.1}}


def test_a_report_without_work_has_no_work_figures():
    assert work_costs.figures({"costs": _doc()["costs"]}) == {}
    assert work_costs.figures({**_doc(), "work": ab_work.unavailable("left out (--no-work)")}) == {}


def test_time_splits_into_work_and_time_per_instruction():
    a, b = _doc(), _doc(pass_instr=2_200_000)
    b["costs"]["target_pass_us"] = 660.0  # +32 % time = +10 % work x +20 % time per instruction
    rows = {r["term"]: r for r in work_costs.split(a, b)}
    assert rows["pass"]["time"] == pytest.approx(0.32) and rows["pass"]["work"] == pytest.approx(0.10)
    assert rows["pass"]["speed"] == pytest.approx(0.20) and rows["pass"]["work_differs"]
    assert rows["draft bigram"] == {"term": "draft bigram", "time": 0.0, "work": 0.0, "speed": 0.0, "work_differs": False}


def test_time_does_not_split_where_the_reports_work_cannot_be_compared():
    a, b = _doc(), _doc(draft_k=8)
    assert work_costs.comparable(a, b) and work_costs.split(a, b) == []


def test_the_off_switch_off_cpu_and_a_missing_counter_are_reasons_not_errors(monkeypatch):
    """The report's work plan (checks.work_plan, shared with ab): --no-work first, then off the CPU, then the
    counter; auto finding none is a reason, a counter named that cannot run is bad input."""
    from types import SimpleNamespace

    from specdec.cli.checks import UsageError, work_plan

    monkeypatch.setattr(work.shutil, "which", lambda name: None)
    monkeypatch.setattr(work, "PerfCounter", lambda *a: (_ for _ in ()).throw(work.WorkUnavailable("no PMU here")))
    off, auto, named = (SimpleNamespace(work=w, counter=c) for w, c in ((False, "auto"), (True, "auto"),
                                                                         (True, "callgrind")))
    assert work_plan(off, {}, "counted on the CPU only") == (None, "left out (--no-work)")
    assert work_plan(auto, {}, "counted on the CPU only") == (None, "counted on the CPU only")
    kind, reason = work_plan(auto, {})
    assert kind is None and "no PMU here" in reason and "apt-get install valgrind" in reason
    with pytest.raises(UsageError, match=r"^--counter callgrind: callgrind: valgrind is not installed"):
        work_plan(named, {})


def test_the_cost_table_shows_instructions_and_time_per_instruction(report_doc):
    doc = json.loads(json.dumps(report_doc))
    name = doc["settings"]["drafts"][0]
    k = doc["costs"]["draft_k"]
    doc["work"] = {"counter": "callgrind", "name": work.NAMES["callgrind"], "draft_k": k, "seconds": 80.0,
                   "method": work_costs.METHOD, "rows": {"pass 1": _layouts(3_000_000),
                                                         f"draft {name}": _layouts(40_000 * k)}}
    text = render.tables(doc)
    t1 = doc["costs"]["target_pass_us"]
    cells = {line.split("|")[1].strip(): [c.strip() for c in line.split("|")[2:-1]]
             for line in text.splitlines() if line.startswith("| one ")}
    assert cells["one target pass (1 position)"] == [f"{t1:.0f}", "1.000", "", "3,000,000", f"{t1 * 1e3 / 3e6:.3f}", ""]
    assert cells[f"one {name} character"][3] == "40,000" and cells["one verify pass (2 positions)"][3:5] == ["", ""]
    assert f"Work: {work.NAMES['callgrind']}, in a worker of this checkout" in text
    doc["work"] = ab_work.unavailable("left out (--no-work)")
    assert "Work: not counted: left out (--no-work)." in render.tables(doc)


_MAIN = ("import sys, functools; from specdec.report import build; build.QUICK.update(overhead_chars=4, "
         "overhead_repeats=1); build.measure = functools.partial(build.measure, sizing_costs=False); "
         "from specdec.cli.commands import main; sys.exit(main(sys.argv[1:]))")


@pytest.mark.skipif(work.callgrind_missing() != "", reason=work.callgrind_missing() or "callgrind runs")
def test_a_report_counts_its_cost_tables_calls_and_compares_against_itself(tmp_path):
    """`specdec report --counter callgrind` (no PMU here), one draft and k (the simulation is slow): the cost
    table's pass and drafted token counted in a worker of this checkout, the work section outside the budget,
    and the report compared against itself: every work row the same."""
    import subprocess
    import sys

    out = tmp_path / "rep"
    proc = subprocess.run([sys.executable, "-c", _MAIN, "report", "--quick", "--budget", "6", "--backend", "onnx",
                           "--drafts", "bigram", "--ks", "2", "--trees", "--prompt", "ROMEO:", "--chars", "20",
                           "--counter", "callgrind", "--out", str(out)], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc = json.loads((out / "report.json").read_text())
    w = doc["work"]
    assert (w["counter"], w["draft_k"], set(w["rows"])) == ("callgrind", doc["costs"]["draft_k"], {"pass 1", "draft bigram"})
    assert all(len(r) == len(ab_work.LAYOUTS) and all(c["fewest"] > 0 for c in r) for r in w["rows"].values())
    assert doc["sections"][-1]["section"].startswith("work: ") and "[work] work 3/3: R layout 3 counted" in proc.stderr
    assert "| instructions | ns / instruction |" in (out / "report.md").read_text()
    # the report against a copy whose bigram row has 0.5 % more work, its pass the same: flagged there only
    dearer = json.loads(json.dumps(doc))
    for c in dearer["work"]["rows"]["draft bigram"]:
        c["fewest"] = round(c["fewest"] * 1.005)
    (out / "dearer.json").write_text(json.dumps(dearer))
    got = subprocess.run([sys.executable, "-m", "specdec.cli", "compare", str(out / "report.json"),
                          str(out / "dearer.json")], capture_output=True, text=True, timeout=120)
    verdicts = {x.split()[0] + " " + x.split()[1]: x.split()[-1] for x in got.stdout.splitlines()
                if x.startswith(("pass 1 ", "draft bigram "))}
    assert verdicts == {"pass 1": "same", "draft bigram": "worse"}, got.stdout
    assert got.returncode == 1 and "WORSE: work draft bigram: +0.50% instructions per call" in got.stdout
