"""One side of `specdec ab`: a worker process that times calls of one revision's code on request.

Run as a script (never imported by the package): `python ab_worker.py` with the revision's source tree first on
PYTHONPATH. It talks to its parent (`measure.ab`) in JSON lines, one request on stdin, one answer on stdout:

    {"op": "setup", "config": {...}} -> {"rows": {name: {"ok", "reason", "facts"}}, "specdec": path, ...}
    {"op": "pin", "cpu": 1}          -> {"cpus": [1]}
    {"op": "number", "row": name, "seconds": 0.015} -> {"number": n}   calls that fill a sample
    {"op": "time", "row": name, "number": n}        -> {"t": seconds}  n calls, timed as one sample
    {"op": "exit"}

Like `benchmarks/harness.py`, this file is the method, fixed while the code under test varies: it imports only
the standard library, numpy, torch and the revision's *public* API (`specdec.load_target`, `make_draft`,
`generate`, `speculative_generate`, the target's `tokenize`/`ids`/`setup_cache`/call and the Draft interface),
and a row the revision cannot run is answered `ok: false` with the reason, never a crash. Nothing of the
running specdec is imported here: its own directory is dropped from sys.path before anything else.
"""

from __future__ import annotations

import gc
import hashlib
import json
import os
import sys
import time
import traceback

if sys.path and os.path.abspath(sys.path[0]) == os.path.dirname(os.path.abspath(__file__)):
    sys.path.pop(0)  # this script's folder holds the running package's modules: never import them here

COST_TEXT = "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up"


def _threads(n: int) -> dict:
    """torch's intra-op threads and numpy's BLAS threads both set to n (recorded in the answer)."""
    import torch

    torch.set_num_threads(n)
    blas = None
    try:
        from threadpoolctl import threadpool_info, threadpool_limits

        threadpool_limits(limits=n, user_api="blas")
        counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
        blas = max(counts) if counts else None
    except ImportError:  # a revision's environment without threadpoolctl: recorded as unknown
        pass
    return {"torch": torch.get_num_threads(), "blas": blas}


def _encode(target, specdec, text: str) -> list[int]:
    return list(target.tokenize(text)) if hasattr(target, "tokenize") else list(specdec.encode(text))


class _Replay:
    """A draft that hands back, in order, what a real draft proposed in one generation, and puts the shared
    generator where the real draft left it: the round without its draft (the same rounds, the same rule's
    draws, the draft's own work gone). `record` wraps a draft and keeps its proposals."""

    cpu_only = False

    def __init__(self, draft):
        self.inner, self.name = draft, f"replay:{getattr(draft, 'name', 'draft')}"
        self.kept: list[tuple] = []
        self.i = 0
        self.recording = True

    def reset(self) -> None:
        self.i = 0
        if self.recording:
            self.kept.clear()
            self.inner.reset()

    def rollback(self, n_valid: int) -> None:
        if self.recording:
            self.inner.rollback(n_valid)

    def propose(self, tokens, k, rng, temperature):
        if self.recording:
            ids, q = self.inner.propose(tokens, k, rng, temperature)
            self.kept.append((ids, q, rng.bit_generator.state))
            return ids, q
        ids, q, state = self.kept[self.i]
        self.i += 1
        rng.bit_generator.state = state
        return ids, q

    def weight_bytes(self) -> int:
        return 0


def _target(specdec, cfg: dict):
    import inspect

    options = {}
    if "backend" in inspect.signature(specdec.load_target).parameters and cfg.get("backend"):
        options["backend"] = cfg["backend"]
    if cfg.get("dtype"):
        options["dtype"] = cfg["dtype"]
    target = specdec.load_target(cfg.get("target"), **options)
    target.setup_cache(1)
    return target


