"""`specdec build-server`: llama.cpp's `llama-server`, built from the llama.cpp source that the llama-cpp-python
sdist vendors whole (`vendor/llama.cpp`, `tools/server` included), and cached outside the checkout.

llama-cpp-python's own server serialises requests (no parallel slots, no /metrics), so it cannot show batching;
the real server can, and the same source tree the installed Python package was built from is enough to build
it. The version is the installed llama-cpp-python's (or one given), so the server and the Python bindings run
the same llama.cpp.

Layout under `cache_dir()/llama-server/`:
- `VERSION/llama-server` and `VERSION/build.json` (flags, seconds): the cache entry. It appears in one rename
  of a complete folder, after the binary answered `--version`, so a build that fails or is interrupted never
  leaves a half-built entry, and an entry that exists is whole.
- `.work-VERSION/` (the sdist, the unpacked source, cmake's build folder and its log): kept, so a second try
  after a failure resumes where cmake stopped instead of starting over.
Two processes building the same version take turns (a lock), and the second finds the first's entry.

Where the installed llama-cpp-python is the version asked for, llama.cpp is not compiled a second time: its wheel
already holds ggml, llama, the common library and mtmd as shared libraries (`lib/` beside the package, with
every name the link asks for), most of a whole build's compile (docs/engines.md). Only the server's
own code is compiled (`LINKED_FLAGS`, each target's `/fast` rule: no dependency rebuilt), linked against copies
of those libraries, and the entry holds the binary with the copies beside it (its run path `$ORIGIN`), so a venv
that is removed takes nothing the entry needs. Where that cannot run (another version, a wheel without those
libraries) or fails, the whole `llama-server` target is built instead, static (`CMAKE_FLAGS`: no library beside
it), without curl or OpenSSL (models are local files); build.json says which.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from specdec.util.errors import Failure, InputError, tail_of
from specdec.util.files import cache_dir, locked, write_atomic

PACKAGE = "llama-cpp-python"
BINARY = "llama-server"
CMAKE_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF",
               "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF", "-DBUILD_SHARED_LIBS=OFF")
# The server's code alone, against the wheel's libraries: the wheel's own options (shared libraries, the common
# library, no curl; subprocess support is llama.cpp's default on Linux, as in the wheel) and the server's tools.
LINKED_FLAGS = ("-DCMAKE_BUILD_TYPE=Release", "-DBUILD_SHARED_LIBS=ON", "-DLLAMA_BUILD_COMMON=ON",
                "-DLLAMA_BUILD_TOOLS=ON", "-DLLAMA_BUILD_SERVER=ON", "-DLLAMA_BUILD_TESTS=OFF",
                "-DLLAMA_BUILD_EXAMPLES=OFF", "-DLLAMA_BUILD_APP=OFF", "-DLLAMA_CURL=OFF", "-DLLAMA_OPENSSL=OFF",
                "-DCMAKE_BUILD_RPATH=$ORIGIN")
# What the server links, each built by its `/fast` rule in this order (the UI's assets first: generated sources)
LINKED_TARGETS = ("cpp-httplib", "llama-ui", "llama-common-base", "server-context", "llama-server-impl", BINARY)
WHEEL_LIBRARIES = ("llama-common", "mtmd", "llama", "ggml", "ggml-base", "ggml-cpu")  # lib<name>.so.* in the wheel
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_PROGRESS = re.compile(r"^\[\s*(\d+)%\]")


class BuildError(Failure):
    """The build failed although its inputs were fine (the sdist not downloadable, cmake failing, a binary that
    does not run): what failed, the last lines of its log and the log's path; the CLI's exit 1. What the user
    gave or lacks (a version that is not one, --jobs 0, no cmake, llama-cpp-python not installed) is an
    InputError instead: one line and exit 2 before anything is downloaded or compiled."""


def installed_version() -> str:
    """The installed llama-cpp-python's version; InputError when it is not installed."""
    from importlib import metadata

    try:
        return metadata.version(PACKAGE)
    except metadata.PackageNotFoundError:
        raise InputError(f"{PACKAGE} is not installed, so there is no version to build the server of "
                         "(pip install 'specdec-bench[llamacpp]', or give --version X.Y.Z)") from None


def check_version(version: str) -> str:
    if not _VERSION.match(version or ""):
        raise InputError(f"--version {version!r} is not a llama-cpp-python release (allowed: X.Y.Z, e.g. 0.3.36)")
    return version


def root() -> Path:
    return cache_dir() / "llama-server"


def entry(version: str) -> Path:
    """The cache entry's folder for `version` (it may not exist)."""
    return root() / version


def cached(version: str) -> Path | None:
    """The cached binary for `version`, or None when it was never built here."""
    path = entry(version) / BINARY
    return path if path.is_file() and os.access(path, os.X_OK) else None


