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


def _package(tmp_path, files: dict[str, str]):
    pkg = tmp_path / "specdec"
    for rel, text in {"__init__.py": "", **files}.items():
        path = pkg / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        for parent in path.relative_to(pkg).parents:
            (pkg / parent / "__init__.py").touch()
        path.write_text(text)
    return pkg


def test_the_guard_fails_when_the_core_imports_a_room_or_a_room_its_peer(tmp_path, capsys):
    """Negative control inside measure and report: the core importing a room, a room importing a peer room of the
    same rank, and a report room importing the full report are each named; a room importing the core is not."""
    pkg = _package(tmp_path, {
        "measure/clock.py": "",
        "measure/timing.py": "from specdec.measure.ab import ab\n",  # core -> room
        "measure/ab/ab.py": "from specdec.measure import clock\nfrom specdec.measure.load import load\n",  # peer
        "measure/load/load.py": "from specdec.measure import clock\n",
        "report/markdown.py": "",
        "report/build.py": "from specdec.report.ab import ab_render\n",
        "report/ab/ab_render.py": "from specdec.report import markdown, build\n",  # room -> the full report
    })
    assert _layers().main([str(pkg)]) == 1
    out = capsys.readouterr().out
    assert "upward: specdec.measure.timing imports specdec.measure.ab.ab" in out
    assert "upward: specdec.measure.ab.ab imports specdec.measure.load.load" in out
    assert "upward: specdec.report.ab.ab_render imports specdec.report.build" in out
    assert out.count("upward:") == 3, out  # clock, markdown and ab_render from build are the right way
