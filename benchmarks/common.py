"""What the asv suite measures: its settings, and the target and drafts, reached through the public API only.

asv runs this suite (the benchmarks of the checkout it is started from) against every commit's installed
package, so nothing here may touch what an older commit lacks. It uses only what every commit since the first
trained target (7118b1c) has: `specdec.load_target`, `specdec.make_draft` (and the `Draft` interface it returns:
`reset`, `rollback`, `propose`, `weight_bytes`), `specdec.generate`, `specdec.speculative_generate`, the
target's `setup_cache(batch)` and `forward(idx, pos)`, and `specdec.encode`. A draft a commit does not have
raises NotImplementedError, which asv records as a skip, not a failure. Newer names are looked up, never
assumed: `specdec.BACKENDS` and `specdec.load_target(backend=...)` (the `backend` parameter), and for the
overhead share `specdec.pass_flops`, `specdec.pass_bytes`, `specdec.measure_machine` with the target's `config`.

Parameter lists are fixed here, never read from the installed package: asv discovers them once, with the newest
commit's package, and then runs each benchmark at every commit by its index into those lists, re-importing the
suite beside that commit's package -- a list read from the package would be shorter there, and the index would
point past its end (asv fails the benchmark: "Invalid benchmark parameter permutation index"). So the `backend`
values are fixed too (BACKENDS below, kept equal to the newest package's `specdec.BACKENDS` by a test), and a
commit that cannot run one -- its BACKENDS lacks the name, or its `load_target` takes no `backend` -- raises
NotImplementedError (a skip); `eager` there is the plain `load_target()`, the only way any target ran before
backends existed.

asv (asv_runner >= 0.3) calls `setup` before every timed call, so nothing heavy is built there: the target and
the drafts come from the module-level caches below, built once per benchmark process.

Environment: SPECDEC_BENCH_THREADS (torch threads and numpy's BLAS threads, default 1, recorded as the `threads`
parameter; `fix_threads` sets both before every timing);
SPECDEC_BENCH_SCALE multiplies every sample and pair count (default 1: a `--quick` run of the whole suite
stays under a minute per commit); SPECDEC_BENCH_SMOKE=1 shrinks them all to one and the generations to 20
characters (tools/check_history.py: is each benchmark callable at each commit?), so its figures mean nothing.

Your own pair: SPECDEC_TARGET (hf:FOLDER, hf:MODEL-ID already cached, or a checkpoint path) replaces the shipped
target, and SPECDEC_DRAFT (hf:FOLDER, prompt-lookup, or a registered draft name) is measured as the draft "user"
(a skip without it). The suite's figures are then that pair's, with the same lower-is-better meaning; the drafts
the user's target cannot have (the shipped model's int8/int4 copies and `small`) and every backend but eager skip.
asv keys results by machine, so keep the pair's apart from the shipped model's with a machine of its own
(`asv machine --yes --machine NAME`, then `asv run --machine NAME`; README "Your own models").
"""

from __future__ import annotations

import functools
import inspect
import os
import time

import torch

import specdec

THREADS = int(os.environ.get("SPECDEC_BENCH_THREADS", "1"))  # torch threads for every timing (recorded as a param)
SMOKE = os.environ.get("SPECDEC_BENCH_SMOKE") == "1"
SCALE = float(os.environ.get("SPECDEC_BENCH_SCALE", "1"))  # more samples and pairs (tools/regression_demo.py)
PROMPT = "ROMEO:"
CHARS = 20 if SMOKE else 200
SEED = 0
TEMPERATURE = 1.0
USER_TARGET = os.environ.get("SPECDEC_TARGET") or None  # the user's target instead of the shipped one
USER_DRAFT = os.environ.get("SPECDEC_DRAFT") or None  # the user's draft, measured as the draft "user"
USER = "user"  # the draft parameter value that stands for SPECDEC_DRAFT
# eagle and medusa read the target's hidden states (a commit before them skips them)
DRAFTS = ["bigram", "int8", "int4", "ngram", "small", "int8-dynamic", "eagle", "medusa", USER]
BACKENDS = ["eager", "fused", "numpy", "onnx"]  # fixed, like every list here (see above); a commit without one skips it
KS = [1, 4, 8]
POSITIONS = [k + 1 for k in KS]  # a verify pass at k scores k + 1 positions
DRAFT_K = 4  # c is one drafted character of a k = 4 proposal, as in the report
COST_TEXT = "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up"

# With one torch thread all of a call's work runs in the calling thread, so that thread's CPU time is the call's
# time on an idle machine, without the time a shared machine gives other processes meanwhile (which a wall clock
# counts: under load, per-pair wall-clock ratios of whole generations wandered by up to 40 % here between runs,
# thread CPU time by half that). With more threads the work is spread over threads: wall clock. So is it
# where the thread clock ticks coarsely (a kernel that counts CPU time in scheduler ticks).


def _clock():
    if THREADS != 1:
        return time.perf_counter
    steps = []
    for _ in range(5):  # the thread clock's step (it advances while this loop spins); the smallest of five
        t0 = t1 = time.thread_time()
        while t1 == t0:
            t1 = time.thread_time()
        steps.append(t1 - t0)
    return time.thread_time if min(steps) < 1e-5 else time.perf_counter


CLOCK = _clock()


