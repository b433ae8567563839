"""`specdec batch` end to end on tiny settings, and `report/batch_build` (the section alone, within a budget counted
from the command's start, and its files) with hand-computed expectations. Every decision reads the fake clock
(conftest's FakeClock), so what is measured never depends on the machine's speed."""

import json

import pytest

from specdec.cli import main
from specdec.measure import workload as wl
from specdec.measure.clock import using
from specdec.model import protocol
from specdec.report.batch import batch_build, batch_render, batch_section
from specdec.report import build

from tests.conftest import FakeClock

TINY = ["batch", "--drafts", "bigram", "--batches", "2", "1", "2", "-k", "2", "--chars", "8", "--pairs", "3",
        "--budget", "60", "--quick"]


@pytest.fixture
def ends_after_min_pairs(monkeypatch):
    """--quick's precision made always met, so every row stops at its --pairs whatever the ratios; few cost
    samples (the cost model's fit needs no more): a run of seconds."""
    monkeypatch.setitem(build.QUICK, "precision", 1e9)
    monkeypatch.setitem(build.QUICK, "cost_samples", 3)


def test_batch_end_to_end_writes_what_it_prints_and_every_key(target, tmp_path, capsys, ends_after_min_pairs):
    """Started a long while after the package's import (the fake clock reads 1e9 at the call): the budget counts
    from the call, so the 60 s cover both batch sizes and every row gets its pairs (counted from the import, the
    budget would be spent before the first pair)."""
    out = tmp_path / "out"
    with using(FakeClock(start=1e9, tick=0.001)):
        assert main([*TINY, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    doc = json.loads((out / "batch.json").read_text())
    assert set(doc) == {"machine", "settings", "batch", "sections", "wall_seconds"}
    assert doc["settings"] == {"workload": wl.DEFAULT_WORKLOAD, "k": 2, "draft_k": {}, "chars": 8, "budget": 60.0,
                               "drafts": ["bigram"], "target": protocol.describe(target), "min_pairs": 3,
                               "precision": 1e9}
    b = doc["batch"]
    assert b["batches"] == [1, 2] and b["dropped_batches"] == [] and b["ks"] == {"bigram": 2} and b["chars"] == 8
    assert [(r["draft"], r["batch"], r["k"], r["pairs"]) for r in b["rows"]] == [("bigram", 1, 2, 3),
                                                                               ("bigram", 2, 2, 3)]
    assert set(b["crossover"]) == {"bigram"} and b["noise_floor"]["batch"] == 2 and b["noise_floor"]["pairs"] == 3
    assert [s["section"] for s in doc["sections"]] == ["drafts", "batch: B sequences at once, paired"]
    assert 0 < doc["wall_seconds"] < 60
    text = (out / "batch.md").read_text()
    assert text == "\n".join(batch_render.batch_lines(doc)) + "\n" == printed  # the file is what was printed
    names = sorted(p.name for p in out.iterdir())
    assert names in (["batch.json", "batch.md"], ["batch.json", "batch.md", "batch.png"])  # the figure: matplotlib
    assert (names[-1] == "batch.png") == _has_matplotlib()


def _has_matplotlib() -> bool:
    import importlib.util

    return importlib.util.find_spec("matplotlib") is not None


def test_batch_counts_its_budget_from_the_call_in_a_long_lived_process(tmp_path, monkeypatch):
    """`main(argv)` twice in one process: each call's budget starts at that call (the fake clock's reading
    then), never at the package's import."""
    seen = []
    monkeypatch.setattr(batch_build, "measure_batch", lambda *a, started, **kw: seen.append(started) or {})
    monkeypatch.setattr(batch_build, "write_batch", lambda doc, out: [])
    for reading in (42.0, 4242.0):
        with using(lambda: reading):
            assert main(["batch", "--drafts", "bigram", "--batches", "1", "--chars", "8", "--out",
                         str(tmp_path)]) == 0
    assert seen == [42.0, 4242.0]


# --- batch_build: the section within its budget, and the files ------------------------------------------------


def test_measure_batch_gives_the_section_what_the_budget_leaves_and_records_its_settings(target, monkeypatch):
    """Budget 10 s counted from 98.0, called at 100.0: the drafts section (fixed work, no time on this clock)
    leaves 10 - 4 (the write reserve) - 2 (spent before the call) = 4.0 s to the batch section, which takes 2.5;
    the document records its settings (--pairs over the quick knobs) and 4.5 s from the start."""
    clock = FakeClock(start=100.0)
    seen = {}

    def section(run, seconds):
        seen.update(seconds=seconds, knobs=dict(run.knobs), objs=sorted(run.objs), runs=len(run.runs), ks=run.ks)
        clock.advance(2.5)
        return {"batch": {"rows": []}}

    monkeypatch.setattr(batch_section, "measure", section)
    with using(clock):
        doc = batch_build.measure_batch(target, ["bigram", "ngram"], k=3, batches=[4, 1], chars=10, budget=10.0,
                                        quick=True, pairs=4, started=98.0, log=lambda s: None, draft_ks={"ngram": 5})
    assert seen["seconds"] == 4.0 and seen["objs"] == ["bigram", "ngram"] and seen["ks"] == [3]
    assert {key: seen["knobs"][key] for key in ("budget", "min_pairs", "precision", "batch_k", "batch_ks",
                                                "batch_chars", "batch_sizes")} == {
        "budget": 10.0, "min_pairs": 4, "precision": build.QUICK["precision"], "batch_k": 3,
        "batch_ks": {"ngram": 5}, "batch_chars": 10, "batch_sizes": [4, 1]}
    assert seen["runs"] == len(wl.load_workload(wl.DEFAULT_WORKLOAD, chars=10, max_k=5).cycled(1))
    assert doc["settings"] == {"workload": wl.DEFAULT_WORKLOAD, "k": 3, "draft_k": {"ngram": 5}, "chars": 10,
                               "budget": 10.0, "drafts": ["bigram", "ngram"], "target": protocol.describe(target),
                               "min_pairs": 4, "precision": build.QUICK["precision"]}
    assert doc["batch"] == {"rows": []} and doc["wall_seconds"] == 4.5
    assert doc["sections"] == [{"section": "drafts", "seconds": 0.0, "allotted": None},
                               {"section": "batch: B sequences at once, paired", "seconds": 2.5, "allotted": 4.0}]
    assert doc["machine"]["backend"] and doc["machine"]["threads"]


def test_measure_batch_without_a_start_counts_from_the_call(target, monkeypatch):
    """started None: the budget starts at the call, so the section gets 30 - 4 = 26 s of a 30 s budget."""
    seen = []
    monkeypatch.setattr(batch_section, "measure", lambda run, seconds: seen.append(seconds) or {"batch": {}})
    with using(FakeClock(start=7.0)):
        doc = batch_build.measure_batch(target, ["bigram"], budget=30.0, log=lambda s: None)
    assert seen == [26.0] and doc["wall_seconds"] == 0.0
    assert doc["settings"]["min_pairs"] == build.FULL["min_pairs"] and doc["settings"]["k"] == 4
    assert doc["settings"]["chars"] == batch_section.BATCH_CHARS


def _doc(rows: bool) -> dict:
    """A batch document by hand: one draft at B = 1 and 2 (or the section without rows)."""
    row = {"draft": "bigram", "k": 2, "chars_per_pass": 2.5, "predicted_before": 1.3, "measured": 1.2,
           "ci_low": 1.1, "ci_high": 1.3, "pairs": 3, "r_predicted": 1.1, "r_measured": 1.2, "c_measured": 0.05}
    section = {"batches": [1, 2], "dropped_batches": [], "chars": 8, "ks": {"bigram": 2},
               "noise_floor": {"measured": 1.0, "ci_low": 0.98, "ci_high": 1.02, "pairs": 3, "batch": 2},
               "rows": [{**row, "batch": 1}, {**row, "batch": 2, "measured": 0.9, "ci_low": 0.8, "ci_high": 1.0}]
               if rows else [], "crossover": {"bigram": {"text": "stops paying at B = 2"}} if rows else {},
               "unavailable_drafts": {}}
    return {"machine": {"backend": "eager"}, "settings": {"k": 2}, "batch": section, "sections": [],
            "wall_seconds": 1.5}


@pytest.mark.parametrize("rows", [True, False])
def test_write_batch_writes_the_markdown_the_json_and_a_figure_when_there_are_rows(tmp_path, rows):
    doc = _doc(rows)
    paths = batch_build.write_batch(doc, tmp_path / "new" / "folder")  # a folder that is not there yet
    out = tmp_path / "new" / "folder"
    drawn = rows and _has_matplotlib()
    assert [p.name for p in paths] == ["batch.md", "batch.json"] + (["batch.png"] if drawn else [])
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in paths)  # no temporary file left
    assert json.loads((out / "batch.json").read_text()) == doc
    text = (out / "batch.md").read_text()
    assert text == "\n".join(batch_render.batch_lines(doc)) + "\n"
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in text.splitlines() if line.startswith("| ")]
    assert cells[1:] == ([["bigram", "2", "1", "2.50", "1.30", "1.20 [1.10, 1.30]", "3", "1.10", "1.20", "0.050"],
                          ["bigram", "2", "2", "2.50", "1.30", "0.90 [0.80, 1.00]", "3", "1.10", "1.20", "0.050"]]
                         if rows else [])
    assert ("- bigram k=2: stops paying at B = 2" in text) == rows


def test_write_batch_replaces_the_files_of_an_earlier_run(tmp_path):
    (tmp_path / "batch.md").write_text("old")
    batch_build.write_batch(_doc(False), tmp_path)
    assert (tmp_path / "batch.md").read_text().startswith("\n## Batch: speedup against batch size B")
