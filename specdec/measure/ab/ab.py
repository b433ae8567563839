"""`specdec ab`: two revisions timed in one run, sample by sample, in pairs of fresh worker processes.

The method (docs/ab.md):
  * Each revision runs in worker processes of the current environment with its source first on the path
    (`ab_worker.py`, the method, which calls only the revision's public API). A *worker pair* is one A worker
    and one B worker, started fresh with hash seeds of their own: a process carries its own bias (address-space
    layout, hash seed), so the pairs, not the samples, are the independent units the interval counts.
  * Both workers of a pair are pinned to one CPU and take turns: only one runs at any moment, and the two see
    the same stretch of the machine's state within milliseconds. A sample is `number` back-to-back calls of a
    row (about SAMPLE_SECONDS, the number fixed for the whole run so both sides do the same work).
  * Per row a block is A B B A or B A A B (a coin per block), giving two adjacent (A, B) samples; the row's
    statistic is log(B / A) of each. Rows take turns in a random order per sweep, so a burst of outside load
    touches one block of many rows rather than many blocks of one.
  * Sweeps fill each pair's share of the budget; the pairs' estimates go to `ab_stats`.

Workers set their threads (torch and BLAS) and keep the garbage collector out of a sample. The parent only
waits on pipes while a worker times.
"""

from __future__ import annotations

import math
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from specdec.measure.work import work, work_pool
from specdec.measure.ab.ab_sources import Source
# The scheduling (each pair's share of the budget, when to stop sweeping) reads the decision clock; what a
# sample measures is the worker's own clock (ab_worker.CLOCK).
from specdec.measure.clock import now

WORKER = Path(__file__).resolve().parents[1] / "ab_worker.py"  # measure's top: the worker every room runs
SAMPLE_SECONDS = 0.015  # one sample: a few to a few tens of milliseconds
MIN_SWEEPS = 2  # every pair times every row at least this often (two blocks: four (A, B) samples)
MIN_PAIRS = 2  # a short budget cuts the worker pairs to no fewer than this: one pair gives no interval
SETUP_TIMEOUT = 600.0  # seconds a worker may take to import and build its rows (an hf: model loads here)


class WorkerError(RuntimeError):
    """A worker died, hung, or answered with an error (its traceback is in the message)."""