def _facts(out) -> dict:
    """What a generation decides exactly given the seed: compared across revisions as behaviour, not timing."""
    st = out.stats
    text = out.text if isinstance(out.text, str) else str(out.text)
    return {"target_passes": int(st.target_passes), "drafted": int(getattr(st, "drafted", 0)),
            "accepted": int(getattr(st, "accepted", 0)),
            "text_sha256": hashlib.sha256(text.encode()).hexdigest()[:16]}


def _pass_call(target, ctx: list[int], n: int):
    """The target's plain forward over n new positions at the cost context's end. Its cache is filled with the
    context before every sample (`prepare`, untimed): a target whose cache must hold exactly `pos` tokens (a
    Hugging Face model's) then finds them there whatever row ran before, and each call drops what the last
    one added."""
    import torch

    pos = len(ctx) - n
    x, whole = target.ids(ctx[pos:]), target.ids(ctx)

    def prepare():
        with torch.inference_mode():
            target.setup_cache(1)
            target(whole, 0)

    def call():
        with torch.inference_mode():
            target(x, pos)

    call.prepare = prepare
    return call


def _draft_call(draft, ctx: list[int], k: int, temperature: float):
    """A draft's proposal as a round pays for it: step back one token, propose k after the context."""
    import numpy as np

    rng = np.random.default_rng(0)
    draft.reset()
    draft.propose(ctx, 1, rng, temperature)

    def call():
        draft.rollback(len(ctx) - 1)
        draft.propose(ctx, k, rng, temperature)

    return call


def _rows(specdec, cfg: dict) -> dict:
    """name -> (call, facts) for every row the config asks for; (None, reason) where this revision cannot."""
    target = _target(specdec, cfg)
    prompt, chars, seed, temp = cfg["prompt"], cfg["chars"], cfg["seed"], cfg["temperature"]
    ctx = _encode(target, specdec, COST_TEXT)
    rows: dict = {}

    def plain():
        return specdec.generate(target, prompt, chars, seed=seed, temperature=temp)

    rows["target-only"] = (plain, _facts(plain()))
    rows["pass 1"] = (_pass_call(target, ctx, 1), {})
    for k in cfg["ks"]:
        rows[f"verify {k + 1}"] = (_pass_call(target, ctx, k + 1), {})
    greedy = specdec.generate(target, prompt, chars, seed=seed, temperature=0.0).text
    for name in cfg["drafts"]:
        try:
            draft = specdec.make_draft(name, target)
        except Exception as exc:  # noqa: BLE001 -- a revision without the draft: its rows are unavailable
            reason = f"{type(exc).__name__}: {exc}".splitlines()[0][:200]
            for row in _draft_rows(name, cfg["ks"]):
                rows[row] = (None, reason)
            continue
        rows[f"draft {name}"] = (_draft_call(draft, ctx, max(cfg["ks"]), temp), {})
        for k in cfg["ks"]:
            rows.update(_speculative_rows(specdec, target, draft, name, k, cfg, greedy))
    return rows


def _draft_rows(name: str, ks: list[int]) -> list[str]:
    return [f"draft {name}"] + [f"{kind} {name} k={k}" for k in ks for kind in ("spec", "round")]


def _speculative_rows(specdec, target, draft, name: str, k: int, cfg: dict, greedy: str) -> dict:
    """End-to-end speculative generation at k, and the same rounds with the draft's work replayed."""
    prompt, chars, seed, temp = cfg["prompt"], cfg["chars"], cfg["seed"], cfg["temperature"]

    def spec():
        return specdec.speculative_generate(target, draft, prompt, chars, k=k, seed=seed, temperature=temp)

    sampled = _facts(spec())
    facts = {**sampled, "greedy_equal": specdec.speculative_generate(
        target, draft, prompt, chars, k=k, seed=seed, temperature=0.0).text == greedy}
    replay = _Replay(draft)

    def rounds():
        return specdec.speculative_generate(target, replay, prompt, chars, k=k, seed=seed, temperature=temp)

    recorded = rounds()
    replay.recording = False
    again = rounds()
    out = {f"spec {name} k={k}": (spec, facts)}
    if again.text == recorded.text and _facts(again) == sampled:
        out[f"round {name} k={k}"] = (rounds, {"rounds": len(replay.kept)})
    else:  # the replay must be the same generation, or it times something else
        out[f"round {name} k={k}"] = (None, "replaying the draft's proposals did not reproduce the generation")
    return out


