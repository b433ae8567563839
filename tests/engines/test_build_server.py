"""`specdec build-server`: the cache (an entry appears whole or not at all), the bad inputs as one line and exit 2,
and the cached binary's own --help naming every flag the launcher passes."""

import os
import stat
import subprocess

import pytest

from specdec.cli import main
from specdec.engines import server_build
from specdec.engines.llama_server import ServerSpec

CACHED = server_build.find_binary()
NEEDS_BINARY = pytest.mark.skipif(CACHED is None, reason="no cached llama-server: run `specdec build-server` "
                                  "once (.ci/run does, before the tests)")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    return tmp_path / "llama-server"


def _fake_binary(path, rc=0):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f"#!/bin/sh\necho 'version: 1 (fake)'\nexit {rc}\n")
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return path


@pytest.mark.parametrize("argv,says", [(["--version", "latest"], "--version 'latest'"),
                                       (["--version", "0.3"], "allowed: X.Y.Z"),
                                       (["--jobs", "0"], "--jobs must be at least 1")])
def test_bad_input_is_one_line_and_exit_2(cache, capsys, argv, says):
    with pytest.raises(SystemExit) as done:
        main(["build-server", *argv])
    err = capsys.readouterr().err
    assert done.value.code == 2 and says in err and err.count("\n") == 1
    assert not cache.exists() or not any(cache.iterdir())


def test_a_cached_entry_is_used_without_building(cache, capsys, monkeypatch):
    binary = _fake_binary(cache / "9.9.9" / "llama-server")
    monkeypatch.setenv("PATH", "")  # no cmake, no compiler: nothing may be built
    assert main(["build-server", "--version", "9.9.9"]) == 0
    out = capsys.readouterr()
    assert out.out.strip() == str(binary) and "cached" in out.err
    assert server_build.find_binary("9.9.9") == binary


def test_no_cmake_is_one_line_before_anything_is_downloaded(cache, capsys, monkeypatch):
    monkeypatch.setenv("PATH", "")
    with pytest.raises(SystemExit) as done:
        main(["build-server", "--version", "9.9.8"])
    assert done.value.code == 2 and "needs cmake" in capsys.readouterr().err
    assert not (cache / "9.9.8").exists()


def test_a_failed_build_leaves_no_entry(cache, monkeypatch):
    monkeypatch.setattr(server_build.shutil, "which", lambda tool: "/usr/bin/" + tool)
    monkeypatch.setattr(server_build, "_source", lambda version, work, log: work / "src")

    def failing(tree, work, jobs, log):
        raise server_build.BuildError("cmake build failed (error: boom)", ["error: boom"], "x")

    monkeypatch.setattr(server_build, "_compile", failing)
    with pytest.raises(server_build.BuildError, match="boom"):  # a failure (exit 1), not bad input
        server_build.build("9.9.7", log=lambda line: None)
    assert not (cache / "9.9.7").exists() and server_build.find_binary("9.9.7") is None


def test_install_checks_the_binary_runs_then_renames_the_entry_in_whole(cache, tmp_path):
    cache.mkdir(parents=True)
    with pytest.raises(server_build.BuildError, match="does not run"):
        server_build._install("9.9.6", _fake_binary(tmp_path / "bad" / "llama-server", rc=1), 1.0)
    assert not (cache / "9.9.6").exists()
    assert [p.name for p in cache.iterdir()] == []  # no half-made folder left beside the entries
    path = server_build._install("9.9.6", _fake_binary(tmp_path / "good" / "llama-server"), 12.3)
    assert path == cache / "9.9.6" / "llama-server" and os.access(path, os.X_OK)
    assert '"build_seconds": 12.3' in (cache / "9.9.6" / "build.json").read_text()