def find_binary(version: str | None = None) -> Path | None:
    """The cached binary for `version` (default: the installed llama-cpp-python's), or None: what the launcher
    and the tests use without building."""
    try:
        return cached(check_version(version) if version else installed_version())
    except InputError:
        return None


def build(version: str | None = None, jobs: int = 2, log: Callable[[str], None] | None = None) -> tuple[Path, bool]:
    """(the binary, whether it was built now): from the cache when there, else built and installed there.
    Progress on `log` (default stderr); InputError (bad input, before any work) or BuildError (a failed step),
    with the cache left without that entry."""
    log = log or (lambda line: print(line, file=sys.stderr, flush=True))
    version = check_version(version) if version else installed_version()
    if jobs < 1:
        raise InputError(f"--jobs must be at least 1, got {jobs}")
    found = cached(version)
    if found:
        return found, False
    missing = [tool for tool in ("cmake", "c++") if shutil.which(tool) is None]
    if missing:
        raise InputError(f"building {BINARY} needs {' and '.join(missing)} on PATH (apt-get install cmake g++)")
    with locked(root() / f"{version}.build"):
        found = cached(version)  # another process built it while this one waited for the lock
        if found:
            return found, False
        work = root() / f".work-{version}"
        work.mkdir(parents=True, exist_ok=True)
        started = time.monotonic()
        source = _source(version, work, log)
        libraries, how = wheel_libraries(version), "static"
        if libraries is not None:
            try:
                binary, how = _compile_linked(source, work, jobs, log, libraries), "linked"
            except BuildError as exc:  # the wheel's libraries did not serve: the whole build, as without them
                log(f"build-server: linking against llama-cpp-python's libraries failed ({exc}); building "
                    f"llama.cpp whole instead")
        if how == "static":
            binary = _compile(source, work, jobs, log)
        seconds = time.monotonic() - started
        path = _install(version, binary, seconds, how)
        log(f"build-server: installed {path} ({seconds:.0f} s, {how})")
        return path, True


def wheel_libraries(version: str) -> Path | None:
    """The folder of the installed llama-cpp-python's shared libraries (`lib/` beside the package) when it is
    `version` and holds every library the server links (`WHEEL_LIBRARIES`), else None."""
    from importlib import metadata

    try:
        dist = metadata.distribution(PACKAGE)
    except metadata.PackageNotFoundError:
        return None
    if dist.version != version:
        return None
    names = {Path(str(f)).name for f in dist.files or () if str(f).startswith("lib/lib")}
    if not all(any(n.startswith(f"lib{lib}.so") for n in names) for lib in WHEEL_LIBRARIES):
        return None
    folder = Path(dist.locate_file("lib"))
    return folder if folder.is_dir() else None


def _source(version: str, work: Path, log) -> Path:
    """The unpacked vendored llama.cpp (`work/src/vendor/llama.cpp`), downloaded and unpacked once."""
    src = work / "src"
    tree = src / "vendor" / "llama.cpp"
    if (tree / "CMakeLists.txt").is_file():
        return tree
    sdists = sorted((work / "sdist").glob(f"llama_cpp_python-{version}.tar.gz"))
    if not sdists:
        log(f"build-server: pip download {PACKAGE}=={version} (source distribution)")
        cmd = [sys.executable, "-m", "pip", "download", "--no-binary", ":all:", "--no-deps",
               "--disable-pip-version-check", f"{PACKAGE}=={version}", "-d", str(work / "sdist")]
        pip_log = work / "download.log"
        with open(pip_log, "w") as out:
            done = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, text=True)
        sdists = sorted((work / "sdist").glob(f"llama_cpp_python-{version}.tar.gz"))
        if done.returncode != 0 or not sdists:
            raise BuildError(f"pip could not download the {PACKAGE} {version} sdist (pip exited {done.returncode})",
                             tail_of(pip_log), pip_log)
    log(f"build-server: unpacking {sdists[0].name}")
    tmp = Path(tempfile.mkdtemp(dir=work, prefix=".src-"))
    try:
        with tarfile.open(sdists[0]) as tar:
            if hasattr(tarfile, "data_filter"):  # Python 3.10.12+: no path outside tmp, no device files
                tar.extractall(tmp, filter="data")
            else:
                tar.extractall(tmp)
        top = [p for p in tmp.iterdir() if p.is_dir()]
        if len(top) != 1 or not (top[0] / "vendor" / "llama.cpp" / "CMakeLists.txt").is_file():
            raise BuildError(f"{sdists[0]} holds no vendor/llama.cpp/CMakeLists.txt: not a llama-cpp-python sdist "
                             "(remove it to download it again)")
        shutil.rmtree(src, ignore_errors=True)
        os.replace(top[0], src)  # whole or not at all: a half-unpacked tree is never taken for the source
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return tree


