"""Counting several revisions in several layouts: one zygote process under the counter, a forked child per
(revision, layout).

The zygote is `ab_worker.py` started by `work.popen` (under callgrind where there is no hardware counter; the
address-space layout fixed, hash seed 0, a fixed environment). It imports what every revision takes from the
environment (torch, numpy, ONNX Runtime: 25-65 s under callgrind on a 2-core VM) once, then forks a child per job. A
child shifts its layout by its seed (`work.perturb`), imports the revision's code from that revision's tree,
builds the rows and counts each (`work.count_calls`), and writes its answer to a file; `jobs` children run at
once (one per CPU). A `Pool` keeps one zygote for several counts (a bisect's steps). The same layout seeds are
used for every revision, so layout i of A and layout i of B differ only in the revision's code.

Every tree is seen through a link of the same length in one temporary folder (`.../t000/A`, `.../t000/B`): a
path's length moves a process's work (module paths, the strings built from them, where later objects land).

Like `work.py` and `ab_worker.py`, this file is the method: it imports only the standard library and `work.py`
beside it (loaded by path, `method.py`), so the asv harness loads it by path and counts every commit the same way. What a
revision is counted with (LAYOUTS, COUNT_CHARS, ROW_KINDS, `counting_config`, `jobs`) and a row's figure
(`figure`) are defined here, once, for `specdec ab` (`ab_work`), bisect, the report, a user's asv suite
(`user_bench`) and the repository's own asv harness (benchmarks/harness.py, which cannot import the package).
"""

from __future__ import annotations

import json
import os
import runpy
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
_load = runpy.run_path(str(HERE.parent / "method.py"))["load"]  # the method's loader (method.py), run by path
WORKER = HERE.parent / "ab_worker.py"  # measure's top: the counting child is the worker ab runs
PRELOAD_TIMEOUT = 900.0  # seconds the zygote may take to import torch and the rest under simulation
JOB_TIMEOUT = 1800.0  # seconds one child may take: import, build, count every row
LAYOUTS = (1, 2, 3)  # layout seeds counted for every revision (`work.perturb`; 0 would be the unshifted layout)
COUNT_CHARS = 12  # characters of a counted generation row: the timed row's code, at a fraction of the cost
ROW_KINDS = ("target-only", "pass", "verify", "draft", "spec", "round")  # ab_worker's kinds but the batched


def _method() -> str:
    """The counting method's name: its figure's recipe and its plan (layouts, generation length, warm-ups and
    counted calls per kind of row, ONNX Runtime's telemetry off: `work.ORT_TELEMETRY`). Counts made under
    different names are not judged against each other."""
    plan = " ".join(f"{kind} {w}+{c}" for kind, (w, c) in sorted(_work().PLAN.items()))
    return f"layouts-v4 (layouts {','.join(map(str, LAYOUTS))}; {COUNT_CHARS} chars; {plan}; ort telemetry off)"


def counting_config(config: dict, batched: bool = False) -> dict:
    """The workers' config as a counting child takes it: rows without facts, generations COUNT_CHARS long, one
    thread (callgrind adds every thread's instructions, the hardware counter counts the calling thread's), the
    batched rows only where asked for."""
    only = config.get("only") or (ROW_KINDS + ("batch",) if batched else ROW_KINDS)
    return {**config, "count": True, "chars": min(config["chars"], COUNT_CHARS), "threads": 1, "only": list(only)}


def jobs() -> int:
    """Counting children at once: one per CPU this process may use, at most two (each child holds a model)."""
    return max(1, min(2, len(os.sched_getaffinity(0))))


def figure(counts: list[dict], key: str = "fewest") -> list[float]:
    """A row's figure in each layout: its Count dicts' `key` ("fewest": the verdict figure; "alloc")."""
    return [float(c[key]) for c in counts if c.get(key) is not None]


def count_tree(tree: str, config: dict, rows: list[str], kind: str, layouts, progress=lambda line: None) -> dict:
    """One tree's `rows` counted as `specdec ab` counts a revision (`count_trees`), each counted row's figure the
    mean over `layouts` of its `fewest`: the one figure of a row not judged layout by layout, which asv's work
    benchmarks (the repository's harness and a user's suite) report. {"rows": {row: figure}, "reasons": {row:
    why it was not counted}, "facts": {row: the worker's facts}}."""
    got = count_trees({"C": tree}, config, rows, kind, list(layouts), jobs=jobs(), progress=progress)
    answers = got["answers"]["C"]
    figures = {row: sum(f) / len(f) for row, per in got["rows"].items() if (f := figure(per["C"]))}
    return {"rows": figures, "facts": {row: answers[row].get("facts", {}) for row in figures},
            "reasons": {row: (answers.get(row) or {}).get("reason") or "not built" for row in rows if row not in figures}}


