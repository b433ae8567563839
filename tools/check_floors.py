"""Check the version floors pyproject states for the optional extras: install exactly them and run their tests.

For each extra (hf, onnx, llamacpp), in a fresh virtual environment of its own: torch==TORCH first (the CPU build, from
pip's configured sources), then every requirement of the extra pinned to its stated minimum (`>=X` becomes
`==X`), then this package with its core dependencies and pytest, and the extra's tests (TESTS). One line per
extra on stdout: the pins, and the test result or the step that failed. Exit 0 when every extra passed.

    python tools/check_floors.py                      # every extra, venvs under a temporary folder
    python tools/check_floors.py --extra onnx --pin onnxruntime==1.22.0 --keep /tmp/floors

--pin NAME==VERSION tries a candidate floor (before pyproject is changed to state it); --keep keeps the venvs.
It reads pyproject.toml and runs the tests of the checkout it sits in. Needs network or a local package index
for the pins; it takes minutes (torch is the bulk of each environment).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
TORCH = "2.13.0"  # the torch the project is developed and measured with
TESTS = {
    "hf": ["tests/model/test_hf.py", "tests/cli/test_cli_hf.py", "tests/engines/test_engine_hf.py",
           "tests/test_versions.py"],
    "onnx": ["tests/model/test_backend_onnx.py", "tests/test_versions.py"],
    "llamacpp": ["tests/model/test_export_gguf.py", "tests/engines/test_engine_llamacpp.py",
                 "tests/engines/test_engine_openai_llamacpp.py"],
}
TEST_TOOLS = ["pytest>=7.4", "hypothesis>=6.80"]


def floors(extra: str, pins: dict[str, str]) -> list[str]:
    """The extra's requirements with each `>=X` pinned to `==X` (or to the --pin given for that name)."""
    doc = tomllib.loads((ROOT / "pyproject.toml").read_text())
    out = []
    for req in doc["project"]["optional-dependencies"][extra]:
        name, _, floor = req.partition(">=")
        version = pins.get(_norm(name)) or floor.strip()
        out.append(f"{name.strip()}=={version}" if version else name.strip())
    return out


def _norm(name: str) -> str:
    return name.strip().lower().replace("_", "-")


def run(cmd: list[str], log: Path) -> bool:
    """Run cmd, its output appended to log; True on exit 0."""
    with open(log, "a") as f:
        f.write(f"$ {' '.join(cmd)}\n")
        f.flush()
        return subprocess.run(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT).returncode == 0


def check(extra: str, pins: dict[str, str], base: Path) -> tuple[bool, str]:
    """(passed, one line) for one extra, its venv and log under base/extra."""
    env, log = base / extra, base / f"{extra}.log"
    reqs = floors(extra, pins)
    py, pip = env / "bin" / "python", [str(env / "bin" / "python"), "-m", "pip", "install", "-q"]
    steps = [("venv", [sys.executable, "-m", "venv", str(env)]),
             ("torch", pip + [f"torch=={TORCH}"]),
             ("the extra's floors", pip + reqs + [f"torch=={TORCH}"]),
             ("the package", pip + ["--no-deps", "-e", str(ROOT)]),
             ("core dependencies and test tools", pip + _core() + reqs + [f"torch=={TORCH}"] + TEST_TOOLS)]
    for what, cmd in steps:
        if not run(cmd, log):
            return False, f"{extra}: {' '.join(reqs)}: FAILED to install {what} (see {log})"
    freeze = subprocess.run([str(py), "-m", "pip", "freeze"], capture_output=True, text=True).stdout
    installed = {_norm(a): b for a, _, b in (line.partition("==") for line in freeze.splitlines())}
    for req in reqs:  # the resolver must not have moved a floor to satisfy another requirement
        name, _, version = req.partition("==")
        name = name.split("[")[0]  # llama-cpp-python[server]: the distribution's own name
        if version and installed.get(_norm(name)) != version:
            return False, f"{extra}: {req} installed as {installed.get(_norm(name))} (see {log})"
    proc = subprocess.run([str(py), "-m", "pytest", "-q", "-p", "no:cacheprovider", *TESTS[extra]],
                          capture_output=True, text=True, cwd=ROOT)
    with open(log, "a") as f:
        f.write(proc.stdout + proc.stderr)
    tail = (proc.stdout.strip().splitlines() or ["no output"])[-1].strip("= ")
    return proc.returncode == 0, f"{extra}: {' '.join(reqs)}: {'ok' if proc.returncode == 0 else 'FAILED'}: {tail}"


def _core() -> list[str]:
    return list(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--extra", choices=sorted(TESTS) + ["all"], default="all")
    p.add_argument("--pin", action="append", default=[], metavar="NAME==VERSION",
                   help="try this version of one requirement instead of its stated floor")
    p.add_argument("--keep", default=None, help="folder for the venvs and logs (default: a temporary one, removed)")
    args = p.parse_args(argv)
    pins = {}
    for text in args.pin:
        name, sep, version = text.partition("==")
        if not sep or not version:
            p.error(f"--pin {text!r}: give NAME==VERSION")
        pins[_norm(name)] = version.strip()
    extras = sorted(TESTS) if args.extra == "all" else [args.extra]
    with tempfile.TemporaryDirectory(prefix="floors-") as tmp:
        base = Path(args.keep) if args.keep else Path(tmp)
        base.mkdir(parents=True, exist_ok=True)
        results = [check(extra, pins, base) for extra in extras]
    for _, line in results:
        print(line)
    return 0 if all(ok for ok, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main())
