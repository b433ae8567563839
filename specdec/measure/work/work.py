"""The work counter: instructions executed in user space by a region of Python code, in one thread.

Two ways to count, one interface (`Counter`: `start()`, then `stop()` returns the instructions in between):

  * **perf** -- the hardware counter through `perf_event_open` (`instructions:u`: PERF_TYPE_HARDWARE /
    PERF_COUNT_HW_INSTRUCTIONS, kernel and hypervisor excluded, this thread only, not inherited), where the
    kernel has a PMU: bare metal, most laptops, many cloud instances.
  * **callgrind** -- simulation, where there is no PMU (a VM whose kernel says "PMU not available due to
    virtualization"). The counted process is started under `valgrind --tool=callgrind --instr-atstart=no`
    (`command`), so it runs uninstrumented until a region starts; the region is bracketed by callgrind's
    client requests (zero, start and stop instrumentation, dump), issued through pytest-codspeed's instrument
    hooks (a compiled wheel: nothing is built here); the region's dump is split by function (`work_dump.py`:
    the allocators' own instructions and the type cache's misses apart from the rest, the verdict figure).
    Callgrind counts guest instructions ("Ir"), which is `instructions:u` but for a few instructions' details.

The counters are `counters.py` (re-exported here: callers name them `work.PerfCounter`, `work.open_counter`).

Counts are only as repeatable as the process is (docs/work.md has the study): `command` starts the counted
process with the address space's layout fixed (ADDR_NO_RANDOMIZE, as `setarch -R`), hash seed 0, and a fixed,
small environment; `count_calls` warms a call up (the interpreter's adaptive specialisation keeps changing the
work for a few calls), counts several calls with the garbage collector off inside every region, and keeps the
fewest instructions outside the allocators; `perturb` gives a counting process a layout of its own, so that
the bias a layout carries is averaged over several (ab_work).

This file is the method, like `ab_worker.py`: it imports only the standard library (and, inside a counted
process, pytest-codspeed's hooks), so the ab worker and the asv harness load it by path (`method.py`, which
loads its siblings too) and count every revision the same way. The parent side (`probe`, `command`) and the
counted side (`open_counter`, `count_calls`) meet through two environment variables, SPECDEC_WORK_COUNTER and
SPECDEC_CALLGRIND_OUT.
"""

from __future__ import annotations

import ctypes
import gc
import os
import shutil
import runpy
import subprocess
import sys
from dataclasses import dataclass, field
from typing import Callable

WARMUP = 8  # uncounted calls before the first counted one (cheap under callgrind: no instrumentation yet)
CALLS = 6  # counted calls; the figure is the fewest instructions among them
# (uncounted calls, counted calls) per kind of row in a counting child (ab_worker._plan says why each): part of
# the method's name (work_pool.METHOD), so that counts made by different plans are never judged against each other
PLAN = {"generation": (2, 1), "pass": (12, 3), "draft": (24, 3)}
# Environment variables the counted process keeps from its parent: what selects kernels and threads (so the
# counted process runs what the timed one does) and specdec's own knobs. Everything else is left out, so two
# processes of one run see environments of the same size whatever the shell around them held.
KEEP_ENV = ("PATH", "HOME", "TMPDIR", "SPECDEC_", "OMP_", "MKL_", "OPENBLAS_", "ATEN_CPU_CAPABILITY",
            "DNNL_MAX_CPU_ISA", "ONEDNN_MAX_CPU_ISA", "HF_", "TRANSFORMERS_", "CUDA_VISIBLE_DEVICES")
# ONNX Runtime (1.29 on, Linux) runs a telemetry thread that wakes on a wall-clock timer and aggregates every
# run: callgrind counts every thread, so its work landed inside counted calls as the clock allowed (docs/work.md
# has the split). Its documented opt-out, read once when the runtime starts, keeps a count to the rows' own work.
# (model.onnx_session.TELEMETRY sets the same variable for specdec's own sessions; this module is loaded by path
# and imports nothing of specdec's, so the pair is written twice.)
ORT_TELEMETRY = {"ORT_DISABLE_TELEMETRY": "1"}
ADDR_NO_RANDOMIZE = 0x0040000  # personality(2): the layout `setarch -R` gives


_load = runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "method.py"))["load"]
_dump = _load("work/work_dump.py")
GLIBC_ALLOCATOR, PYMALLOC, LOOKUP_MISS = _dump.GLIBC_ALLOCATOR, _dump.PYMALLOC, _dump.LOOKUP_MISS
allocator_function, split_dump, find_dump = _dump.allocator_function, _dump.split_dump, _dump.find_dump
_counters = _load("work/counters.py")  # the counters themselves, re-exported: callers name them work.X
KINDS, NAMES, WorkUnavailable, Counter = _counters.KINDS, _counters.NAMES, _counters.WorkUnavailable, _counters.Counter
PERF_ATTR_SIZE, perf_attr, PerfCounter, CallgrindCounter = (_counters.PERF_ATTR_SIZE, _counters.perf_attr,
                                                            _counters.PerfCounter, _counters.CallgrindCounter)
