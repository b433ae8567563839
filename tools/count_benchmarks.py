"""The pytest-benchmark suite with every benchmark's work counted: instructions per call in its extra_info.

    python tools/count_benchmarks.py [-k onnx] [pytest options ...]      # e.g. -k "onnx and bigram"

Runs `pytest tests/benchmarks --benchmark-autosave --benchmark-storage .benchmarks/work` as ONE counted process
(`specdec.measure.work.work.popen`: under callgrind where the machine has no hardware counter; layout fixed, hash seed
0, a small fixed environment) with this file loaded as a pytest plugin (`-p count_benchmarks`). The plugin
counts each benchmarked call after pytest-benchmark has run it, as pytest-codspeed does for CodSpeed, with
`work.count_calls` (warmed up, the fewest of several counted calls). The saved run's extra_info holds:

  * `instructions`: `Count.fewest`, the verdict figure: instructions outside the allocators and the type
    cache's misses (docs/work.md);
  * `alloc`: `Count.alloc`, the allocators' own instructions (None from the hardware counter: it cannot split);
  * `instructions_spread` and `counter` (the counter's name, `work.NAMES`).

One counter serves the whole process: callgrind numbers its dumps once per process, and each region is found by
its own tag (`work.find_dump`), so every benchmark reads its own dumps. The benchmarked callable itself (bound to
its arguments) is what is counted, so a `prepare` or `again` attribute on it is honoured as ab honours its rows'
(`work.count_calls`); the suite's own callables have none because each puts its state back itself (a draft
rolls back, a generation starts from its prompt and seed). `benchmark.pedantic` calls are timed, not counted.

The checkout is seen through a link of fixed length in a temporary folder (`/tmp/specdec-work-XXXXXXXX/A`, as
`specdec ab` shows its revisions: `work_pool.count_trees`), so a checkout's depth does not move its counts.
Counting runs at 1 thread (callgrind adds every thread's instructions; the hardware counter counts the calling
thread's): a suite whose THREADS is not 1 is refused (one line, exit 2). Compare two such runs by those keys
(the instructions are in each run's JSON). The times of a counted run are taken under valgrind and are not this
machine's: keep the storage apart (the default here) from timed runs'. Each benchmark runs a single round.
"""

from __future__ import annotations

import ast
import functools
import os
import signal
import sys
import tempfile
from pathlib import Path

# Not resolved: loaded as the plugin, this file is seen through the link, and the checkout must be too.
ROOT = Path(os.path.abspath(__file__)).parents[1]
SUITE = ROOT / "tests" / "benchmarks"
if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
elif os.environ.get("SPECDEC_WORK_COUNTER"):  # the plugin, in the counted pytest run from the link
    # `python -m pytest` put the working directory first, and getcwd() sees through the link: without it the
    # checkout is imported through the link (PYTHONPATH), as ab's workers import theirs.
    sys.path[:] = [p for p in sys.path if p == str(ROOT) or os.path.realpath(p or ".") != os.path.realpath(ROOT)]

import pytest  # noqa: E402

from specdec.measure.work import work  # noqa: E402

LINK = "A"  # the checkout's link in the temporary folder: the name ab gives its first revision
WARMUP, CALLS = 4, 3  # per benchmark: few, as the suite's generations take seconds each under callgrind


def suite_threads(suite: Path) -> object:
    """The suite conftest's `THREADS = ...` value, read without importing it (that would import torch), or None."""
    conftest = suite / "conftest.py"
    if not conftest.exists():
        return None
    for node in ast.parse(conftest.read_text()).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "THREADS" for t in node.targets):
            try:
                return ast.literal_eval(node.value)
            except ValueError:
                return ast.unparse(node.value)
    return None


def main(argv: list[str], suite: Path = SUITE) -> int:
    threads = suite_threads(suite)
    if threads != 1:
        print(f"count_benchmarks: {suite / 'conftest.py'} sets THREADS = {threads!r}; counting needs 1 (callgrind "
              "adds every thread's instructions, perf counts only the calling thread's)", file=sys.stderr)
        return 2
    avail = work.probe()
    if avail.kind is None:
        print(f"count_benchmarks: no work counter here: {avail.reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="specdec-work-") as tmp:
        link = Path(tmp) / LINK
        link.symlink_to(ROOT, target_is_directory=True)
        suite = Path(os.path.abspath(suite))
        path = link / suite.relative_to(ROOT) if suite.is_relative_to(ROOT) else suite
        # -p no:xdist: one counted process (xdist's workers would run outside valgrind and count nothing)
        cmd = [sys.executable, "-m", "pytest", str(path), "-p", "no:cacheprovider", "-p", "no:xdist",
               "-p", "count_benchmarks", "--benchmark-autosave", "--benchmark-storage", ".benchmarks/work",
               "--benchmark-min-rounds=1", "--benchmark-max-time=0", "--benchmark-warmup=off", *argv]
        print(f"counting with {avail.name}: {' '.join(cmd)}", file=sys.stderr)
        env = {"PYTHONPATH": os.pathsep.join([str(link), str(link / "tools")])}
        proc = work.popen(cmd, avail.kind, str(Path(tmp) / "cg.%p"), env, cwd=str(link))
        try:
            rc = proc.wait()
        except BaseException:  # ^C: the counted process has a session of its own, so it is ended here
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            raise
    if rc < 0:  # a signal from outside: exit 1 saying so (sys.exit of a negative number would read as 256 - n)
        print(f"count_benchmarks: the counted pytest was killed by {signal.Signals(-rc).name}", file=sys.stderr)
        return 1
    return rc


# ---- the plugin, inside the counted pytest process --------------------------------------------------------------


@functools.cache
def counter() -> work.Counter:
    """The process's one counter (its dumps' tags are its own for the whole process)."""
    return work.open_counter()


def bound(fn, args: tuple, kwargs: dict):
    """`fn(*args, **kwargs)` as a callable with no arguments that keeps fn's `prepare` and `again`."""
    call = functools.partial(fn, *args, **kwargs)
    for name in ("prepare", "again"):
        if hasattr(fn, name):
            setattr(call, name, getattr(fn, name))
    return call


@functools.cache
def counted(plain: type) -> type:
    """pytest-benchmark's fixture class, counting the benchmarked call after timing it."""

    class Counted(plain):  # pytest-benchmark checks that the fixture is its own class: a subclass of it
        counting = True  # a fixture that overrides `benchmark` by requesting it is made to count once, not twice

        def __call__(self, fn, *args, **kwargs):
            result = plain.__call__(self, fn, *args, **kwargs)
            c = counter()
            count = work.count_calls(bound(fn, args, kwargs), c, warmup=WARMUP, calls=CALLS)
            self.extra_info.update(instructions=count.fewest, alloc=count.alloc, instructions_spread=count.spread,
                                   counter=work.NAMES[c.kind])
            return result

    return Counted


@pytest.hookimpl(hookwrapper=True)  # the old style: pytest-benchmark 4 runs on pytests whose pluggy has no other
def pytest_fixture_setup(fixturedef, request):
    """pytest-benchmark's `benchmark` fixture (whichever conftest or plugin overrides it), made to count."""
    outcome = yield
    if fixturedef.argname != "benchmark" or outcome.excinfo is not None:
        return
    fixture = outcome.get_result()
    if hasattr(fixture, "extra_info") and not getattr(fixture, "counting", False):
        fixture.__class__ = counted(type(fixture))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