class Worker(work_pool.Channel):
    """One timing worker process of one revision."""

    error = WorkerError

    def __init__(self, source: Source, hash_seed: int, log_dir: str, cpus: list[int] | None = None):
        path = os.pathsep.join([source.path] + [p for p in [os.environ.get("PYTHONPATH")] if p])
        self.source, self.who = source, f"worker {source.label} ({source.name})"
        self.log = Path(log_dir) / f"{source.label}-{hash_seed}.log"
        # ONNX Runtime's telemetry off in both revisions' workers, whatever their code does (work.ORT_TELEMETRY)
        env = dict(os.environ, PYTHONHASHSEED=str(hash_seed), PYTHONDONTWRITEBYTECODE="1", PYTHONPATH=path,
                   **work.ORT_TELEMETRY)
        with open(self.log, "w") as err:
            self.proc = subprocess.Popen([sys.executable, str(WORKER)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         text=True, stderr=err, env=env,
                                         start_new_session=True,  # Ctrl-C reaches the parent, which ends it
                                         preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None)

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                self.send({"op": "exit"})
                self.proc.wait(timeout=5)
            except (WorkerError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()


@dataclass
class Run:
    """What one `specdec ab` run measured, before statistics: per row and worker pair, the log(B / A) of each
    adjacent pair of samples, and every sample's seconds per call on each side."""

    config: dict
    rows: dict = field(default_factory=dict)  # name -> {"a": setup answer row, "b": ...}
    numbers: dict = field(default_factory=dict)  # name -> calls per sample
    logs: dict = field(default_factory=dict)  # name -> [[log(B/A), ...] per pair]
    seconds: dict = field(default_factory=dict)  # name -> {"a": [...], "b": [...]}
    pairs: list = field(default_factory=list)  # per pair: both workers' info, sweeps, setup seconds
    complete: bool = True
    error: str = ""  # why the run stopped early (complete False)
    interrupted: bool = False  # stopped by SIGINT or SIGTERM: what was measured until then is kept
    warnings: list = field(default_factory=list)
    elapsed: float = 0.0


def _start_pair(a: Source, b: Source, config: dict, rng: np.random.Generator, log_dir: str,
                cpus: list[int] | None) -> tuple[Worker, Worker]:
    """Start both workers of a pair (fresh hash seeds) and ask them to build their rows; `cpus` keeps them off
    the CPU a running pair is timed on while they import and build (None: anywhere)."""
    seeds = [int(s) for s in rng.integers(1, 2**31, size=2)]
    workers = (Worker(a, seeds[0], log_dir, cpus), Worker(b, seeds[1], log_dir, cpus))
    try:
        for w in workers:
            w.send({"op": "setup", "config": {**config, "source": w.source.path}})
    except BaseException:
        _close(workers)
        raise
    return workers


def _close(workers) -> None:
    for w in workers or ():
        w.close()


def _block(wa: Worker, wb: Worker, row: str, number: int, a_first: bool) -> tuple[list[float], list[float]]:
    """A B B A (or B A A B): four samples; returns (A's seconds, B's seconds), adjacent ones at equal index."""
    order = [wa, wb, wb, wa] if a_first else [wb, wa, wa, wb]
    t = [w.ask({"op": "time", "row": row, "number": number})["t"] for w in order]
    return ([t[0], t[3]], [t[1], t[2]]) if a_first else ([t[1], t[2]], [t[0], t[3]])


def _sweep(run: Run, wa: Worker, wb: Worker, rows: list[str], rng: np.random.Generator, record: bool) -> None:
    for row in rng.permutation(rows):
        ta, tb = _block(wa, wb, str(row), run.numbers[row], bool(rng.random() < 0.5))
        if record:
            run.logs[row][-1] += [math.log(y / x) for x, y in zip(ta, tb)]
            run.seconds[row]["a"] += ta
            run.seconds[row]["b"] += tb


def _first_pair(run: Run, answers: tuple[dict, dict], wa: Worker) -> None:
    """Rows both revisions can time; each row's calls per sample, fixed for the run from A's first worker."""
    ra, rb = answers[0]["rows"], answers[1]["rows"]
    for name in dict.fromkeys([*ra, *rb]):
        run.rows[name] = {"a": ra.get(name, {"ok": False, "reason": "no such row"}),
                          "b": rb.get(name, {"ok": False, "reason": "no such row"})}
    timed = [n for n, r in run.rows.items() if r["a"]["ok"] and r["b"]["ok"]]
    for name in timed:
        run.numbers[name] = wa.ask({"op": "number", "row": name, "seconds": SAMPLE_SECONDS})["number"]
        run.logs[name], run.seconds[name] = [], {"a": [], "b": []}


def measure(a: Source, b: Source, config: dict, budget: float, pairs: int, cpu: int,
            progress: Callable[[str], None] = lambda line: None, seed: int | None = None,
            clock: Callable[[], float] = now, overlap: bool = True) -> Run:
    """Time A against B: `pairs` worker pairs, each pinned to `cpu`, sweeping every row until its share of
    `budget` seconds is spent (at least MIN_SWEEPS recorded sweeps). With `overlap` (and another CPU allowed)
    the next pair starts and builds its rows on the other CPUs while a pair is timed, so start-up costs the
    budget once, not once a pair. An interrupt (KeyboardInterrupt: ^C, or SIGTERM as the CLI raises it) ends the
    workers and returns what was measured, marked interrupted; a worker that fails in the first pair raises
    WorkerError, in a later pair ends the run with what was measured, marked incomplete."""
    start = clock()
    rng = np.random.default_rng(seed)
    run = Run(config)
    others = sorted(set(os.sched_getaffinity(0)) - {cpu}) if overlap else []
    with tempfile.TemporaryDirectory(prefix="specdec-ab-logs-") as log_dir:
        pending = None
        try:
            pending = _start_pair(a, b, config, rng, log_dir, None)
            p = -1
            while p + 1 < pairs:  # `pairs` may shrink after the first pair (`_fit_pairs`)
                p += 1
                workers, pending = pending, None
                until = clock() + (start + budget - clock()) / (pairs - p)
                try:
                    answers = tuple(w.receive(SETUP_TIMEOUT) for w in workers)
                    if others and p + 1 < pairs:
                        pending = _start_pair(a, b, config, rng, log_dir, others)
                    _time_pair(run, p, workers, answers, cpu, rng, until, clock)
                except WorkerError as exc:
                    if p == 0:  # nothing measured yet: the failure is the answer
                        raise
                    run.complete, run.error = False, str(exc)
                    progress(f"pair {p + 1}/{pairs} failed; stopping with {p} pair(s) measured")
                    break
                finally:
                    _close(workers)
                if p == 0:
                    pairs = _fit_pairs(run, budget - (clock() - start), pairs, progress)
                progress(f"pair {p + 1}/{pairs}: {run.pairs[-1]['sweeps']} sweeps of {len(run.logs)} rows, "
                         f"{max(0.0, start + budget - clock()):.0f} s of the budget left")
                if pending is None and p + 1 < pairs:
                    pending = _start_pair(a, b, config, rng, log_dir, None)
        except KeyboardInterrupt:  # ^C or SIGTERM: the workers are ended below; what was measured stays
            run.complete, run.interrupted = False, True
            run.error = (f"interrupted during worker pair {len(run.pairs) + 1}: {len(run.pairs)} whole pair(s) "
                         "measured, the samples of the pair it stopped in kept")
            progress(f"specdec ab: {run.error}")
        finally:
            _close(pending)
    run.elapsed = clock() - start
    return run


def _time_pair(run: Run, p: int, workers: tuple[Worker, Worker], answers: tuple[dict, dict], cpu: int,
               rng: np.random.Generator, until: float, clock: Callable[[], float]) -> None:
    """One pair's samples: both workers pinned to `cpu`, a warm-up sweep, then sweeps until `until`."""
    wa, wb = workers
    t0 = clock()
    for w in workers:
        w.ask({"op": "pin", "cpu": cpu})
    if p == 0:
        _first_pair(run, answers, wa)
    _check_facts(run, answers, p)
    timed = list(run.logs)
    for row in timed:
        run.logs[row].append([])
    _sweep(run, wa, wb, timed, rng, record=False)  # warm-up, pinned
    ready = clock()
    sweeps = 0
    while timed and (sweeps < MIN_SWEEPS or clock() + (clock() - ready) / sweeps < until):
        _sweep(run, wa, wb, timed, rng, record=True)
        sweeps += 1
    run.pairs.append({"a": _info(answers[0]), "b": _info(answers[1]), "sweeps": sweeps,
                      "ready_seconds": round(ready - t0, 2),
                      "sweep_seconds": round((clock() - ready) / max(1, sweeps), 3)})


def _fit_pairs(run: Run, left: float, pairs: int, progress) -> int:
    """After the first pair: the worker pairs the rest of the budget buys, each with its start-up and
    MIN_SWEEPS + 1 sweeps at the first pair's pace (on the decision clock). Fewer than asked is said in a line
    (and kept in the run's warnings); below MIN_PAIRS the run keeps MIN_PAIRS, goes over its budget and says so,
    naming the budget that would do."""
    first = run.pairs[0]
    setup, sweep = first["ready_seconds"], first["sweep_seconds"]
    need = setup + (MIN_SWEEPS + 1) * sweep  # getting ready (with its warm-up sweep) and the recorded sweeps
    if left >= (pairs - 1) * need:
        return pairs
    fit = max(min(pairs, MIN_PAIRS), 1 + int(max(0.0, left) // max(need, 1e-9)))
    lines = []
    if fit < pairs:
        lines.append(f"worker pairs {pairs} -> {fit}: the budget left buys {fit - 1} more of about {need:.0f} s each "
                     f"here (getting ready {setup:.0f} s, a sweep of {len(run.logs)} rows {sweep:.1f} s)")
    if left < (fit - 1) * need:
        lines.append(f"the budget is too small for {fit} worker pairs of {len(run.logs)} rows here: give --budget "
                     f"{math.ceil(fit * need)} or fewer rows; this run goes over its budget")
    for line in lines:
        run.warnings.append(line)
        progress(f"warning: {line}")
    return fit


def _info(answer: dict) -> dict:
    return {k: answer.get(k) for k in ("pid", "hash_seed", "clock", "threads", "version")}


def _check_facts(run: Run, answers: tuple[dict, dict], p: int) -> None:
    """Every pair's workers must report the facts of the first pair's (deterministic given the seed): a
    difference within one revision means its generation is not deterministic, so no comparison holds."""
    for side, answer in zip(("a", "b"), answers):
        for name, row in answer["rows"].items():
            first = run.rows.get(name, {}).get(side, {})
            if row.get("facts") != first.get("facts"):
                raise WorkerError(f"row {name!r}: revision {side.upper()} gave other exact figures in worker "
                                  f"pair {p + 1} than in pair 1 ({row.get('facts')} against {first.get('facts')})"
                                  ": its generation is not deterministic given the seed")
