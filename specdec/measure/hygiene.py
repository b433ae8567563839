"""Timing hygiene: what the process does to itself before it times anything, and what it records.

pyperf's lessons, at this project's scale: fix torch's intra-op and inter-op thread counts, optionally pin the
process to chosen CPUs, keep the garbage collector out of timed regions, and write down the machine's state
(the CPU time other processes took during the run, the load average at the start and the end, threads,
affinity) beside the results -- with a one-line warning when that state says the figures will be noisy, and
what to do about it.

"Busy" is judged from what other processes took while the run ran: the busy time /proc/stat counts on the
CPUs this process may run on, less this process's own CPU time (and its children's), over the wall time.
The load average cannot tell: its minute-long decay still holds whatever ran just before (the `pip install`
before a first report, or a previous report of `--repeat`), and it counts this process too.

    python -c "from specdec.measure import hygiene; print(hygiene.watch(10))"   # this machine, the next 10 s
"""

from __future__ import annotations

import contextlib
import datetime
import os
import platform
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
from threadpoolctl import threadpool_info, threadpool_limits

from specdec.measure import turns
from specdec.measure.clock import measured
from specdec.util.errors import InputError

BUSY_LOAD = 0.8  # without /proc/stat: other runnable processes (load average beyond our own) that make it "busy"
# CPUs' worth of time other processes took, averaged over the run, that make a machine "busy". Measured on the
# shared 2-CPU development VM (2026-12-01, 1 s windows): quiet seconds between other people's runs read 0.00,
# 0.01 and 0.12 (kernel threads, the VM's agent, a shell starting); with tools/background_load.py on one CPU
# every second read 1.98-2.00 (its CPU's worth, and other people's work on the other). A quarter of a CPU sits
# above the quiet figures and far below one competing process.
BUSY_CPUS = 0.25
_BUSY_FIELDS = (0, 1, 2, 5, 6, 7)  # /proc/stat's user, nice, system, irq, softirq, steal (not idle, iowait)
WIDE_FLOOR = 0.10  # an A/A interval wider than this fraction of its median makes the noise floor "wide"
LARGE_DRIFT = 0.05  # a drift τ (ratios' shift between stretches of the run, one sd) above this is worth a warning
STATE_SHIFT = 0.10  # a target-only step this much faster or slower during the pairs than in the cost table


def no_gc():
    """The block runs with the garbage collector off (a collection inside a timed region is pure noise); no
    collection first: a timer enters it once per timed call (`turns.gc_paused`)."""
    return turns.gc_paused(collect=False)


def set_threads(n: int) -> dict:
    """Fix torch's intra-op threads to n and, where torch still allows it, its inter-op threads too.

    torch accepts `set_num_interop_threads` only before its first parallel work in the process; when that
    moment has passed the count it already has is kept and recorded as it is.
    """
    if n < 1:
        raise InputError(f"threads must be at least 1, got {n}")
    torch.set_num_threads(n)
    with contextlib.suppress(RuntimeError):
        torch.set_num_interop_threads(n)
    set_blas_threads(n)
    return {"threads": torch.get_num_threads(), "interop_threads": torch.get_num_interop_threads(),
            "blas_threads": blas_threads()}


@contextlib.contextmanager
def threads_for_measuring(n: int):
    """torch's and numpy's BLAS threads set to n (`set_threads`; yields what it recorded) for a measurement,
    and put back as they were after it, however it ends: a library call leaves the caller's setting as it
    found it."""
    before = torch.get_num_threads(), blas_threads()
    try:
        yield set_threads(n)
    finally:
        torch.set_num_threads(before[0])
        set_blas_threads(before[1])


def blas_threads() -> int | None:
    """Threads of numpy's BLAS (OpenBLAS, MKL, ...: the numpy backend's matmuls), the most any of them has;
    None when threadpoolctl finds none."""
    counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    return max(counts) if counts else None


def set_blas_threads(n: int | None) -> None:
    """Limit numpy's BLAS to n threads (torch.set_num_threads does not reach it: OpenBLAS starts one per core,
    and a second thread running beside a timed numpy pass shows up as 10 % more CPU than wall time here)."""
    if n is not None:
        threadpool_limits(limits=n, user_api="blas")