def _work():
    """The counter, `work.py`: loaded by path through the method's loader (`method.py`), the one module object the
    worker script and the harness load too."""
    return _load("work/work.py")


METHOD = _method()


class CountError(RuntimeError):
    """The counting zygote or one of its children failed; the message has its traceback or log's tail."""


class Channel:
    """A worker process (`ab_worker.py`) spoken to in JSON lines, one request and one answer at a time: `ab`'s
    timing workers and the counting zygote alike. A failure raises `error` with `who` in its message and, where
    the process died, its log's tail."""

    error: type[Exception] = RuntimeError
    proc: subprocess.Popen
    log: Path
    who: str

    def send(self, req: dict) -> None:
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise self.error(self._died()) from None

    def receive(self, timeout: float, op: str = "") -> dict:
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise self.error(f"{self.who} gave no answer{f' to {op!r}' if op else ''} in {timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            raise self.error(self._died())
        answer = json.loads(line)
        if "error" in answer:
            raise self.error(f"{self.who} failed:\n{answer['error']}")
        return answer

    def ask(self, req: dict, timeout: float = 120.0) -> dict:
        self.send(req)
        return self.receive(timeout, req["op"])

    def _died(self) -> str:
        self.proc.poll()
        tail = self.log.read_text()[-2000:] if self.log.exists() else ""
        return f"{self.who} exited ({self.proc.returncode}):\n{tail}"


class Zygote(Channel):
    """The counted process that forks the children."""

    error = CountError
    who = "the counting process"

    def __init__(self, kind: str, folder: str, env: dict | None = None):
        self.log = Path(folder) / "zygote.log"
        self.out = str(Path(folder) / "cg.%p")
        with open(self.log, "w") as err:
            self.proc = _work().popen([sys.executable, str(WORKER)], kind, self.out, env or {}, cwd=folder,
                                      stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True)

    def close(self, polite: bool = True) -> None:
        """End the zygote and every child it forked (they share its process group): asked to exit first when
        `polite`, else (an interrupt, an error) killed at once."""
        if polite and self.proc.poll() is None:
            try:
                self.proc.stdin.write(json.dumps({"op": "exit"}) + "\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            stream.close()


class Pool:
    """One counting zygote kept for several counts (the steps of a bisect): its start-up, importing torch, numpy
    and ONNX Runtime under the counter (25-65 s on a 2-core VM), is paid once. `count` may be called any number of
    times; every tree of every call is seen through a link of one length (`.../tNNN/A`)."""

    def __init__(self, kind: str, threads: int = 1, progress: Callable[[str], None] = lambda line: None):
        self.kind, self.counts, self.t0 = kind, 0, time.monotonic()
        self._tmp = tempfile.TemporaryDirectory(prefix="specdec-work-")
        self.folder = self._tmp.name
        try:
            self.zygote = Zygote(kind, self.folder)
            self.pre = self.zygote.ask({"op": "preload", "config": {"threads": threads}}, PRELOAD_TIMEOUT)
        except BaseException:  # an interrupt while it imports included: the zygote goes with the folder
            if hasattr(self, "zygote"):
                self.zygote.close(polite=False)
            self._tmp.cleanup()
            raise
        self.ready = round(time.monotonic() - self.t0)
        progress(f"work: counting process ready ({self.ready} s; {_work().NAMES[kind]})")

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, kind, *exc) -> None:
        self.close(polite=kind is None)

    def close(self, polite: bool = True) -> None:
        try:
            self.zygote.close(polite)
        finally:
            self._tmp.cleanup()

    def count(self, trees: dict[str, str], config: dict, rows: list[str], layouts: list[int], jobs: int = 1,
              warmup: int | None = None, calls: int | None = None,
              progress: Callable[[str], None] = lambda line: None, keep: str | None = None,
              by_tree: bool = False) -> dict:
        """`count_trees`' answer for these trees, counted by this pool's zygote."""
        t0 = time.monotonic()
        sub = Path(self.folder) / f"t{self.counts:03d}"
        self.counts += 1
        sub.mkdir()
        links = {}
        for label, path in trees.items():
            links[label] = sub / label
            links[label].symlink_to(os.path.abspath(path), target_is_directory=True)
        # A0 B0 A1 B1 ...: like with like, close in time; `by_tree` (a study of many trees): each tree's layouts
        # together, so the trees done are whole if it is stopped
        queue = ([(label, layout) for label in trees for layout in layouts] if by_tree else
                 [(label, layout) for layout in layouts for label in trees])
        answers: dict = {label: {} for label in trees}
        running: dict = {}
        done = 0
        while queue or running:
            while queue and len(running) < max(1, jobs):
                label, layout = queue.pop(0)
                out = str(sub / f"answer-{label}-{layout}.json")
                req = {"op": "fork", "out": out, "layout": layout, "rows": rows, "warmup": warmup,
                       "calls": calls, "config": {**config, "source": str(links[label])}}
                running[self.zygote.ask(req, 60.0)["pid"]] = (label, layout, out)
            ended = self.zygote.ask({"op": "wait"}, JOB_TIMEOUT)
            label, layout, out = running.pop(ended["pid"])
            answers[label][layout] = _answer(out, label, layout, ended["status"])
            done += 1
            progress(f"work {done}/{len(trees) * len(layouts)}: {label} layout {layout} counted "
                     f"({time.monotonic() - t0:.0f} s)")
        if keep:
            _keep(self.folder, sub, keep)
        first = {label: answers[label][layouts[0]]["rows"] for label in trees}
        names = [r for r in rows if all(r in answers[label][layouts[0]]["counts"] for label in trees)]
        out = {r: {label: [answers[label][i]["counts"][r] for i in layouts] for label in trees} for r in names}
        return {"rows": out, "answers": first, "seconds": round(time.monotonic() - t0, 1), "layouts": list(layouts),
                "preloaded": self.pre.get("preloaded"), "threads": self.pre.get("threads"),
                "aslr": self.pre.get("aslr")}


def count_trees(trees: dict[str, str], config: dict, rows: list[str], kind: str, layouts: list[int],
                jobs: int = 1, warmup: int | None = None, calls: int | None = None,
                progress: Callable[[str], None] = lambda line: None, keep: str | None = None,
                by_tree: bool = False, pool: Pool | None = None) -> dict:
    """Count `rows` of every tree (label -> folder holding the revision's code) in every layout: in `pool`'s
    zygote when one is given, else in a zygote of its own, started and ended here.

    Returns {"rows": {row: {label: [Count dict per layout, in `layouts` order]}}, "answers": {label: the rows'
    setup answer (ok, reason, facts)}, "seconds" (the zygote's start-up included when it is this call's),
    "layouts", "preloaded"}. A row some tree cannot build is left out of "rows" (its answer says why). With
    `keep` (a folder), every child's dumps and answers are kept there (the determinism study reads them per
    function); `by_tree` counts each tree's layouts one after another."""
    if pool is not None:
        return pool.count(trees, config, rows, layouts, jobs, warmup, calls, progress, keep, by_tree)
    t0 = time.monotonic()
    with Pool(kind, config.get("threads", 1), progress) as own:
        got = own.count(trees, config, rows, layouts, jobs, warmup, calls, progress, keep, by_tree)
    return {**got, "seconds": round(time.monotonic() - t0, 1)}


def _answer(out: str, label: str, layout: int, status: int) -> dict:
    if not os.path.exists(out):
        raise CountError(f"the counting child of {label} (layout {layout}) exited ({status}) without an answer")
    with open(out) as f:
        answer = json.load(f)
    if "error" in answer:
        raise CountError(f"counting {label} (layout {layout}) failed:\n{answer['error']}")
    return answer


def _keep(folder: str, sub: Path, keep: str) -> None:
    """The zygote's folder's files (dumps, its log) and this count's answers, copied into `keep`."""
    import shutil

    os.makedirs(keep, exist_ok=True)
    for base in (folder, str(sub)):
        for entry in os.listdir(base):
            path = os.path.join(base, entry)
            if os.path.isfile(path) and not os.path.islink(path):
                shutil.copy2(path, os.path.join(keep, entry))
