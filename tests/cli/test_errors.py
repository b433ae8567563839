"""Bad input is one line and exit 2; a bug is a bug. Faults injected deep inside the work (a ValueError or
KeyError where no user input is involved) must surface as exceptions, never as a usage line."""

import json

import pytest

from specdec import cli
from specdec.cli.checks import UsageError
from specdec.decoding.drafts import DeviceError, UnknownDraftError
from specdec.measure.machine_record import RecordError
from specdec.measure.workload import WorkloadError
from specdec.model.backends import UnknownBackendError
from specdec.model.corpus import VocabularyError
from specdec.model.gpt import ContextOverflowError
from specdec.model.hf import HFModelError
from specdec.model.train import CheckpointError
from specdec.report.compare import calibrate, compare
from specdec.util.errors import InputError

from tests.report.compare.test_calibrate import _doc as _calibration_doc
from tests.report.compare.test_compare import _doc as _report_doc


@pytest.mark.parametrize("cls", [UsageError, UnknownDraftError, DeviceError, RecordError, WorkloadError,
                                 UnknownBackendError, VocabularyError, ContextOverflowError, HFModelError,
                                 CheckpointError])
def test_every_input_error_is_an_input_error_and_still_a_value_error(cls):
    assert issubclass(cls, InputError) and issubclass(cls, ValueError)


def test_a_value_error_inside_measurement_is_a_bug_not_a_usage_line(monkeypatch, capsys):
    from specdec.model import sampling

    def broken(*args, **kwargs):
        raise ValueError("injected fault inside sampling")

    monkeypatch.setattr(sampling, "sample", broken)
    with pytest.raises(ValueError, match="injected fault"):  # not SystemExit(2): the process exits 1 with a trace
        cli.main(["generate", "--chars", "5", "--draft", "bigram", "-k", "2"])
    assert "error:" not in capsys.readouterr().err


def test_an_input_error_raised_by_the_library_is_one_line_exit_2(monkeypatch, capsys):
    from specdec.model import sampling

    def refused(*args, **kwargs):
        raise ContextOverflowError("position 300 exceeds the context of 256")

    monkeypatch.setattr(sampling, "sample", refused)
    with pytest.raises(SystemExit) as info:
        cli.main(["generate", "--chars", "5", "--draft", "bigram", "-k", "2"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err == "specdec generate: error: position 300 exceeds the context of 256\n"


def _write_pair(tmp_path) -> tuple[str, str]:
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps(_report_doc(1)))
    b.write_text(json.dumps(_report_doc(2)))
    return str(a), str(b)


@pytest.mark.parametrize("exc", [KeyError("speedup"), TypeError("bad operand"), AttributeError("no attribute")])
def test_a_bug_inside_compare_is_not_called_an_unreadable_report(tmp_path, monkeypatch, exc):
    def broken(a, b):
        raise exc

    monkeypatch.setattr(compare, "_rows", broken)
    with pytest.raises(type(exc)):
        cli.main(["compare", *_write_pair(tmp_path)])


def test_a_hand_edited_report_is_still_one_line(tmp_path, capsys):
    a, b = _write_pair(tmp_path)
    doc = json.loads(open(b).read())
    del doc["acceptance"][0]["target_passes"]
    open(b, "w").write(json.dumps(doc))
    with pytest.raises(SystemExit) as info:
        cli.main(["compare", a, b])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert f"{b}: not a report this version reads (acceptance[0] lacks target_passes)" in err


def _repeat_folder(tmp_path, *names: str):
    doc = _calibration_doc({("ngram", 8): (1.0, 0.9, 1.1)})
    (tmp_path / "report.json").write_text(json.dumps(doc))
    for name in names:
        (tmp_path / name).mkdir()
        (tmp_path / name / "report.json").write_text(json.dumps(doc))


def test_calibrate_names_a_repeat_folder_that_is_not_numbered(tmp_path, capsys):
    _repeat_folder(tmp_path, "repeat-2", "repeat-x")
    with pytest.raises(SystemExit) as info:
        cli.main(["calibrate", str(tmp_path), "--no-record"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert f"{tmp_path / 'repeat-x'}: not a repeat folder (allowed: repeat-N with N a number" in err


def test_calibrate_reads_repeats_in_numeric_order(tmp_path):
    from specdec.cli.report_cmd import _repeat_reports

    _repeat_folder(tmp_path, "repeat-10", "repeat-2", "repeat-3")
    assert [p.parent.name for p in _repeat_reports(tmp_path)] == ["repeat-2", "repeat-3", "repeat-10"]


def test_a_bug_inside_calibrate_is_not_called_an_unreadable_report(tmp_path, monkeypatch):
    _repeat_folder(tmp_path, "repeat-2")

    def broken(a, b):
        raise KeyError("measured")

    monkeypatch.setattr(calibrate, "coverage", broken)
    with pytest.raises(KeyError):
        cli.main(["calibrate", str(tmp_path), "--no-record"])


def test_calibrate_refuses_a_report_without_what_it_reads_in_one_line(tmp_path, capsys):
    _repeat_folder(tmp_path, "repeat-2")
    (tmp_path / "repeat-2" / "report.json").write_text(json.dumps({"machine": {}, "speedup": []}))
    with pytest.raises(SystemExit) as info:
        cli.main(["calibrate", str(tmp_path), "--no-record"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and "repeat-2/report.json: not a report this version reads (noise_floor" in err
