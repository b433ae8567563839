"""`specdec report --backend all`: the per-backend tables and the finding, from the reports' figures."""

import pytest

from specdec.report.engines import backend_report


def _doc(t1, t9, c, rows):
    """A report document with what the finding reads: costs, and speedup rows (draft, k) -> (predicted before,
    measured, low, high)."""
    return {"machine": {"threads": 1},
            "costs": {"target_pass_us": t1, "verify_pass_us": {"9": t9},
                      "drafts": {n: {"c": v, "char_us": v * t1} for n, v in c.items()}},
            "speedup": [{"draft": d, "k": k, "tree": None, "predicted_before": p, "measured": m, "ci_low": lo,
                         "ci_high": hi, "pairs": 5} for (d, k), (p, m, lo, hi) in rows.items()]}


EAGER = _doc(800.0, 1200.0, {"bigram": 0.02, "int8": 1.2},
             {("bigram", 4): (1.3, 1.25, 1.1, 1.4), ("int8", 8): (0.8, 0.85, 0.7, 1.0)})
NUMPY = _doc(300.0, 700.0, {"bigram": 0.053, "int8": 1.1},
             {("bigram", 4): (1.1, 1.05, 0.95, 1.15), ("int8", 8): (1.2, 1.15, 1.0, 1.3)})


def test_summary_by_hand():
    s = backend_report.summary(NUMPY)
    assert s["verify_over_single"] == {9: pytest.approx(700 / 300)} and s["c"] == {"bigram": 0.053, "int8": 1.1}
    assert s["best_predicted"]["row"] == "int8 k=8" and s["best_measured"]["row"] == "int8 k=8"
    assert s["ranking"] == ["int8", "bigram"]


def test_the_finding_says_what_moved_when_overhead_is_taken_back():
    found = backend_report.finding({"eager": EAGER, "numpy": NUMPY})
    assert found["lines"][0].startswith("eager: predicted before the pairs, the best is bigram k=4 (1.30x); "
                                        "measured, bigram k=4 (1.25x, 1.10-1.40)")
    assert found["lines"][2] == ("numpy against eager: a pass 0.38x the time (300 against 800 us); T(9)/T(1) "
                                 "1.50 -> 2.33; c bigram 0.020 -> 0.053, int8 1.200 -> 1.100; c predicted from "
                                 "eager's draft times and this pass time alone: bigram 0.053, int8 1.200; best "
                                 "measured bigram k=4 -> int8 k=8 (the ranking of drafts changed).")
    text = backend_report.render({"eager": EAGER, "numpy": NUMPY}, found)
    assert "## numpy (1 thread(s); a target pass 300 us)" in text
    assert "| int8 | k=8 | 1.20 | 1.15 | 1.00-1.30 | 5 |" in text
    assert "| numpy | 300 | 2.33 | 0.053 | 1.100 |" in text


def test_a_prediction_that_picks_another_row_outside_the_best_interval_is_named():
    doc = _doc(300.0, 700.0, {"bigram": 0.05, "int8": 1.1},
               {("bigram", 4): (1.4, 1.0, 0.9, 1.1), ("int8", 8): (1.2, 1.3, 1.25, 1.35)})
    line = backend_report.finding({"numpy": doc})["lines"][0]
    assert line.endswith("-- the prediction picked another row, outside the best's interval; drafts ranked by "
                         "their best: int8, bigram.")


# In a fresh interpreter, as the `specdec` command runs (its start-up is the first report's first row). The
# test first shrinks --quick's attribution to one profiled block of 4 characters per scope (five of 20): that
# profiling is most of a --quick report's time whatever the budget; and it turns the sizing off, so that every
# backend's report keeps these knobs whatever this machine's speed (the sizing's own tests set its costs).
_MAIN = "import sys; {}from specdec.cli.commands import main; sys.exit(main(sys.argv[1:]))"
_SHRINK = ("import functools; from specdec.report import build; "
           "build.QUICK.update(overhead_chars=4, overhead_repeats=1); "
           "build.measure = functools.partial(build.measure, sizing_costs=False); ")


def test_report_backend_all_writes_a_report_per_backend_and_the_finding(tmp_path):
    import json
    import subprocess
    import sys

    import specdec
    from specdec.report import build as report

    out = tmp_path / "all"
    proc = subprocess.run([sys.executable, "-c", _MAIN.format(_SHRINK), "report", "--backend",
                           "all", "--quick", "--budget", "6", "--drafts", "bigram", "--ks", "2", "--trees",
                           "--prompt", "ROMEO:", "--chars", "40", "--no-work", "--out", str(out)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    found = json.loads((out / "backends.json").read_text())
    assert list(found["backends"]) == list(specdec.BACKENDS)
    for name in specdec.BACKENDS:
        doc = json.loads((out / name / "report.json").read_text())
        assert doc["machine"]["backend"] == name and [r["k"] for r in doc["speedup"]] == [2]
        setup = doc["overhead_setup"]
        assert (setup["chars"], setup["repeats"]) == (4, 1)  # the twin's, not --quick's 20 and 5
        # the same seeds, the same exact rule: every backend's deterministic counts are identical
        assert doc["acceptance"] == json.loads((out / "eager" / "report.json").read_text())["acceptance"]
        # the first report's budget counts from the command's start (its first row); the others' from their own
        first = doc["sections"][0]
        assert (first["section"] == report.STARTUP) == (name == specdec.BACKENDS[0])
        assert sum(s["seconds"] for s in doc["sections"]) <= doc["wall_seconds"] + 0.005 * len(doc["sections"])
    assert (out / "attribution.png").read_bytes()[:4] == b"\x89PNG"  # every backend's step and round, stacked
    text = (out / "backends.md").read_text()
    assert text.count("| bigram | k=2 |") == len(specdec.BACKENDS) and "## Finding" in text
