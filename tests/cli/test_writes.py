"""Writes that cannot leave a mixed or missing result: a report folder holds one run's files, a folder export
swaps in whole, the machine record loses no calibration to a concurrent writer, training never overwrites the
shipped checkpoint unasked."""

import json
import multiprocessing
import os

import pytest

from specdec.report import build, figures
from specdec.util import files

DOC = {"machine": {"backend": "eager"}}


def _figures(monkeypatch, drawn: set[str]):
    """Replace the plotting functions by ones that write a tiny file for each figure named in `drawn`."""
    def plot(name):
        def draw(*args):
            path = args[1]
            if name in drawn:
                path.write_bytes(name.encode())
            return name in drawn
        return draw

    for fn, name in (("plot_speedup", "speedup.png"), ("plot_per_prompt", "per-prompt.png"),
                     ("plot_attribution", "attribution.png")):
        monkeypatch.setattr(figures, fn, plot(name))


def test_a_later_report_without_a_figure_leaves_none_of_the_earlier_ones(tmp_path, monkeypatch):
    out = tmp_path / "report"
    _figures(monkeypatch, {"speedup.png", "per-prompt.png", "attribution.png"})
    build.write(DOC, out, "first")
    out.joinpath("repeat-2").mkdir()
    out.joinpath("repeat-2", "report.json").write_text("{}")
    out.joinpath("notes.txt").write_text("mine")
    _figures(monkeypatch, {"speedup.png"})
    paths = build.write(DOC, out, "second")
    assert [p.name for p in paths] == ["report.md", "speedup.png", "report.json"]
    # this run's files, and what is not a report file (a repeat folder, the user's own) kept as it was
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "repeat-2", "report.json", "report.md",
                                                    "speedup.png"]
    assert out.joinpath("report.md").read_text() == "second" and out.joinpath("notes.txt").read_text() == "mine"
    assert out.joinpath("repeat-2", "report.json").read_text() == "{}"
    assert [p.name for p in tmp_path.iterdir()] == ["report"]  # no temporary folder left beside it


def test_an_interrupted_report_leaves_the_earlier_one_whole(tmp_path, monkeypatch):
    out = tmp_path / "report"
    _figures(monkeypatch, {"speedup.png", "per-prompt.png"})
    build.write(DOC, out, "first")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "plot_per_prompt", interrupted)
    with pytest.raises(KeyboardInterrupt):
        build.write(DOC, out, "second")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["report"]


def test_a_report_written_into_the_working_directory_leaves_the_process_in_it(tmp_path, monkeypatch):
    out = tmp_path / "report"
    out.mkdir()
    monkeypatch.chdir(out)
    _figures(monkeypatch, set())
    build.write(DOC, ".", "here")
    assert os.path.samefile(os.getcwd(), out) and (out / "report.md").read_text() == "here"


def test_swap_folder_replaces_a_folder_whole(tmp_path):
    old, new = tmp_path / "f", tmp_path / ".f-new"
    old.mkdir()
    (old / "a").write_text("old a")
    (old / "b").write_text("old b")
    new.mkdir()
    (new / "a").write_text("new a")
    files.swap_folder(new, old)
    assert [p.name for p in tmp_path.iterdir()] == ["f"] and [p.name for p in old.iterdir()] == ["a"]
    assert (old / "a").read_text() == "new a"


def test_a_swapped_in_folder_keeps_the_old_ones_permissions_not_mkdtemps(tmp_path):
    old, new = tmp_path / "f", tmp_path / ".f-new"
    old.mkdir()
    old.chmod(0o750)
    new.mkdir(mode=0o700)
    files.swap_folder(new, old)
    assert old.stat().st_mode & 0o777 == 0o750


def test_swap_folder_without_an_atomic_exchange_still_ends_with_the_new_folder(tmp_path, monkeypatch):
    monkeypatch.setattr(files, "_exchange", lambda a, b: False)
    test_swap_folder_replaces_a_folder_whole(tmp_path)


def _append_many(cache: str, start: int) -> None:
    os.environ["XDG_CACHE_HOME"] = cache
    from specdec.measure import machine_record

    for i in range(start, start + 20):
        machine_record.append({"cpu": "test"}, {"i": i})


def test_two_processes_appending_to_the_record_lose_nothing(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    from specdec.measure import machine_record

    ctx = multiprocessing.get_context("fork")
    procs = [ctx.Process(target=_append_many, args=(str(tmp_path), s)) for s in (0, 100)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    assert [p.exitcode for p in procs] == [0, 0]
    entries = json.loads(machine_record.path().read_text())[machine_record.key({"cpu": "test"})]
    assert sorted(e["i"] for e in entries) == list(range(20)) + list(range(100, 120))


def test_train_without_out_writes_beside_the_working_directory_not_over_the_shipped_target(tmp_path, monkeypatch,
                                                                                        capsys):
    from specdec import cli
    from specdec.model import train

    shipped = train.shipped_path("target")
    before = shipped.read_bytes()
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", "--steps", "1", "--batch", "2"]) == 0
    out = capsys.readouterr()
    assert out.out.startswith("wrote specdec-train/target.pt (sha256 ")
    assert f"copy it over {shipped} to ship it" in out.err
    assert (tmp_path / "specdec-train" / "target.pt").is_file() and shipped.read_bytes() == before


def _tiny():
    from specdec.model.gpt import GPT, GPTConfig

    return GPT(GPTConfig(n_layer=1, n_head=2, n_embd=32, context=32))


def test_export_replaces_an_older_folder_whole_and_keeps_it_when_the_export_fails(tmp_path, monkeypatch):
    pytest.importorskip("transformers")
    from specdec.model import export_hf

    folder = tmp_path / "target"
    folder.mkdir()
    (folder / "stale.bin").write_text("an older export's file")

    def failing(model):
        raise RuntimeError("injected: the export fails half-way")

    with monkeypatch.context() as m:
        m.setattr(export_hf, "to_gpt2", failing)
        with pytest.raises(RuntimeError, match="injected"):
            export_hf.save_folder(_tiny(), folder)
    assert [p.name for p in folder.iterdir()] == ["stale.bin"] and [p.name for p in tmp_path.iterdir()] == ["target"]
    export_hf.save_folder(_tiny(), folder)
    names = {p.name for p in folder.iterdir()}
    assert "stale.bin" not in names and "config.json" in names and [p.name for p in tmp_path.iterdir()] == ["target"]
