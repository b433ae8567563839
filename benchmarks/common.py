"""Cached models and drafts for the asv suite, and the settings every benchmark shares.

asv (asv_runner >= 0.3) calls `setup` before every timed call, so nothing heavy is built there: the target
and the drafts come from the module-level caches below, built once per benchmark process.
"""

import functools
import os

import numpy as np
import torch

import specdec

THREADS = int(os.environ.get("SPECDEC_BENCH_THREADS", "1"))  # torch threads for every timing (recorded as a param)
PROMPT = "ROMEO:"
CHARS = 200
SEED = 0
DRAFTS = ["bigram", "int8", "int4", "ngram", "small", "int8-dynamic"]
KS = [1, 2, 4, 8]
COST_CONTEXT = specdec.encode("KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up")


def fix_threads() -> int:
    torch.set_num_threads(THREADS)
    return THREADS


@functools.lru_cache(maxsize=None)
def target():
    fix_threads()
    model = specdec.load_target()
    model.setup_cache(1)
    return model


@functools.lru_cache(maxsize=None)
def draft(name: str):
    """The named draft; NotImplementedError (asv's 'skip') on commits that do not have it yet."""
    if name not in specdec.DRAFTS:
        raise NotImplementedError(f"draft {name!r} does not exist at this commit")
    return specdec.make_draft(name, target())


def available(names):
    return [n for n in names if n in specdec.DRAFTS]


def generation_stats() -> dict:
    """Stats of the deterministic benchmark generations (seed 0, 200 characters), keyed 'draft/k'.

    Plain dicts, so that a class's `setup_cache` can return them (asv pickles the value to disk).
    """
    return {f"{n}/{k}": specdec.speculative_generate(target(), draft(n), PROMPT, CHARS, k=k, seed=SEED).stats.to_dict()
            for n in available(DRAFTS) for k in KS}


def draft_character(name: str):
    """A call that drafts one character as a round pays for it: cache step back, call, sampling."""
    d = draft(name)
    rng = np.random.default_rng(0)
    ctx = COST_CONTEXT
    d.reset()
    d.propose(ctx, 1, rng, 1.0)

    def call():
        d.rollback(len(ctx) - 1)
        d.propose(ctx, 1, rng, 1.0)

    return call


def costs() -> dict:
    """Round-robin cost measurement of the target and every draft (the report's Costs table), as a dict."""
    from dataclasses import asdict

    from specdec import timing

    drafts = {n: draft(n) for n in available(DRAFTS)}
    with timing.threads(THREADS):
        c = timing.measure_costs(target(), drafts, KS, samples=15, number=20, threads_used=THREADS)
    return {**asdict(c), "c": {n: c.c(n) for n in drafts}, "c_fastest": {n: c.c_fastest(n) for n in drafts}}
