"""The pytest-benchmark suite with every benchmark's work counted: instructions per call in its extra_info.

    python tools/count_benchmarks.py [-k onnx] [pytest options ...]      # e.g. -k "onnx and bigram"

Counts as `specdec ab` counts a revision (`work_pool`'s method): the checkout seen through a link of fixed length
in a temporary folder (`/tmp/specdec-work-XXXXXXXX/A`), one counted process per layout of `work_pool.LAYOUTS`
(each shifted by `work.perturb`, under callgrind where the machine has no hardware counter: `work.popen`, hash
seed 0, a small fixed environment), a benchmark's warm-ups and counted calls by `work.PLAN` for its
kind (`kind`: a target pass, a generation, or a cheap call counted as a draft's proposal), and its figure the
mean over the layouts of the fewest instructions outside the allocators and the type cache's misses. Each layout's process is
`pytest tests/benchmarks` with this file loaded as a plugin (`-p count_benchmarks`), which counts each
benchmarked call after pytest-benchmark has run it, as pytest-codspeed does for CodSpeed; the last layout's run
is saved (`--benchmark-autosave --benchmark-storage .benchmarks/work`), and its extra_info holds:

  * `instructions`: the mean over the layouts of `Count.fewest`, the verdict figure (docs/work.md);
  * `instructions_layouts`: each layout's `fewest`; `alloc`: the mean of the allocators' own instructions
    (None from the hardware counter: it cannot split); `counter` (`work.NAMES`) and `plan` (warm-ups, counted).

One counter serves each process: callgrind numbers its dumps once per process, and each region is found by its
own tag (`work.find_dump`), so every benchmark reads its own dumps. The benchmarked callable itself (bound to its
arguments) is what is counted, so a `prepare` or `again` attribute on it is honoured as ab honours its rows'
(`work.count_calls`); the suite's own callables have none because each puts its state back itself (a draft
rolls back, a generation starts from its prompt and seed). `benchmark.pedantic` calls are timed, not counted.

Counting runs at 1 thread (callgrind adds every thread's instructions; the hardware counter counts the calling
thread's): a suite whose THREADS is not 1 is refused (one line, exit 2). Compare two such runs by those keys.
The times of a counted run are taken under valgrind and are not this machine's: keep the storage apart (the
default here) from timed runs'. Each benchmark runs a single round.
"""

from __future__ import annotations

import ast
import functools
import json
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

from specdec.measure.work import work, work_pool  # noqa: E402

LINK = "A"  # the checkout's link in the temporary folder: the name ab gives its first revision
LAYOUT_VAR, COUNTS_VAR = "SPECDEC_WORK_LAYOUT", "SPECDEC_WORK_COUNTS"  # the plugin's layout, and its counts' files


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
        files = [str(Path(tmp) / f"counts-{layout}.json") for layout in work_pool.LAYOUTS]
        for i, layout in enumerate(work_pool.LAYOUTS):
            last = i == len(work_pool.LAYOUTS) - 1
            # -p no:xdist: one counted process (xdist's workers would run outside valgrind and count nothing);
            # the last layout's run is the one saved, its extra_info the mean over every layout's counts
            saving = (["--benchmark-autosave", "--benchmark-storage", ".benchmarks/work"] if last else
                      ["--benchmark-json", str(Path(tmp) / f"run-{layout}.json")])
            cmd = [sys.executable, "-m", "pytest", str(path), "-p", "no:cacheprovider", "-p", "no:xdist",
                   "-p", "count_benchmarks", *saving, "--benchmark-min-rounds=1", "--benchmark-max-time=0",
                   "--benchmark-warmup=off", *argv]
            print(f"counting layout {layout} ({i + 1}/{len(files)}) with {avail.name}: {' '.join(cmd)}",
                  file=sys.stderr)
            env = {"PYTHONPATH": os.pathsep.join([str(link), str(link / "tools")]), LAYOUT_VAR: str(layout),
                   COUNTS_VAR: os.pathsep.join(files[:i + 1])}
            rc = _counted(cmd, avail.kind, str(Path(tmp) / "cg.%p"), env, str(link))
            if rc:
                break
    if rc < 0:  # a signal from outside: exit 1 saying so (sys.exit of a negative number would read as 256 - n)
        print(f"count_benchmarks: the counted pytest was killed by {signal.Signals(-rc).name}", file=sys.stderr)
        return 1
    return rc


def _counted(cmd: list[str], kind: str, out: str, env: dict, cwd: str) -> int:
    proc = work.popen(cmd, kind, out, env, cwd=cwd)
    try:
        return proc.wait()
    except BaseException:  # ^C: the counted process has a session of its own, so it is ended here
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        raise


# ---- the plugin, inside the counted pytest process --------------------------------------------------------------


# the layout this counted process runs in (`work.perturb`), shifted before the suite imports anything
_LAYOUT = work.perturb(int(os.environ.get(LAYOUT_VAR, "0"))) if os.environ.get("SPECDEC_WORK_COUNTER") else None
COUNTS: dict[str, dict] = {}  # this process's counts by benchmark: written to the last file of COUNTS_VAR at exit


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
            warmup, calls = work.PLAN[kind(self.name)]
            count = work.count_calls(bound(fn, args, kwargs), c, warmup=warmup, calls=calls)
            COUNTS[key(self.fullname)] = {"fewest": count.fewest, "alloc": count.alloc}
            self.extra_info.update(counter=work.NAMES[c.kind], plan=[warmup, calls], **layouts(key(self.fullname)))
            return result

    return Counted


def kind(name: str) -> str:
    """A benchmark's kind in `work.PLAN` (its warm-ups and counted calls) by its test's name: a generation or a
    target pass where the name says so, else a cheap call counted as a draft's proposal is (the most warm-ups)."""
    return next((k for k in ("generation", "pass") if k in name.split("[")[0]), "draft")


def key(nodeid: str) -> str:
    """A benchmark's key across the layouts' processes: its node id with the file's folder left out (pytest may
    pick another rootdir in the first process, before the suite's __pycache__ exists, and the id's path with it)."""
    path, _, rest = nodeid.partition("::")
    return f"{Path(path).name}::{rest}"


def layouts(name: str) -> dict:
    """A benchmark's figures over the layouts counted so far (the earlier processes' files and this one's)."""
    files = [f for f in os.environ.get(COUNTS_VAR, "").split(os.pathsep) if f]
    seen = [json.loads(Path(f).read_text()).get(name) for f in files[:-1] if Path(f).exists()] + [COUNTS[name]]
    seen = [s for s in seen if s is not None]
    allocs = [s["alloc"] for s in seen if s["alloc"] is not None]
    return {"instructions": sum(s["fewest"] for s in seen) / len(seen),
            "instructions_layouts": [s["fewest"] for s in seen],
            "alloc": sum(allocs) / len(allocs) if allocs else None}


def pytest_sessionfinish(session, exitstatus):
    """This layout's counts, for the layouts after it."""
    files = [f for f in os.environ.get(COUNTS_VAR, "").split(os.pathsep) if f]
    if files and COUNTS:
        Path(files[-1]).write_text(json.dumps(COUNTS))


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
