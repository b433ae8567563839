"""`specdec report --drafts MODULE:CALLABLE`: a user's own draft (here one that reads the target's states) named by
entry point, imported from the folder the command runs in, measured in the report like a shipped draft; a name
that is not there is one line and exit 2 before any work."""

from __future__ import annotations

import argparse

import pytest

from specdec.cli import models, report_cmd
from specdec.cli.commands import main
from specdec.report import build as report
from tests import feature_draft
from tests.conftest import REPORT_BUDGET, REPORT_TICK, FakeClock


@pytest.fixture
def folder(tmp_path, monkeypatch):
    (tmp_path / "featdraft.py").write_text(feature_draft.SOURCE)
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))  # undone after the test (draft_for puts the folder first too)
    return tmp_path


@pytest.mark.parametrize("spec, says", [
    ("nomod:make", "nomod:make: no module 'nomod' at the current folder (looked for nomod.py or nomod/__init__.py)"),
    ("featdraft:missing", "featdraft:missing: module 'featdraft' at the current folder defines no 'missing' at its "
                          "top level"),
])
def test_a_user_draft_that_is_not_there_is_one_line_and_exit_2_before_any_work(folder, capsys, spec, says):
    with pytest.raises(SystemExit) as exit_:
        main(["report", "--quick", "--drafts", spec, "--out", str(folder / "out")])
    code, err = exit_.value.code, capsys.readouterr().err
    assert code == 2 and err == f"specdec report: error: {says}\n", err
    assert not (folder / "out").exists()


def test_a_user_feature_draft_is_measured_in_the_report_like_a_shipped_one(folder, target):
    args = argparse.Namespace(dtype=None, allow_download=False, drafts=["featdraft:make", "bigram"], device="cpu")
    models.check_draft_names(args.drafts)
    draft, bigram = report_cmd._report_drafts(args, target)  # what `specdec report` hands report.measure
    assert type(draft).__name__ == "HeadZero" and draft.name == "head-zero" and bigram.name == "bigram"
    doc = report.measure(target, [draft, "bigram"], [2], quick=True, pairs=3, threads=1, chars=60,
                         budget=REPORT_BUDGET, log=lambda s: None, clock=FakeClock(tick=REPORT_TICK),
                         sizing_costs=False)
    chains = [r for r in doc["exactness"] if r["tree"] is None]
    assert {r["draft"] for r in chains} >= {"head-zero", "bigram"}
    assert all(r["verdict"] == "exact" for r in chains)
    acceptance = {r["draft"]: r for r in doc["acceptance"] if r["tree"] is None}
    assert acceptance["head-zero"]["target_passes"] > 0 and 0 < acceptance["head-zero"]["acceptance"] <= 1
    assert "head-zero" in doc["costs"]["drafts"]
    assert any(r["draft"] == "head-zero" for r in doc["speedup"])


def test_the_work_section_counts_a_user_draft_by_its_entry_point_under_the_reports_name(folder, target, monkeypatch):
    """The cost table's count (after the timing) builds the user's draft in ab's worker as `specdec ab` does: the
    running specdec the harness, the current folder the tree, the entry point the draft's name there; its row
    comes back under the name the report's tables give the draft. (The counting itself: tests/measure/ab.)"""
    from specdec.measure.ab import ab_work, work_costs
    from specdec.measure import entry

    args = argparse.Namespace(dtype=None, allow_download=False, drafts=["featdraft:make", "bigram"], device="cpu",
                              work_plan=("callgrind", ""), prompt=None, seed=None, target=None, checkpoint=None,
                              backend="eager")
    drafts = report_cmd._report_drafts(args, target)
    doc = {"settings": {"drafts": ["head-zero", "bigram"], "ks": [2, 4], "chars": 60, "temperature": 1.0},
           "machine": {"threads": 1}, "costs": {"draft_k": 4}, "sections": []}
    seen = {}

    def count(sources, config, kind, rows, progress):
        seen.update(tree=sources[0].path, config=config, rows=rows)
        return {row: [[{"fewest": 1000 + i}] * 3] for i, row in enumerate(rows)}

    monkeypatch.setattr(ab_work, "count_sources", count)
    monkeypatch.setattr(ab_work, "calibration", lambda config, kind: None)
    report_cmd._count_work(args, doc, "eager", drafts)
    assert seen["rows"] == ["pass 1", "draft featdraft:make", "draft bigram"]
    assert seen["config"]["drafts"] == ["featdraft:make", "bigram"] and seen["config"]["draft_k"] == 4
    assert seen["config"]["harness"] == entry.harness_root() and seen["tree"] == str(folder)
    assert set(doc["work"]["rows"]) == {"pass 1", "draft head-zero", "draft bigram"}
    assert doc["work"]["rows"]["draft head-zero"] == [{"fewest": 1001}] * 3
    assert work_costs.instructions(doc["work"]["rows"]["draft head-zero"]) == 1001


def test_the_work_section_of_shipped_drafts_counts_this_checkout_without_a_harness(target, monkeypatch):
    from specdec.measure.ab import ab_work, work_costs

    seen = {}

    def count(sources, config, kind, rows, progress):
        seen.update(tree=sources[0].path, config=config)
        return {row: [[{"fewest": 7}]] for row in rows}

    monkeypatch.setattr(ab_work, "count_sources", count)
    monkeypatch.setattr(ab_work, "calibration", lambda config, kind: None)
    config = {"target": None, "backend": "eager", "dtype": None, "drafts": ["bigram"], "ks": [4], "chars": 60,
              "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}
    got = work_costs.measure(config, "callgrind", 4)
    assert "harness" not in seen["config"] and seen["tree"] == str(work_costs.checkout())
    assert set(got["rows"]) == {"pass 1", "draft bigram"}