def parse_cpus(text: str) -> list[int]:
    """'0', '0,1' or '0-3' as a sorted list of CPU ids this process may run on; ValueError names a bad one."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    cpus: set[int] = set()
    try:
        for part in text.split(","):
            lo, _, hi = part.strip().partition("-")
            cpus.update(range(int(lo), int(hi or lo) + 1))
    except ValueError:
        raise InputError(f"--cpu {text!r} is not a CPU list (e.g. 0 or 0,1 or 0-1; allowed CPUs: "
                         f"{','.join(map(str, allowed))})") from None
    bad = sorted(cpus - set(allowed))
    if not cpus or bad:
        raise InputError(f"--cpu {text!r}: CPU {bad[0] if bad else '?'} is not available (allowed: "
                         f"{','.join(map(str, allowed))})")
    return sorted(cpus)


def pin(cpus: list[int] | None) -> list[int] | None:
    """Pin this process to `cpus` (os.sched_setaffinity); returns the affinity now in force (None: unknown)."""
    if not hasattr(os, "sched_setaffinity"):
        if cpus:
            raise InputError("--cpu: this platform cannot pin a process to CPUs")
        return None
    if cpus:
        os.sched_setaffinity(0, cpus)
    return sorted(os.sched_getaffinity(0))


def load_average() -> float | None:
    """The 1-minute load average (runnable processes, ours included), None where the OS has none."""
    try:
        return round(os.getloadavg()[0], 2)
    except (OSError, AttributeError):
        return None


def cpu_clock(cpus: list[int] | None = None) -> dict | None:
    """One reading of where CPU time went so far: `busy_s`, the busy seconds /proc/stat counts on `cpus`
    (default: the CPUs this process may run on), `own_s`, this process's CPU seconds and its finished
    children's (os.times), and `wall_s` (a monotonic clock); `cpus`. None where there is no /proc/stat (not
    Linux). Two readings give `others_cpus`."""
    if cpus is None and hasattr(os, "sched_getaffinity"):
        cpus = sorted(os.sched_getaffinity(0))
    try:
        stat = Path("/proc/stat").read_text()
    except OSError:
        return None
    t = os.times()
    return {"busy_s": busy_seconds(stat, cpus, os.sysconf("SC_CLK_TCK")),
            "own_s": t.user + t.system + t.children_user + t.children_system, "wall_s": measured(),
            "cpus": cpus}


def busy_seconds(stat: str, cpus: list[int] | None, ticks_per_second: int) -> float:
    """The busy seconds (user, nice, system, irq, softirq, steal: not idle, not iowait) that /proc/stat's text
    `stat` counts on `cpus` since boot; every CPU (its "cpu" line) when `cpus` is None."""
    ticks = 0
    for line in stat.splitlines():
        name, *fields = line.split() or [""]
        if not name.startswith("cpu") or (name == "cpu") != (cpus is None):  # the total line, or per CPU
            continue
        if cpus is None or int(name[3:]) in cpus:
            ticks += sum(int(fields[i]) for i in _BUSY_FIELDS if i < len(fields))
    return ticks / ticks_per_second


def others_cpus(start: dict | None, end: dict | None) -> float | None:
    """How many CPUs other processes kept busy between two `cpu_clock` readings, on average: the CPUs' busy
    seconds less our own, over the wall seconds (0 when the clocks' 10 ms ticks make it come out below).
    None when either reading is missing or no time passed."""
    if start is None or end is None or end["wall_s"] <= start["wall_s"]:
        return None
    others = (end["busy_s"] - start["busy_s"]) - (end["own_s"] - start["own_s"])
    return round(max(0.0, others) / (end["wall_s"] - start["wall_s"]), 3)


def end_of_run(machine: dict) -> dict:
    """Close the run's CPU account that `machine_info` opened: `others_cpus` (see `others_cpus`) over the
    time since, and `load_end`, the load average now (unless the caller recorded it). Takes the start
    reading (`cpu_start`) out of `machine`, so the document keeps the figure, not raw counters; a second call
    changes nothing."""
    if "cpu_start" in machine:
        start = machine.pop("cpu_start")
        machine["others_cpus"] = others_cpus(start, cpu_clock(start["cpus"]) if start else None)
        if machine.get("load_end") is None:
            machine["load_end"] = load_average()
    return machine


def git_commit() -> str | None:
    """The project's git commit when running from a checkout (with '-dirty' if it has changes)."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("-dirty" if dirty else "")) if sha else None


def machine_info(threads: dict, device: str, cpus: list[int] | None) -> dict:
    """Where and on what the numbers were measured: enough to line reports up with asv's history. It opens
    the run's CPU account (`cpu_start`), which `end_of_run` closes into `others_cpus`."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if torch.device(device).type == "cuda":
        cpu += f" + {torch.cuda.get_device_name()}"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        **threads,
        "cpu_affinity": cpus,
        "device": device,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        # ONNX Runtime's telemetry thread ("1": off, the runs' own work only; `model.onnx_session.TELEMETRY`)
        "ort_disable_telemetry": os.environ.get("ORT_DISABLE_TELEMETRY"),
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "load_start": load_average(),
        "cpu_start": cpu_clock(),  # taken out by `end_of_run`, which leaves `others_cpus` in its place
    }


BUSY_PREFIX = "WARNING: the machine was busy"  # the busy warning's opening: an engine report on a local server drops it


def _busy(machine: dict, after_own_run: bool) -> str | None:
    """What says the machine was busy, in words for the warning; None when nothing does."""
    others = machine.get("others_cpus")
    if others is not None:
        return (f"other processes kept {others:.2f} CPUs busy during the run, beyond {BUSY_CPUS}"
                if others > BUSY_CPUS else None)
    # our own process counts 1 in the load average at the end (it was running); at the start it had not yet
    start, end = machine.get("load_start"), machine.get("load_end")
    start_others = (start - 1.0 if after_own_run else start) if start is not None else 0.0
    if max(start_others, (end - 1.0) if end is not None else 0.0) > BUSY_LOAD:
        return f"load average {start} at the start, {end} at the end"
    return None


def state_shift(rows: list[dict]) -> float | None:
    """How much slower (+) or faster (-) the machine ran a target-only step during the speedup pairs than in
    the cost table before them: the median over speedup rows of the step term sampled beside the pairs over
    the cost table's. None without rows. The prediction made before the run prices every term at the cost
    table's speed; a shift alone cancels in a ratio, but the terms do not all shift alike (a wide pass, a
    quantized draft's kernels and a one-position pass each feel a busy host differently)."""
    ratios = [r["terms_us"]["step"] / r["before_terms_us"]["step"] for r in rows
              if r.get("terms_us") and r.get("before_terms_us")]
    return float(np.median(ratios)) - 1.0 if ratios else None


def warnings(machine: dict, floor: dict | None, after_own_run: bool = False,
             shift: float | None = None) -> list[str]:
    """One-line warnings, pyperf-style, for a busy machine, a wide A/A noise floor, drift, or a machine whose
    speed changed between the cost table and the pairs (`shift`, see `state_shift`), each saying what to do.

    Busy: other processes kept more than BUSY_CPUS CPUs busy during the run (`others_cpus`; a `machine` that
    `machine_info` opened is closed here with `end_of_run` first). Where that figure is missing (no
    /proc/stat), the load average beyond our own at the start or the end, more than BUSY_LOAD; after_own_run:
    this process measured right before (report --repeat), so the load average at the start still holds our
    own ~1 and is no sign of other work.
    """
    end_of_run(machine)
    out = []
    busy = _busy(machine, after_own_run)
    if busy:
        out.append(f"{BUSY_PREFIX} ({busy}, on {machine.get('cores')} cores): other processes "
                   f"share the CPU and the figures are noisier; stop them, pin a quiet CPU with --cpu N, or give "
                   f"a larger --budget.")
    if floor and floor["median"] and (floor["ci_high"] - floor["ci_low"]) / floor["median"] > WIDE_FLOOR:
        half = (floor["ci_high"] - floor["ci_low"]) / floor["median"] / 2
        out.append(f"WARNING: the A/A noise floor is wide (target-only against itself: ±{half:.0%}): differences "
                   f"smaller than that are noise on this machine; rerun when it is quieter or with a larger "
                   f"--budget.")
    if floor and (floor.get("drift") or 0.0) > LARGE_DRIFT:
        out.append(f"WARNING: the machine drifted: ratios moved by ±{floor['drift']:.0%} (one sd) between the first "
                   f"and second half of the run, beyond their pairs' noise; every interval carries it, and no "
                   f"number of pairs takes it away: run on a quieter machine or pin a CPU with --cpu N.")
    if shift is not None and abs(shift) > STATE_SHIFT:
        way = "slower" if shift > 0 else "faster"
        out.append(f"WARNING: the machine ran target-only steps {abs(shift):.0%} {way} during the pairs than in "
                   f"the cost table before them: the prediction made before the run priced every term at the "
                   f"cost table's speed, and the terms do not all change alike, so its errors here are partly the "
                   f"machine's; rerun when the machine is steady or pin a quiet CPU with --cpu N.")
    return out


def watch(seconds: float = 10.0) -> str:
    """The CPUs other processes keep busy here over the next `seconds`, and whether a report run now would call
    the machine busy, as one line (the check for a quiet machine: nothing of ours runs meanwhile)."""
    start = cpu_clock()
    if start is None:
        return "no /proc/stat here: only the load average can be read"
    time.sleep(seconds)
    others = others_cpus(start, cpu_clock(start["cpus"]))
    verdict = "busy: a report would warn" if others > BUSY_CPUS else "quiet: a report would not warn"
    return (f"other processes kept {others:.3f} CPUs busy over {seconds:g} s on CPUs "
            f"{','.join(map(str, start['cpus']))} (threshold {BUSY_CPUS}): {verdict}")