@NEEDS_BINARY
def test_the_cached_binary_knows_every_flag_the_launcher_passes(tmp_path):
    said = subprocess.run([str(CACHED), "--help"], capture_output=True, text=True, timeout=60)
    text = said.stdout + said.stderr
    model = tmp_path / "m.gguf"
    model.write_bytes(b"")
    argv = ServerSpec(str(model), 4, "draft-simple", str(model), 4).argv(str(CACHED), 8080)
    for flag in (a for a in argv[1:] if a.startswith("-")):
        assert flag in text, flag
    for kind in ("draft-simple", "ngram-simple", "ngram-map-k", "ngram-mod", "ngram-cache"):
        assert kind in text


def test_the_wheels_libraries_serve_only_their_own_version():
    from importlib import metadata

    assert server_build.wheel_libraries("9.9.5") is None  # not the installed llama-cpp-python
    try:
        installed = metadata.version("llama_cpp_python")
    except metadata.PackageNotFoundError:
        pytest.skip("llama-cpp-python is not installed (the llamacpp extra)")
    folder = server_build.wheel_libraries(installed)
    if folder is not None:  # a wheel with the libraries the server links (a source build of it has them)
        names = [p.name for p in folder.iterdir()]
        assert all(any(n.startswith(f"lib{lib}.so") for n in names) for lib in server_build.WHEEL_LIBRARIES)


def _linked_build(tmp_path):
    """A fake linked build: its bin/ holds the binary, the server's own library and a wheel library's names."""
    bin_ = tmp_path / "build-linked" / "bin"
    binary = _fake_binary(bin_ / "llama-server")
    (bin_ / "libllama.so.0.5.0").write_bytes(b"\x7fELF")
    (bin_ / "libllama.so.0").symlink_to("libllama.so.0.5.0")
    (bin_ / "libllama-server-impl.so").write_bytes(b"\x7fELF")
    return binary


def test_a_linked_build_installs_the_libraries_beside_the_binary(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(server_build.shutil, "which", lambda tool: "/usr/bin/" + tool)
    monkeypatch.setattr(server_build, "_source", lambda version, work, log: work / "src")
    monkeypatch.setattr(server_build, "wheel_libraries", lambda version: tmp_path)
    monkeypatch.setattr(server_build, "_compile_linked", lambda tree, work, jobs, log, libs: _linked_build(tmp_path))
    monkeypatch.setattr(server_build, "_compile", lambda *a: pytest.fail("the whole build ran"))
    lines = []
    path, built = server_build.build("9.9.4", log=lines.append)
    entry = cache / "9.9.4"
    assert built and path == entry / "llama-server"
    assert sorted(p.name for p in entry.iterdir()) == ["build.json", "libllama-server-impl.so", "libllama.so.0",
                                                        "libllama.so.0.5.0", "llama-server"]
    assert (entry / "libllama.so.0").is_symlink() and os.readlink(entry / "libllama.so.0") == "libllama.so.0.5.0"
    assert '"how": "linked"' in (entry / "build.json").read_text() and lines[-1].endswith(", linked)")


def test_a_failed_linked_build_falls_back_to_the_whole_build(cache, tmp_path, monkeypatch):
    monkeypatch.setattr(server_build.shutil, "which", lambda tool: "/usr/bin/" + tool)
    monkeypatch.setattr(server_build, "_source", lambda version, work, log: work / "src")
    monkeypatch.setattr(server_build, "wheel_libraries", lambda version: tmp_path)

    def failing(tree, work, jobs, log, libs):
        raise server_build.BuildError("cmake server-context failed (error: undefined reference)", [], "x")

    monkeypatch.setattr(server_build, "_compile_linked", failing)
    monkeypatch.setattr(server_build, "_compile", lambda tree, work, jobs, log: _fake_binary(tmp_path / "s" / "llama-server"))
    lines = []
    path, built = server_build.build("9.9.3", log=lines.append)
    assert built and sorted(p.name for p in path.parent.iterdir()) == ["build.json", "llama-server"]
    assert '"how": "static"' in (path.parent / "build.json").read_text()
    assert any("linking against llama-cpp-python's libraries failed (cmake server-context failed" in line
               for line in lines)