def _compile(tree: Path, work: Path, jobs: int, log) -> Path:
    """cmake configure and build of the one target, static; the full output in work/build.log."""
    build_dir, log_path = work / "build", work / "build.log"
    _run_steps([("configure", ["cmake", "-S", str(tree), "-B", str(build_dir), *CMAKE_FLAGS]),
                ("build", ["cmake", "--build", str(build_dir), "--target", BINARY, f"-j{jobs}"])], log_path, log)
    binary = build_dir / "bin" / BINARY
    if not binary.is_file():
        raise BuildError(f"cmake built no {binary}", tail_of(log_path), log_path)
    return binary


def _run_steps(steps: list[tuple[str, list[str]]], log_path: Path, log) -> None:
    """Each (step, command) in turn, their output into `log_path`; a BuildError at the first that fails."""
    with open(log_path, "w") as out:
        for step, cmd in steps:
            log(f"build-server: cmake {step} ({' '.join(cmd[1:])})")
            if _run_logged(cmd, out, log) != 0:
                out.flush()  # the log is read back below: what cmake said last is still in this file's buffer
                raise BuildError(f"cmake {step} failed ({_last_error(log_path)})", tail_of(log_path), log_path)


def _compile_linked(tree: Path, work: Path, jobs: int, log, libraries: Path) -> Path:
    """The server's own code (`LINKED_TARGETS`) compiled and linked against copies of the wheel's libraries put
    where llama.cpp's build would have written its own (`bin/`); the full output in work/build-linked.log."""
    build_dir, log_path = work / "build-linked", work / "build-linked.log"
    (build_dir / "bin").mkdir(parents=True, exist_ok=True)
    for lib in libraries.iterdir():
        if lib.name.startswith("lib") and ".so" in lib.name:
            target = build_dir / "bin" / lib.name
            target.unlink(missing_ok=True)
            shutil.copy2(lib, target, follow_symlinks=False)
    steps = [("configure", ["cmake", "-S", str(tree), "-B", str(build_dir), *LINKED_FLAGS]),
             ("UI assets", ["cmake", "--build", str(build_dir), "--target", "llama-ui-assets"])]
    steps += [(target, ["cmake", "--build", str(build_dir), "--target", f"{target}/fast", f"-j{jobs}"])
              for target in LINKED_TARGETS]
    _run_steps(steps, log_path, log)
    binary = build_dir / "bin" / BINARY
    if not binary.is_file():
        raise BuildError(f"cmake built no {binary}", tail_of(log_path), log_path)
    return binary


def _run_logged(cmd: list[str], out, log) -> int:
    """Run `cmd`, its output into `out`; every 10 % of cmake's progress said on `log`."""
    shown = -10
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            out.write(line)
            m = _PROGRESS.match(line)
            if m and int(m.group(1)) >= shown + 10:
                shown = int(m.group(1))
                log(f"build-server: {shown}%")
    return proc.returncode


def _last_error(log_path: Path) -> str:
    lines = log_path.read_text(errors="replace").splitlines()
    errors = [line.strip() for line in lines if "error" in line.lower()]
    return (errors or lines or ["no output"])[-1][:200]


def _install(version: str, binary: Path, seconds: float, how: str = "static") -> Path:
    """Copy the binary (and, linked, the shared libraries beside it in its build folder) into a new folder beside
    the entry, check it runs, then rename the folder into place."""
    tmp = Path(tempfile.mkdtemp(dir=root(), prefix=f".{version}-"))
    try:
        shutil.copy2(binary, tmp / BINARY)
        if how == "linked":  # its run path is $ORIGIN: the libraries it was linked against go beside it
            for lib in binary.parent.iterdir():
                if lib.name.startswith("lib") and ".so" in lib.name:
                    shutil.copy2(lib, tmp / lib.name, follow_symlinks=False)
        done = subprocess.run([str(tmp / BINARY), "--version"], capture_output=True, text=True, timeout=60)
        if done.returncode != 0:
            said = (done.stdout + done.stderr).strip().splitlines()
            raise BuildError(f"the built {binary} does not run (`--version` exited {done.returncode})", said[-10:])
        said = (done.stdout + done.stderr).strip().splitlines()
        write_atomic(tmp / "build.json", json.dumps({
            "version": version, "how": how, "cmake_flags": list(LINKED_FLAGS if how == "linked" else CMAKE_FLAGS),
            "build_seconds": round(seconds, 1), "server_version": said[0] if said else None}, indent=2) + "\n")
        os.chmod(tmp / "build.json", 0o644)  # write_atomic's temporary file is private; the entry is not
        os.chmod(tmp, 0o755)
        if entry(version).exists():  # an entry without its binary (removed by hand): replaced, under the lock
            shutil.rmtree(entry(version))
        os.replace(tmp, entry(version))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return entry(version) / BINARY
