"""Make a scratch commit that is slower by a known amount, for checking what `specdec ab` finds.

    python tools/ab_inject.py draft --size 0.03     # bigram's proposal +3 % of its own time per token
    python tools/ab_inject.py round --size 0.03     # every speculative round (settle_round) +3 %, no draft touched
    python tools/ab_inject.py pass --size 0.03      # every onnx target pass +3 % of a single-position pass
    specdec ab HEAD scratch/inject-draft-3          # then: is it found, and only where it should be?

The slowdown is a busy wait (CPU time, which the workers' clock counts) wrapped around one function, its length a
fraction `--size` of that function's own time measured here first. The tool then measures the injected size
separately, in this one process: every row of `specdec ab` timed with and without the same wrapper, alternated
(A B B A blocks, the median of the log ratios). `ab`'s estimate is judged against that figure, so the wrapper's
own call overhead is part of the injected size, not a bias of the method. The commit goes on a branch
(default scratch/inject-CASE-PERCENT) made from HEAD in a temporary worktree: the checkout is not touched.
Prints one JSON object: the branch, the busy wait, and the measured size per row.
"""

from __future__ import annotations

import argparse
import gc
import os
import importlib
import json
import math
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from scipy import stats

import specdec
from specdec.measure import ab_rows, ab_worker
from specdec.measure.ab.ab import SAMPLE_SECONDS

# case -> (module, class or None, function, busy wait scales with the proposal's k)
TARGETS = {
    "draft": ("specdec.decoding.drafts", "BigramDraft", "propose", True),
    "round": ("specdec.decoding.generate", None, "settle_round", False),
    "pass": ("specdec.model.backend_onnx", "_Session", "_lengths", False),
}
CONFIG = {"target": None, "backend": "onnx", "dtype": None, "drafts": ["bigram", "ngram"], "ks": [2, 4],
          "chars": 80, "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1}

WRAPPER = '''

# Injected by tools/ab_inject.py: a busy wait of {seconds:.3e} s per call{per_k}.
import functools as _inject_functools
import time as _inject_time


def _inject_slower(fn):
    @_inject_functools.wraps(fn)
    def wrapped(*args, **kwargs):
        end = _inject_time.perf_counter() + {seconds!r}{times_k}
        while _inject_time.perf_counter() < end:
            pass
        return fn(*args, **kwargs)

    return wrapped
'''


def wrapper_source(case: str, seconds: float) -> str:
    """The definition of `_inject_slower` (a busy wait of `seconds`, per proposed token for a proposal)."""
    per_k = TARGETS[case][3]
    return WRAPPER.format(seconds=seconds, per_k=" per proposed token" if per_k else "",
                          times_k=" * (args[2] if len(args) > 2 else kwargs['k'])" if per_k else "")


def commit_source(case: str, seconds: float) -> str:
    """What the commit appends to the module: the wrapper and the one line putting it around the function."""
    _, cls, fn, _ = TARGETS[case]
    where = f"{cls}.{fn}" if cls else fn
    return wrapper_source(case, seconds) + f"\n\n{where} = _inject_slower({where})\n"


def _holder(case: str):
    module, cls, fn, _ = TARGETS[case]
    mod = importlib.import_module(module)
    return (getattr(mod, cls) if cls else mod), fn


def _paired(call, toggle, blocks: int = 40) -> float:
    """log(with / without) of `call`, A B B A blocks, the 20 % trimmed mean: the injected size as this process
    sees it (pinned to one CPU, the collector frozen, as `ab`'s workers run)."""
    number = ab_worker._number(call, SAMPLE_SECONDS)
    logs = []
    for b in range(blocks):
        order = [False, True, True, False] if b % 2 == 0 else [True, False, False, True]
        t = {}
        for i, on in enumerate(order):
            toggle(on)
            t.setdefault(on, []).append(ab_worker._timed(call, number))
        toggle(False)
        logs += [math.log(w / wo) for w, wo in zip(t[True], t[False])]
    return math.expm1(float(stats.trim_mean(logs, 0.2)))


def own_seconds(case: str, calls: dict) -> float:
    """The wrapped function's own time per call (per token for a proposal), measured here."""
    if case == "draft":
        return ab_worker._timed(calls["draft bigram"], 2000) / max(CONFIG["ks"])
    if case == "pass":
        return ab_worker._timed(calls["pass 1"], 500)
    holder, fn = _holder(case)
    real, spent = getattr(holder, fn), []

    def timed(*args, **kwargs):
        t0 = time.thread_time()
        out = real(*args, **kwargs)
        spent.append(time.thread_time() - t0)
        return out

    setattr(holder, fn, timed)
    try:
        for _ in range(20):
            calls["spec bigram k=4"]()
    finally:
        setattr(holder, fn, real)
    return float(np.median(spent))


def measured_sizes(case: str, seconds: float, calls: dict) -> dict[str, float]:
    holder, fn = _holder(case)
    real = getattr(holder, fn)
    namespace: dict = {}
    exec(wrapper_source(case, seconds), namespace)  # the same wrapper the commit carries
    slow = namespace["_inject_slower"](real)
    return {row: _paired(call, lambda on: setattr(holder, fn, slow if on else real)) for row, call in calls.items()}


def commit(case: str, seconds: float, branch: str) -> str:
    module = TARGETS[case][0]
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True,
                               check=True).stdout.strip())
    with tempfile.TemporaryDirectory() as tmp:
        where = Path(tmp) / "tree"
        subprocess.run(["git", "worktree", "add", "-q", "-B", branch, str(where), "HEAD"], cwd=root, check=True)
        try:
            path = where / (module.replace(".", "/") + ".py")
            path.write_text(path.read_text() + commit_source(case, seconds))
            subprocess.run(["git", "commit", "-q", "-am", f"scratch: {case} slower by a busy wait of "
                            f"{seconds * 1e6:.3f} us per call"], cwd=where, check=True)
            return subprocess.run(["git", "rev-parse", "HEAD"], cwd=where, capture_output=True, text=True,
                                  check=True).stdout.strip()
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(where)], cwd=root, check=True)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("case", choices=sorted(TARGETS))
    p.add_argument("--size", type=float, default=0.03, help="the busy wait as a fraction of the function's time")
    p.add_argument("--branch", default=None, help="default scratch/inject-CASE-PERCENT")
    args = p.parse_args()
    if not 0 < args.size < 1:
        p.error(f"--size must be a fraction in (0, 1), got {args.size}")
    ab_rows._threads(1)
    ab_worker.CLOCK, _ = ab_worker._clock(1)
    calls = {name: call for name, (call, _) in ab_rows._rows(specdec, {**CONFIG, "source": "."}).items() if call}
    gc.collect()
    gc.freeze()
    os.sched_setaffinity(0, [max(os.sched_getaffinity(0))])
    seconds = args.size * own_seconds(args.case, calls)
    branch = args.branch or f"scratch/inject-{args.case}-{round(args.size * 100)}"
    sha = commit(args.case, seconds, branch)
    sizes = measured_sizes(args.case, seconds, calls)
    print(json.dumps({"case": args.case, "size": args.size, "busy_us": seconds * 1e6, "branch": branch,
                      "commit": sha, "measured": sizes}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
