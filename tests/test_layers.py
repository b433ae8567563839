"""The layer guard (tools/layers.py) as a test: no module imports from a layer after its own
(util -> model -> decoding -> engines -> measure -> report -> cli), and the guard itself can fail."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _layers():
    spec = importlib.util.spec_from_file_location("layers_tool", ROOT / "tools" / "layers.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["layers_tool"] = module
    spec.loader.exec_module(module)
    return module


def test_no_module_imports_from_a_later_layer(capsys):
    rc = _layers().main([str(ROOT / "specdec")])
    out = capsys.readouterr().out
    assert rc == 0 and "upward:" not in out, out


def test_the_guard_fails_on_an_upward_import(tmp_path, capsys):
    """Negative control: a tiny package whose model layer imports from its report layer."""
    pkg = tmp_path / "specdec"
    for layer in ("model", "report"):
        (pkg / layer).mkdir(parents=True)
        (pkg / layer / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "report" / "render.py").write_text("import specdec.model.gpt\n")
    (pkg / "model" / "gpt.py").write_text("from specdec.report import render\n")
    assert _layers().main([str(pkg)]) == 1
    assert "upward: specdec.model.gpt imports specdec.report.render" in capsys.readouterr().out
