"""Stated versions are real: pyproject's floors are the ones the code checks (and tools/check_floors.py
installs and tests), and an installed version older than its floor is one line naming the extra."""

from pathlib import Path

import pytest
import tomllib

from specdec import cli
from specdec.util import versions
from specdec.util.errors import InputError

PYPROJECT = tomllib.loads((Path(__file__).resolve().parent.parent / "pyproject.toml").read_text())


@pytest.mark.parametrize("module", sorted(versions.FLOORS))
def test_pyproject_states_the_floor_the_code_checks(module):
    floor, extra = versions.FLOORS[module]
    assert f"{module}>={floor}" in PYPROJECT["project"]["optional-dependencies"][extra]


@pytest.mark.parametrize("module", sorted(versions.FLOORS))
def test_the_installed_version_meets_its_floor(module):
    pytest.importorskip(module)
    assert versions.too_old(module) is None


def test_versions_compare_by_their_numbers():
    assert versions.as_tuple("4.57.6") == (4, 57, 6) and versions.as_tuple("2.13.0+cpu") == (2, 13, 0)
    assert versions.as_tuple("5.0.0rc1") == (5, 0, 0) and versions.as_tuple("1.22") < versions.as_tuple("1.100")


def test_an_old_transformers_is_one_line_naming_the_extra(monkeypatch, capsys, tmp_path):
    pytest.importorskip("transformers")
    monkeypatch.setattr(versions, "installed", lambda module: "4.45.0")
    floor = versions.FLOORS["transformers"][0]
    with pytest.raises(InputError, match=rf"transformers 4\.45\.0 is older than the hf extra needs "
                                         rf"\(transformers>={floor}\)"):
        versions.require("transformers")
    with pytest.raises(SystemExit) as info:
        cli.main(["info", "--target", f"hf:{tmp_path}"])
    err = capsys.readouterr().err
    assert info.value.code == 2 and err.count("\n") == 1
    assert f"transformers 4.45.0 is older than the hf extra needs (transformers>={floor})" in err


def test_an_old_onnxruntime_leaves_the_onnx_backend_out_saying_why(monkeypatch):
    pytest.importorskip("onnxruntime")
    from specdec.model import backends

    monkeypatch.setattr(versions, "installed", lambda module: "1.20.1")
    missing = backends._missing()
    floor = versions.FLOORS["onnxruntime"][0]
    assert missing == {"onnx": f"onnxruntime 1.20.1 is older than the onnx extra needs (onnxruntime>={floor}): "
                               "pip install -U 'specdec-bench[onnx]'"}
    monkeypatch.setitem(backends._MISSING, "onnx", missing["onnx"])
    monkeypatch.delitem(backends._CLASSES, "onnx")
    with pytest.raises(InputError, match=r"'onnx' is not installed: onnxruntime 1\.20\.1 is older than the onnx"):
        backends.check_backend("onnx")