def _number(call, seconds: float) -> int:
    """Calls that fill a sample of `seconds` (at least one): batches of 1, 2, 4, ... calls until one takes a
    fifth of it (a single cold call says little about a warm one), then scaled to the whole."""
    n = 1
    while True:
        batch = _timed(call, n) * n
        if batch >= seconds / 5 or n >= 1 << 20:
            return max(1, round(n * seconds / batch)) if batch > 0 else n
        n *= 2


CLOCK = time.perf_counter  # replaced by the thread's CPU clock with one thread (see `_clock`)


def _clock(threads: int):
    """With one thread every call's work runs in this thread, so its CPU time is the call's time without the
    moments another process held the CPU; with more threads, or a coarse thread clock, the wall clock."""
    if threads != 1:
        return time.perf_counter, "perf_counter"
    t0 = t1 = time.thread_time()
    while t1 == t0:
        t1 = time.thread_time()
    return (time.thread_time, "thread_time") if t1 - t0 < 1e-5 else (time.perf_counter, "perf_counter")


def _timed(call, number: int) -> float:
    """Seconds per call over `number` back-to-back calls, the collector held off in between (after the call's
    untimed `prepare`, where it has one)."""
    prepare = getattr(call, "prepare", None)
    if prepare is not None:
        prepare()
    gc.collect()
    gc.disable()
    try:
        t0 = CLOCK()
        for _ in range(number):
            call()
        return (CLOCK() - t0) / number
    finally:
        gc.enable()


def _setup(cfg: dict) -> tuple[dict, dict]:
    global CLOCK
    threads = _threads(cfg["threads"])
    CLOCK, clock_name = _clock(cfg["threads"])
    import specdec

    where = os.path.dirname(os.path.abspath(specdec.__file__))
    expected = os.path.join(os.path.abspath(cfg["source"]), "specdec")
    if os.path.realpath(where) != os.path.realpath(expected):
        raise RuntimeError(f"imported specdec from {where}, not from the revision's {expected}")
    rows = _rows(specdec, cfg)
    gc.collect()
    gc.freeze()  # what setup built is kept out of every later collection: a sample's collect then costs little
    answer = {name: {"ok": call is not None, "reason": "" if call is not None else facts,
                     "facts": facts if call is not None else {}} for name, (call, facts) in rows.items()}
    info = {"specdec": where, "version": getattr(specdec, "__version__", None), "threads": threads,
            "clock": clock_name, "pid": os.getpid(), "hash_seed": os.environ.get("PYTHONHASHSEED")}
    return {name: call for name, (call, _) in rows.items() if call is not None}, {"rows": answer, **info}


def serve(stdin=sys.stdin, stdout=sys.stdout) -> None:
    calls: dict = {}
    for line in stdin:
        req = json.loads(line)
        op = req["op"]
        try:
            if op == "exit":
                return
            if op == "setup":
                calls, answer = _setup(req["config"])
            elif op == "pin":
                os.sched_setaffinity(0, [req["cpu"]])
                answer = {"cpus": sorted(os.sched_getaffinity(0))}
            elif op == "number":
                answer = {"number": _number(calls[req["row"]], req["seconds"])}
            elif op == "time":
                answer = {"t": _timed(calls[req["row"]], req["number"])}
            else:
                answer = {"error": f"unknown op {op!r}"}
        except Exception:  # noqa: BLE001 -- the parent shows the revision's traceback and stops
            answer = {"error": traceback.format_exc()}
        stdout.write(json.dumps(answer) + "\n")
        stdout.flush()


if __name__ == "__main__":
    # The protocol owns stdout: anything the revision prints goes to stderr instead.
    channel = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    serve(sys.stdin, channel)
