"""Shared fixtures: the shipped target and each draft are built once per test session."""

import functools

import pytest
import torch

import specdec


@pytest.fixture(scope="session")
def target():
    torch.set_num_threads(1)
    return specdec.load_target()


@pytest.fixture(scope="session")
def draft_factory(target):
    @functools.lru_cache(maxsize=None)
    def make(name):
        return specdec.make_draft(name, target)

    return make


REPORT_BUDGET = 20.0


@pytest.fixture(scope="session")
def report_doc(target):
    """One small report shared by test_report and test_report_trees (bigram brings the default trees)."""
    from specdec.report import build as report

    return report.measure(target, ["bigram", "int8"], [1, 2], quick=True, pairs=3, threads=1, chars=60,
                          budget=REPORT_BUDGET, log=lambda s: None)


@pytest.fixture(autouse=True, scope="session")
def _session_between_run_record(tmp_path_factory):
    """Reports and calibrations read and append the user's between-run record (machine_record): the session
    (its shared report fixtures too) gets a cache directory of its own, so no test depends on, or writes to,
    the developer's."""
    mp = pytest.MonkeyPatch()
    mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("session-cache")))
    yield
    mp.undo()


@pytest.fixture(autouse=True)
def _own_between_run_record(tmp_path_factory, monkeypatch):
    """And every test one more: what one test records, another never reads."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("cache")))


@pytest.fixture
def no_eager_forward(monkeypatch):
    """From here on, any call of the eager forward fails the test (the models are built before it is asked for)."""
    def eager_forward(*args, **kwargs):
        raise AssertionError("the eager forward ran")

    return lambda: monkeypatch.setattr(specdec.GPT, "forward", eager_forward)