preload_counter, open_counter = _counters.preload_counter, _counters.open_counter


# The layout a process's code lands in moves the interpreter's lookup caches: the type-attribute cache indexes
# its 4096 slots by a type's version tag XOR the attribute name's address, and both follow everything created
# before (code loaded, objects allocated), so code added anywhere changes which lookups collide in a call that
# never runs it: a bias fixed per build, not noise (docs/work.md). `perturb` gives each counting process a
# layout of its own, drawn from its seed, before the revision's code is imported: the bias becomes noise that
# the mean over several processes averages away, and both revisions are counted in the same draws.
PERTURB_TYPES = 4096  # version tags to skip: any of the type cache's 4096 slots
PERTURB_OBJECTS = 4096  # small objects: shift every pymalloc size class's next free block


def perturb(seed: int) -> list:
    """Shift this process's layout by an amount drawn from `seed` (0: no shift): version tags skipped by
    classes that each take one, small strings of random sizes and one block of random size kept alive. Returns
    what must be kept alive for the layout to hold."""
    import random

    if not seed:
        return []
    rng = random.Random(seed)
    keep: list = []
    for _ in range(rng.randrange(PERTURB_TYPES)):
        t = type("_Layout", (), {})
        getattr(t, "_tag", None)  # a lookup assigns the class its version tag
        keep.append(t)
    keep.extend("x" * rng.randrange(1, 512) for _ in range(rng.randrange(PERTURB_OBJECTS)))
    keep.append(bytearray(rng.randrange(1, 1 << 16)))
    return keep


# ---- counting a call -----------------------------------------------------------------------------------------


@dataclass
class Count:
    fewest: int  # the verdict figure: the fewest instructions outside the allocators among the counted calls
    alloc: int | None  # the allocators' own instructions, the fewest among the calls (None: perf cannot split)
    counts: list[dict] = field(default_factory=list)  # every counted call, in order: {"total", "alloc", "work"}
    warmup: int = 0  # uncounted calls before them
    spread: float = 0.0  # (second fewest - fewest) / fewest of the verdict figure: how far it could have moved

    def as_dict(self) -> dict:
        return {"fewest": self.fewest, "alloc": self.alloc, "counts": self.counts, "warmup": self.warmup,
                "spread": self.spread}


def summarise(counts: list[int]) -> tuple[int, float]:
    """The figure of a row's counted calls, and its spread: the fewest instructions, and how far the second
    fewest lies above it. Like a timing's fastest sample: an event inside a call (a dict resized, a cache
    entry evicted) adds work to that call, never takes it away, and the fewest is the call without it."""
    xs = sorted(counts)
    return xs[0], ((xs[1] - xs[0]) / xs[0] if len(xs) > 1 and xs[0] else 0.0)


def as_split(token_value) -> dict:
    """A counter's reading as {"total", "alloc", "work"}: callgrind's dumps split by function; the hardware
    counter's single figure is all work (alloc None: it cannot tell the allocator apart)."""
    if isinstance(token_value, dict):
        return token_value
    return {"total": int(token_value), "alloc": None, "lookup": None, "work": int(token_value)}


def count_calls(call: Callable[[], object], counter: Counter, warmup: int = WARMUP, calls: int = CALLS,
                prepare: bool = True) -> Count:
    """Instructions per call: `warmup` uncounted calls (the interpreter's adaptive specialisation changes the
    work of the first few), then `calls` counted ones, each split into the allocators' instructions and the
    rest (`split_dump`); the figure is the fewest of the rest (`summarise`).

    The call's untimed `prepare` (where it has one and `prepare` is true) runs first, then its cheaper `again`
    before every later call where it has one (the calls of one row follow each other here, so undoing the last
    call's change puts the inputs and state back: the same work each time), else `prepare` again. One
    collection before the counted calls, then the collector stays off until they are done: none runs inside a
    counted call, and none needs to run instrumented (under callgrind a collection costs seconds). The counter
    is begun once for all the counted calls (callgrind instruments from there: starting it flushes valgrind's
    translations, so once per row, not per call). The dumps are read after the last call: reading a file
    between calls would allocate where the next call allocates."""
    first = getattr(call, "prepare", None) if prepare else None
    before = getattr(call, "again", first)
    tokens: list = []
    if first is not None:
        first()
    for _ in range(warmup):
        if before is not None:
            before()
        call()
    was = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        counter.begin()
        try:
            for _ in range(calls):
                if before is not None:
                    before()
                counter.start()
                call()
                tokens.append(counter.stop())
        finally:
            counter.end()
    finally:
        if was:
            gc.enable()
    counts = [as_split(counter.read(token)) for token in tokens]
    fewest, spread = summarise([c["work"] for c in counts])
    allocs = [c["alloc"] for c in counts if c["alloc"] is not None]
    return Count(fewest, min(allocs) if allocs else None, counts, warmup, spread)


