"""Every tensor the pipeline feeds a model is made on that model's device -- proven without a GPU.

While these tests run, torch's default device is "meta": a tensor made without naming a device lands there,
never on the CPU. The target is a copy of the shipped one (on the CPU) whose forward asserts that its input is
on the device the model reports, so a single input made anywhere without `GPT.ids` fails the assertion. The
transformer drafts are copies of that target, so they check their own inputs the same way.
"""

import copy

import pytest
import torch

import specdec
from specdec.cli import models as cli
from specdec.measure import exactness, cost_table
from specdec.report import build as report
from specdec.model.gpt import GPT

from tests.conftest import REPORT_BUDGET, REPORT_TICK, FakeClock


class _Checking(GPT):
    def forward(self, idx, pos=None, tree=None):
        assert idx.device == self.device, f"input on {idx.device}, the model is on {self.device}"
        if tree is not None:  # a tree's position ids and attention mask go in too
            assert all(t.device == self.device for t in tree), "tree attention not on the model's device"
        return super().forward(idx, pos, tree)


@pytest.fixture()
def checking(target):
    model = copy.deepcopy(target)
    model.__class__ = _Checking
    torch.set_default_device("meta")
    try:
        yield model
    finally:
        torch.set_default_device(None)


def test_an_input_made_without_the_models_device_is_caught(checking):
    """Negative control: the trap springs on a tensor made the way exactness.py made them before."""
    with pytest.raises(AssertionError, match="input on meta, the model is on cpu"):
        checking(torch.tensor([[1, 2]]), 0)
    assert checking(checking.ids([1, 2]), 0).shape == (1, 2, 84)


def test_generation_verification_costs_and_report_feed_models_on_their_device(checking):
    draft = specdec.make_draft("int8", checking)
    assert type(draft.model) is _Checking  # the draft's own forward checks its inputs too
    assert len(specdec.generate(checking, "ROMEO:", 5, seed=0).text) == 5
    assert len(specdec.speculative_generate(checking, draft, "ROMEO:", 12, k=4, seed=0).text) == 12
    assert len(specdec.speculative_generate(checking, draft, "ROMEO:", 12, k=2, seed=0, adaptive=True).text) == 12
    (row,) = exactness.verify(checking, {"int8": draft}, k=2, samples=200)
    # int8 is exact and the seed fixed: its p-value clears the threshold; a wrong distribution would not
    assert row["p_value"] > row["p_threshold"] and row["verdict"] == "exact"
    assert exactness.target_row(checking, samples=200)["p_value"] is None
    assert exactness.verify_joint(checking, {"int8": draft}, k=2, samples=5)[0]["samples"] == 5
    costs = cost_table.measure_costs(checking, {"int8": draft}, [2], samples=1, number=1)
    assert costs.c("int8") > 0
    # every section once, on the shared report's fake clock: the device is the point, not the budget's pairs
    doc = report.measure(checking, ["int8"], [2], quick=True, pairs=1, chars=20, budget=REPORT_BUDGET,
                         clock=FakeClock(tick=REPORT_TICK), log=lambda s: None)
    assert [r["draft"] for r in doc["speedup"]] == ["int8"]


def test_the_check_fails_a_pipeline_that_forgets_the_device(checking, monkeypatch):
    """Negative control at the pipeline's level: the same run, its inputs made without a device, fails."""
    monkeypatch.setattr(GPT, "ids", lambda self, tokens: torch.tensor([tokens]))
    with pytest.raises(AssertionError, match="input on meta"):
        specdec.generate(checking, "ROMEO:", 5, seed=0)


def test_on_cuda_cpu_only_drafts_are_skipped_by_default_and_refused_by_name(capsys):
    assert cli.drafts_arg(None, "cuda") == [n for n in specdec.DRAFTS if n != "int8-dynamic"]
    assert capsys.readouterr().err == "note: skipping draft 'int8-dynamic': it runs on the CPU only, not on cuda\n"
    with pytest.raises(cli.UsageError, match="draft 'int8-dynamic' runs on the CPU only, not on cuda"):
        cli.drafts_arg(["bigram", "int8-dynamic"], "cuda")
    assert cli.drafts_arg(None, "cpu") == list(specdec.DRAFTS)
