"""A step that fails on good input is not bad input: a compile that stops and a server that exits before it answers
are exit 1 with what failed, the last lines of its log and the log's path (kept), while bad input stays one line
and exit 2 before any work. Fake tools stand in for cmake and llama-server: each exits at once, saying what a real
one would."""

import stat
import subprocess

import pytest

from specdec.cli import main
from specdec.engines import llama_server as ls
from specdec.engines import server_build
from specdec.util.errors import Failure, InputError, tail_of


def _script(path, body: str):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\n" + body)
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


def _failed(err: str, command: str) -> tuple[str, list[str], str]:
    """(the summary, the log's lines shown, the log's path) of a failure's message, checked for its shape: it
    ends stderr, after any progress lines."""
    lines = err.splitlines()
    lines = lines[next(i for i, line in enumerate(lines) if line.startswith(f"specdec {command}: failed: ")):]
    assert lines[0].startswith(f"specdec {command}: failed: ") and lines[-1].startswith("  full log: ")
    shown = [line.removeprefix("  | ") for line in lines[1:-1]]
    assert all(line.startswith("  | ") for line in lines[1:-1]) and "Traceback" not in err
    return lines[0].removeprefix(f"specdec {command}: failed: "), shown, lines[-1].removeprefix("  full log: ")


@pytest.mark.parametrize("cls", [server_build.BuildError, ls.ServerStartError])
def test_a_failed_build_or_start_is_a_failure_not_bad_input(cls):
    assert issubclass(cls, Failure) and not issubclass(cls, InputError) and not issubclass(cls, ValueError)


def test_a_log_shows_its_last_non_blank_lines(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("".join(f"line {i}\n\n" for i in range(15)))
    assert tail_of(log) == [f"line {i}" for i in range(5, 15)]
    assert tail_of(log, 2) == ["line 13", "line 14"] and tail_of(tmp_path / "none.log") == []


# cmake as a compiler stops: configure writes what it did and an error, and exits 1
CMAKE = "echo \"-- The C compiler identification is GNU\"\necho \"CMake Error at CMakeLists.txt:12: boom\"\nexit 1\n"


def test_a_failed_compile_is_exit_1_with_its_logs_last_lines_and_path(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    tools = tmp_path / "bin"
    _script(tools / "cmake", CMAKE)
    _script(tools / "c++", "exit 0\n")
    monkeypatch.setenv("PATH", f"{tools}:/usr/bin:/bin")
    work = tmp_path / "cache" / "llama-server" / ".work-9.9.4"
    (work / "src" / "vendor" / "llama.cpp").mkdir(parents=True)  # the unpacked source: nothing is downloaded
    (work / "src" / "vendor" / "llama.cpp" / "CMakeLists.txt").write_text("")
    with pytest.raises(SystemExit) as done:
        main(["build-server", "--version", "9.9.4"])
    summary, shown, log = _failed(capsys.readouterr().err, "build-server")
    assert done.value.code == 1
    assert summary == "cmake configure failed (CMake Error at CMakeLists.txt:12: boom)"
    assert shown == ["-- The C compiler identification is GNU", "CMake Error at CMakeLists.txt:12: boom"]
    assert log == str(work / "build.log") and tail_of(log) == shown  # the whole log, kept where it says
    assert server_build.find_binary("9.9.4") is None and not (work.parent / "9.9.4").exists()


def test_bad_build_input_is_still_one_line_and_exit_2_before_any_work(tmp_path, monkeypatch, capsys):
    """No cmake on PATH: the user's to install, said before anything is downloaded (nothing appears in the cache)."""
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(SystemExit) as done:
        main(["build-server", "--version", "9.9.3"])
    err = capsys.readouterr().err
    assert done.value.code == 2 and err.count("\n") == 1 and "needs cmake and c++ on PATH" in err
    assert not (tmp_path / "cache").exists()


SERVER = "echo \"llama_model_load: loading model\"\necho \"error: invalid magic number\"\nexit 3\n"


def test_a_server_that_exits_at_once_is_exit_1_with_its_logs_last_lines_and_path(tmp_path, capsys):
    fake = _script(tmp_path / "llama-server", SERVER)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with pytest.raises(SystemExit) as done:
        main(["load", "--server", str(fake), "--model", str(gguf), "--draft-model", str(gguf), "--concurrency", "1",
              "--out", str(tmp_path / "out")])
    summary, shown, log = _failed(capsys.readouterr().err, "load")
    assert done.value.code == 1
    assert summary.startswith(f"llama-server exited with 3 before /health answered (command: {fake} -m {gguf}")
    assert shown == ["llama_model_load: loading model", "error: invalid magic number"]
    assert tail_of(log) == shown  # kept after the server's own folder is gone
    assert not (tmp_path / "out").exists()  # nothing measured, nothing written


def test_a_server_that_never_answers_is_a_failure_with_its_log(tmp_path):
    """A server that never serves /health is stopped at the start timeout: a Failure whose log is kept (what it
    said by then is in it; how much that is depends on the machine, so only the file is checked)."""
    fake = _script(tmp_path / "llama-server", "echo \"still loading\"\nexec sleep 60\n")
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    server = ls.LlamaServer(fake, ls.ServerSpec(str(gguf), 1), start_timeout=0.5)
    with pytest.raises(ls.ServerStartError, match=r"did not answer /health within 0.5 s") as failed:
        server.start()
    assert not server.alive() and failed.value.log.is_file() and failed.value.tail == tail_of(failed.value.log)


def test_a_port_in_use_is_bad_input_before_any_start(tmp_path):
    import socket

    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    with socket.socket() as held:
        held.bind((ls.HOST, 0))
        held.listen()
        port = held.getsockname()[1]
        with pytest.raises(InputError, match=f"port {port} on 127.0.0.1 is in use") as bad:
            ls.LlamaServer(_script(tmp_path / "s", "exit 0\n"), ls.ServerSpec(str(gguf), 1), port=port)
    assert "\n" not in str(bad.value)


def test_the_installed_command_exits_1_on_a_failed_start(tmp_path):
    """The console script, in a subprocess, as a user meets it."""
    import sys
    from pathlib import Path

    fake = _script(tmp_path / "llama-server", SERVER)
    gguf = tmp_path / "m.gguf"
    gguf.write_bytes(b"GGUF")
    proc = subprocess.run([str(Path(sys.executable).with_name("specdec")), "load", "--server", str(fake), "--model",
                           str(gguf), "--draft-model", str(gguf), "--concurrency", "1", "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 1 and proc.stdout == "", proc.stderr
    _, shown, _ = _failed(proc.stderr, "load")
    assert shown[-1] == "error: invalid magic number"

