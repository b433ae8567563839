"""The suite's counted rows: instructions per call, counted as `specdec ab` counts a revision.

The counting method is the running checkout's (specdec/measure/work/, loaded by path through `harness.method`),
never the commit's, so the figures of every commit are counted alike; a row's figure is deterministic to within
the work calibration's floor (docs/work.md).
"""

from __future__ import annotations

import functools

from . import common, harness


WORK_ROWS = ["target-only", "pass 1", "verify 5"] + [f"{kind} {d}{k}" for d in ("bigram", "ngram")
                                                    for kind, k in (("draft", ""), ("round", " k=4"), ("spec", " k=4"))]


# What `specdec ab` counts a revision with: the running checkout's `work_pool.py` (loaded by path, `harness.method`),
# where ab, bisect and a user's suite take it from too, so the two cannot drift apart.
WORK_LAYOUTS = list(harness.method("work/work_pool.py").LAYOUTS)  # layout seeds (`work.perturb`): a figure is their mean
WORK_CHARS = harness.method("work/work_pool.py").COUNT_CHARS  # characters of a counted generation: the timed row's code, cheaper


def work_config(backend: str) -> dict:
    """The counting children's config, `work_pool.counting_config` of this suite's pair: rows without their facts
    (`count`), generations at most WORK_CHARS long, one thread (callgrind adds every thread's instructions, the
    hardware counter counts the calling thread's). A smoke run builds the cheap rows only (the call path is the
    same); the rest skip there."""
    return harness.method("work/work_pool.py").counting_config(
        {"target": common.USER_TARGET, "backend": backend, "dtype": None, "drafts": ["bigram", "ngram"], "ks": [4],
         "chars": common.CHARS, "prompt": common.PROMPT, "seed": common.SEED, "temperature": common.TEMPERATURE,
         "threads": 1, "only": ["pass", "draft"] if common.SMOKE else None})


@functools.lru_cache(maxsize=None)
def work_counts(backend: str = "onnx") -> dict:
    """Instructions per call of the work rows, counted as `specdec ab` counts a revision: the running checkout's
    `work_pool.count_tree` (loaded by path with `work.py` and `ab_worker.py` beside it, never the commit's), the
    tree being the folder the commit's package is installed in; one zygote under the work counter (callgrind where
    the machine has no hardware counter), a forked child per layout of WORK_LAYOUTS. A row's figure is the mean
    over the layouts of its `fewest` (instructions outside the allocators and the type cache's misses); a round
    row's is divided by its rounds (instructions per round).

    Returns {"counter": name, "rows": {row: figure}, "reasons": {row: why it was not counted}}, or
    {"counter": None, "reason": why nothing counts here} (every work benchmark then skips with that reason).
    Under SPECDEC_BENCH_SMOKE only the pass and draft rows are counted, in one layout (its figures mean nothing;
    a user's pair: none)."""
    import importlib.util
    import sys
    from pathlib import Path

    avail = harness.method("work/work.py").probe()
    if avail.kind is None:
        return {"counter": None, "reason": avail.reason}
    if common.SMOKE and common.USER_TARGET:  # tools/check_history.py on a user's pair: minutes of simulation
        return {"counter": None, "reason": "a smoke run counts no user's pair (SPECDEC_TARGET set)"}
    package = importlib.util.find_spec("specdec")  # the commit's installed package: the folder holding it is the tree
    site = str(Path(package.origin).resolve().parents[1])
    layouts = WORK_LAYOUTS[:1] if common.SMOKE else WORK_LAYOUTS
    pool = harness.method("work/work_pool.py")
    got = pool.count_tree(site, work_config(backend), WORK_ROWS, avail.kind, layouts,
                          progress=lambda line: print(line, file=sys.stderr, flush=True))
    rows = {name: mean / got["facts"][name]["rounds"] if name.startswith("round") else mean
            for name, mean in got["rows"].items()}
    reasons = {name: ("a smoke run counts the pass and draft rows only" if common.SMOKE and why == "not built" else why)
               for name, why in got["reasons"].items()}
    return {"counter": avail.name, "rows": rows, "reasons": reasons}