# ---- the parent's side: which counter, and how to start a counted process -----------------------------------


@dataclass(frozen=True)
class Availability:
    kind: str | None  # "perf", "callgrind", or None
    name: str  # what every output names as the counter
    reason: str = ""  # with kind None: why nothing counts, and the remedy


def probe(want: str = "auto") -> Availability:
    """The counter that runs here: the hardware counter where the kernel has one, else callgrind where
    valgrind and the hooks are installed; else unavailable with the reason and the remedy."""
    why = []
    if want in ("auto", "perf"):
        try:
            c = PerfCounter()
            os.close(c.fd)
            return Availability("perf", NAMES["perf"])
        except (WorkUnavailable, OSError, AttributeError) as exc:
            why.append(str(exc))
    if want in ("auto", "callgrind"):
        missing = callgrind_missing()
        if not missing:
            return Availability("callgrind", NAMES["callgrind"])
        why.append(missing)
    return Availability(None, "unavailable", "; ".join(why))


def callgrind_missing() -> str:
    """Why callgrind cannot count here ('' when it can)."""
    if shutil.which("valgrind") is None:
        return "callgrind: valgrind is not installed (apt-get install valgrind)"
    try:
        import importlib.util

        if importlib.util.find_spec("pytest_codspeed") is None:
            raise ImportError
    except ImportError:
        return "callgrind: pytest-codspeed's instrument hooks are not installed (pip install 'pytest-codspeed>=5.0.4')"
    return ""


def counted_env(kind: str, out: str | None, extra: dict | None = None, base: dict | None = None) -> dict:
    """The counted process's whole environment: the kept variables of `base` (os.environ), hash seed 0, no
    bytecode writes, ONNX Runtime's telemetry off (`ORT_TELEMETRY`), the counter's own variables, and `extra`
    (PYTHONPATH)."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k.startswith(KEEP_ENV)}
    env.update({"LANG": "C.UTF-8", "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1",
                "SPECDEC_WORK_COUNTER": kind, **ORT_TELEMETRY})
    if out:
        env["SPECDEC_CALLGRIND_OUT"] = out
    env.update(extra or {})
    return env


def command(argv: list[str], kind: str, out: str | None = None) -> list[str]:
    """`argv` as the counted process: under callgrind, uninstrumented until a region starts; with perf, as is
    (`no_aslr` goes into Popen's preexec_fn in both cases). `out` is callgrind's dump file (SPECDEC_CALLGRIND_OUT)."""
    if kind == "perf":
        return list(argv)
    if kind == "callgrind":
        if not out or "%p" not in out:
            raise ValueError("callgrind needs an output file for its dumps, with %p (each process its own)")
        return ["valgrind", "--tool=callgrind", "--instr-atstart=no", f"--callgrind-out-file={out}",
                "--dump-line=no", "--dump-instr=no", "--compress-strings=no", "--quiet", *argv]
    raise WorkUnavailable(f"no work counter named {kind!r} (allowed: {', '.join(KINDS)})")


def no_aslr() -> None:
    """In the child before exec: the address-space layout fixed, as `setarch -R` does (kept across exec)."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        current = libc.personality(0xFFFFFFFF)
        if current != -1:
            libc.personality(current | ADDR_NO_RANDOMIZE)
    except (OSError, AttributeError):  # not Linux: the layout stays random, and the A/A says what that costs
        pass


def popen(argv: list[str], kind: str, out: str | None, extra_env: dict | None = None, cwd: str | None = None,
          **kw) -> subprocess.Popen:
    """A counted process: `command(argv)` with `counted_env`, ASLR off, started in its own session."""
    return subprocess.Popen(command(argv, kind, out), env=counted_env(kind, out, extra_env), cwd=cwd,
                            preexec_fn=no_aslr, start_new_session=True, **kw)


if __name__ == "__main__":  # `python work.py`: which counter runs here, and why not the other
    a = probe()
    print(a.name if a.kind else f"unavailable: {a.reason}")
    sys.exit(0 if a.kind else 1)
