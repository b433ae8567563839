"""Runs `python -m specdec.cli` many times while paying for the imports once.

Run as a script: reads a JSON list of [argv, cwd] on stdin and writes a JSON list of [exit code, stdout,
stderr] on stdout. This process imports specdec and what its commands import (torch, numpy, scipy, onnx,
transformers: seconds) and runs nothing else; each run
is a forked child that executes the module as `python -m specdec.cli` does (runpy, as __main__) in its own
working directory, with its own stdout and stderr. Only the CLI's own exits (SystemExit) are caught, to skip
the interpreter's teardown; any other exception reaches the interpreter's top level, which prints the
traceback and exits 1, as it would for a user.
"""

import json
import os
import runpy
import sys
import tempfile

import importlib

import specdec  # noqa: F401  the expensive imports, once

# What the commands import lazily (so that `specdec --help` stays quick), imported here once instead of in
# every child: the command modules and the optional libraries behind the backends and the hf: adapter. Only
# the `__main__` module is left for runpy to execute fresh in each child, as `python -m specdec.cli` does.
for _name in ("specdec.cli.commands", "specdec.cli.report_cmd", "specdec.cli.engine_cmd", "specdec.cli.ab_cmd",
              "specdec.report.build", "specdec.model.onnx_graph", "specdec.model.backend_onnx", "transformers"):
    try:
        importlib.import_module(_name)
    except ImportError:  # an extra that is not installed: its cases fail the same way in the child
        pass


def run(argv: list[str], cwd: str) -> list:
    out, err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child: becomes `python -m specdec.cli ARGV` run in cwd
        os.chdir(cwd)
        os.dup2(out.fileno(), 1)
        os.dup2(err.fileno(), 2)
        sys.argv = ["specdec", *argv]
        try:
            runpy.run_module("specdec.cli", run_name="__main__", alter_sys=True)
            code = 0  # its main block returned without exiting
        except SystemExit as exc:  # only the CLI's own exits: anything else goes on to the interpreter
            code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
            if not isinstance(exc.code, (int, type(None))):
                print(exc.code, file=sys.stderr)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # skip tearing down torch in every child (most of a second each)
    _, status = os.waitpid(pid, 0)
    out.seek(0)
    err.seek(0)
    return [os.waitstatus_to_exitcode(status), out.read().decode(), err.read().decode()]


if __name__ == "__main__":
    cases = json.load(sys.stdin)
    results = [run(argv, cwd) for argv, cwd in cases]
    sys.stdout.write(json.dumps(results))