def fix_threads() -> int:
    """Set torch's threads and numpy's BLAS threads (the numpy backend's matmuls) to THREADS before a timing;
    returns THREADS, which asv records as the `threads` parameter and which is then both counts.

    The BLAS limit matters for the clock: with one thread `CLOCK` is this thread's CPU time, which does not
    count BLAS worker threads, so a BLAS left at one thread per core would do part of a call's work off the
    clock. benchmarks/__init__.py sets the BLAS environment variables before numpy loads, but only where they
    are unset; threadpoolctl (a dependency of the package since it set BLAS threads itself) enforces the count
    whatever the environment said, at the commits that have it."""
    torch.set_num_threads(THREADS)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # an older commit's environment: the environment variables are all there is
        return THREADS
    threadpool_limits(limits=THREADS, user_api="blas")
    return THREADS


def blas_threads() -> int | None:
    """numpy's BLAS threads now (the most any BLAS loaded has); None without threadpoolctl or a BLAS."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return None
    counts = [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]
    return max(counts) if counts else None


def scaled(normal: int, smoke: int = 1) -> int:
    """A sample count: `normal` times SPECDEC_BENCH_SCALE, or `smoke` under SPECDEC_BENCH_SMOKE=1."""
    return smoke if SMOKE else max(1, round(normal * SCALE))


@functools.lru_cache(maxsize=None)
def cost_context() -> tuple[int, ...]:
    """The ids of the text every cost is measured after (~80 characters in, mid-context)."""
    return tuple(encode(COST_TEXT))


def encode(text: str) -> list[int]:
    """text in the target's ids: its own tokenizer where it has one (every commit's shipped target encodes with
    `specdec.encode`, the only way before targets tokenized for themselves)."""
    model = target()
    return list(model.tokenize(text)) if hasattr(model, "tokenize") else specdec.encode(text)


def target(backend: str = "eager"):
    """The target run by `backend`, built once per process; NotImplementedError (asv's 'skip') on a commit
    that cannot run that backend."""
    return _target(backend)


@functools.lru_cache(maxsize=None)
def _target(backend: str):
    fix_threads()
    model = _load(backend)
    model.setup_cache(1)  # every commit has setup_cache(batch); later ones keep a cache that fits
    return model


def _load(backend: str):
    if USER_TARGET is not None:
        return _load_user(backend)
    if backend not in getattr(specdec, "BACKENDS", ("eager",)):
        raise NotImplementedError(f"backend {backend!r} does not exist at this commit")
    if "backend" in inspect.signature(specdec.load_target).parameters:
        return specdec.load_target(backend=backend)
    if backend == "eager":  # before backends every target ran eager
        return specdec.load_target()
    raise NotImplementedError(f"load_target takes no backend at this commit (asked for {backend!r})")


def _load_user(backend: str):
    """SPECDEC_TARGET at a commit that can load it (`specdec.Target` marks those); eager only."""
    if backend != "eager":
        raise NotImplementedError(f"SPECDEC_TARGET runs as its library runs it: backend {backend!r} skips")
    if not hasattr(specdec, "Target"):
        raise NotImplementedError("this commit cannot load a target other than the shipped one")
    return specdec.load_target(USER_TARGET)  # a bad path is an error, not a skip


def available_backends() -> list[str]:
    """The backends among BACKENDS this commit can run."""
    out = []
    for name in BACKENDS:
        try:
            target(name)
        except NotImplementedError:
            continue
        out.append(name)
    return out


def draft(name: str, backend: str = "eager"):
    """The named draft, made from the `backend` target (a draft copied from the target runs its backend);
    NotImplementedError (asv's 'skip') on a commit that does not have the draft or the backend."""
    return _draft(name, backend)


@functools.lru_cache(maxsize=None)
def _draft(name: str, backend: str):
    model = target(backend)
    if name == USER and USER_DRAFT is None:
        raise NotImplementedError("draft 'user' measures SPECDEC_DRAFT, which is not set")
    try:
        return specdec.make_draft(USER_DRAFT if name == USER else name, model)
    except ValueError as exc:  # UnknownDraftError is a ValueError at every commit
        raise NotImplementedError(f"draft {name!r} does not exist at this commit ({exc})") from None


def available(names, backend: str = "eager") -> list[str]:
    """The drafts among `names` this commit has (for the `backend` target)."""
    out = []
    for name in names:
        try:
            draft(name, backend)
        except NotImplementedError:
            continue
        out.append(name)
    return out


def target_only(backend: str = "eager"):
    """One target-only generation of the benchmark's characters."""
    return specdec.generate(target(backend), PROMPT, CHARS, seed=SEED, temperature=TEMPERATURE)


def speculative(name: str, k: int, chars: int | None = None, backend: str = "eager"):
    """A call that generates the benchmark's characters (or `chars`) speculatively with the named draft at k."""
    t, d, n = target(backend), draft(name, backend), chars or CHARS
    return lambda: specdec.speculative_generate(t, d, PROMPT, n, k=k, seed=SEED, temperature=TEMPERATURE)


def skip_unless(cache: dict, key: str, what: str) -> None:
    """NotImplementedError (asv's skip) when a setup_cache result has no entry for this parameter."""
    if key not in cache:
        raise NotImplementedError(f"{what} does not exist at this commit")
