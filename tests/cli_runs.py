"""Runs `python -m specdec.cli` many times while paying for the imports once.

Run as a script: reads a JSON list of [argv, cwd] on stdin and writes a JSON list of [exit code, stdout,
stderr] on stdout. This process imports specdec (torch, numpy, scipy: seconds) and runs nothing else; each run
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

import specdec  # noqa: F401  the expensive imports, once (not specdec.cli: runpy must execute it fresh)


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
