"""The two counters behind one interface (`Counter`): the hardware counter through `perf_event_open`, and
callgrind's client requests in a process started under valgrind (the dump read and split by `work_dump.py`).
`open_counter` opens the one a counted process was started for.

Part of the method (see `work.py`, which re-exports these names): it imports only the standard library (and,
inside a counted process, pytest-codspeed's hooks), and is loaded by path (`method.py`).
"""

from __future__ import annotations

import ctypes
import os
import platform
import runpy
import struct
from typing import Protocol

_dump = runpy.run_path(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "method.py"))[
    "load"]("work/work_dump.py")
split_dump, find_dump = _dump.split_dump, _dump.find_dump

KINDS = ("perf", "callgrind")
NAMES = {"perf": "instructions:u (hardware counter, perf_event_open)",
         "callgrind": "Ir (callgrind 'instructions', simulated: no hardware counter here)"}


class WorkUnavailable(RuntimeError):
    """No counter can run here; the message says why and what would make one run."""


class Counter(Protocol):
    """`begin()` before a run of counted calls, `end()` after it; between them each call is counted by
    `start()` ... `stop()`, which returns a token that `read(token)` turns into the instructions in between
    (read after the run: reading a dump file between calls would move the heap the next call finds)."""

    kind: str

    def begin(self) -> None: ...

    def start(self) -> None: ...

    def stop(self) -> object: ...

    def read(self, token: object) -> int: ...

    def end(self) -> None: ...


# ---- the hardware counter ------------------------------------------------------------------------------------

PERF_ATTR_SIZE = 128  # PERF_ATTR_SIZE_VER8 and later: the kernel zero-extends shorter structs anyway
_SYSCALL = {"x86_64": 298, "aarch64": 241, "ppc64le": 319, "s390x": 331, "riscv64": 241}
_DISABLED, _EXCLUDE_KERNEL, _EXCLUDE_HV = 1 << 0, 1 << 5, 1 << 6
_IOC_ENABLE, _IOC_DISABLE, _IOC_RESET = 0x2400, 0x2401, 0x2403  # _IO('$', 0), _IO('$', 1), _IO('$', 3)
_FD_CLOEXEC = 8  # PERF_FLAG_FD_CLOEXEC


def perf_attr() -> bytes:
    """struct perf_event_attr for user-space instructions of this thread: type PERF_TYPE_HARDWARE (0), config
    PERF_COUNT_HW_INSTRUCTIONS (1), starting disabled, kernel and hypervisor excluded, not inherited."""
    head = struct.pack("=IIQQQQQ", 0, PERF_ATTR_SIZE, 1, 0, 0, 0, _DISABLED | _EXCLUDE_KERNEL | _EXCLUDE_HV)
    return head + bytes(PERF_ATTR_SIZE - len(head))


class PerfCounter:
    """instructions:u of the calling thread. `libc` is injectable so the protocol is testable without a PMU."""

    kind = "perf"

    def __init__(self, libc=None, machine: str | None = None):
        self.libc = libc if libc is not None else ctypes.CDLL(None, use_errno=True)
        number = _SYSCALL.get(machine or platform.machine())
        if number is None:
            raise WorkUnavailable(f"perf_event_open: no syscall number known for {platform.machine()}")
        attr = ctypes.create_string_buffer(perf_attr(), PERF_ATTR_SIZE)
        fd = self.libc.syscall(number, attr, 0, -1, -1, _FD_CLOEXEC)  # pid 0, any CPU: this thread
        if fd < 0:
            err = ctypes.get_errno()
            raise WorkUnavailable(f"perf_event_open(instructions:u) failed: {os.strerror(err) if err else 'error'}"
                                  " (no PMU, e.g. in a VM, or kernel.perf_event_paranoid > 2)")
        self.fd = fd

    def begin(self) -> None:
        pass

    def start(self) -> None:
        self.libc.ioctl(self.fd, _IOC_RESET, 0)
        self.libc.ioctl(self.fd, _IOC_ENABLE, 0)

    def stop(self) -> int:
        self.libc.ioctl(self.fd, _IOC_DISABLE, 0)
        return struct.unpack("=Q", os.read(self.fd, 8))[0]

    def read(self, token: int) -> int:
        return token

    def end(self) -> None:
        pass


# ---- the simulated counter -------------------------------------------------------------------------------------

class CallgrindCounter:
    """Ir of a region, in a process running under `valgrind --tool=callgrind --instr-atstart=no`: instrumenting
    from `begin` to `end` (starting and stopping it flushes valgrind's translations, which then run
    instrumented: slow, so once per run of calls, never per call); the counts zeroed at `start`, dumped at
    `stop` and read (split by function, `split_dump`) after the run. What runs between a `stop` and the next
    `start` is instrumented but not counted.

    Callgrind numbers a process's dumps once for the whole process (OUT.<pid>.1, .2, ...), whatever object asked
    for them, so the number a dump gets is not this object's: each region is named with a tag of its own, and
    `read` finds the dump that carries it."""

    kind = "callgrind"

    def __init__(self, out: str | None = None, hooks=None):
        self.out = out or os.environ.get("SPECDEC_CALLGRIND_OUT")
        if not self.out:
            raise WorkUnavailable("callgrind: SPECDEC_CALLGRIND_OUT is not set (start the process with work.command)")
        if hooks is None:
            try:
                from pytest_codspeed.instruments.hooks import dist_instrument_hooks as hooks
            except ImportError as exc:
                raise WorkUnavailable(f"callgrind needs pytest-codspeed's instrument hooks ({exc}): "
                                      "pip install 'pytest-codspeed>=5.0.4'") from None
        self.hooks, self.instance = hooks, hooks.instrument_hooks_init()
        self.regions = 0
        self.tag = f"specdec-{os.getpid()}-{os.urandom(6).hex()}"  # unique: an object's id may be reused

    def begin(self) -> None:
        self.hooks.callgrind_start_instrumentation()

    def start(self) -> None:
        # CALLGRIND_ZERO_STATS, then START_INSTRUMENTATION (on since `begin`: a no-op)
        self.hooks.instrument_hooks_start_benchmark(self.instance)

    def stop(self) -> tuple[str, str]:
        self.regions += 1  # CALLGRIND_DUMP_STATS_AT: the events since the zero, written now as OUT.<pid>.<n>
        name = f"{self.tag}-{self.regions}"
        self.hooks.instrument_hooks_set_executed_benchmark(self.instance, os.getpid(), name.encode())
        return self.out.replace("%p", str(os.getpid())), name

    def read(self, token: tuple[str, str]) -> dict:
        return split_dump(find_dump(*token))

    def end(self) -> None:
        self.hooks.callgrind_stop_instrumentation()


def preload_counter() -> None:
    """Import the counter's own modules now (a zygote, before it forks children that count)."""
    try:
        import pytest_codspeed.instruments.hooks  # noqa: F401
    except ImportError:
        pass


def open_counter(kind: str | None = None) -> Counter:
    """The counter this process was started for (SPECDEC_WORK_COUNTER, set by `command`)."""
    kind = kind or os.environ.get("SPECDEC_WORK_COUNTER")
    if kind == "perf":
        return PerfCounter()
    if kind == "callgrind":
        return CallgrindCounter()
    raise WorkUnavailable(f"no work counter named {kind!r} (allowed: {', '.join(KINDS)})")
