"""tools/build_split.py: a build's wall time split by part, each object file charged the gap since the one before."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tools"))
import build_split  # noqa: E402


def _written(build: Path, rel: str, t: float) -> None:
    path = build / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    os.utime(path, (t, t))


def test_each_file_is_charged_the_gap_before_it_by_its_part(tmp_path, capsys):
    for rel, t in [("ggml/src/a.c.o", 100.0), ("ggml/src/b.c.o", 110.0), ("src/llama.cpp.o", 130.0),
                   ("common/CMakeFiles/x/arg.cpp.o", 190.0), ("tools/server/CMakeFiles/s/server.cpp.o", 250.0),
                   ("bin/llama-server", 251.0), ("common/notes.txt", 999.0)]:
        _written(tmp_path, rel, t)
    span, per = build_split.split(tmp_path)
    assert span == 151.0
    assert per == {"ggml": 10.0, "llama": 20.0, "common": 60.0, "tools/server": 60.0, "link": 1.0}
    assert build_split.main([str(tmp_path)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "span 151 s" and out[1].split() == ["common", "60", "s", "39.7%"]


def test_a_folder_that_is_not_there_is_exit_2(tmp_path, capsys):
    assert build_split.main([str(tmp_path / "nowhere")]) == 2
    assert capsys.readouterr().err.count("\n") == 1
