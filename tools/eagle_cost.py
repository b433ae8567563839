"""The cost c of drafts (default: the shipped `eagle`; any draft `make_draft` names), each relative to one
single-position target pass, measured close in time in one process, round-robin, on one thread.

    python tools/eagle_cost.py [--draft eagle [--draft NAME ...]] [--k 4] [--reps 12] [--chars 200] [--seed 0]
                               [--threads 1] [--json]

Each repetition runs, in turn (the order rotating between repetitions), one seeded speculative generation of
--chars characters per draft from a 32-character validation window, every `propose` call timed as the round
pays it (after the verify pass that handed the draft its states: a draft with its own cache adds the confirmed
positions there), and as many single-position target passes (the target's pass over one pending token at the
cache's position, then `sampling.probs` and one draw, as target-only generation pays a character). Printed per
draft: the median proposal time, its ratio to the median target pass (= k * c, the write-up's per-round draft
cost) and c (per drafted character). Check that no other heavy process runs first: the figures are timings.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import numpy as np
import torch

import specdec
from specdec.decoding.generate import speculative_generate
from specdec.model import sampling
from specdec.model.train import load_target

from eagle_acceptance import prompts  # tools/ is on the path


class _Timed:
    """A draft whose every propose call is timed (the rest delegated)."""

    def __init__(self, inner, times: list[float]):
        self.inner, self.times = inner, times

    def propose(self, tokens, k, rng, temperature):
        start = time.perf_counter()
        out = self.inner.propose(tokens, k, rng, temperature)
        self.times.append(time.perf_counter() - start)
        return out

    def __getattr__(self, name):
        return getattr(self.inner, name)


def target_passes(target, prompt_ids: list[int], n: int, seed: int) -> list[float]:
    """n single-position passes after a prefill of `prompt_ids`, each with its sampling, timed one by one."""
    rng = np.random.default_rng(seed)
    times = []
    with torch.inference_mode():
        target.setup_cache(1)
        logits = target(target.ids(prompt_ids), 0)
        tok = sampling.sample(sampling.probs(logits[0, -1], 1.0), rng)
        pos = len(prompt_ids)
        for _ in range(n):
            start = time.perf_counter()
            logits = target(target.ids([tok]), pos)
            tok = sampling.sample(sampling.probs(logits[0, -1], 1.0), rng)
            times.append(time.perf_counter() - start)
            pos += 1
    return times


def measure(target, names: list[str], k: int = 4, reps: int = 12, chars: int = 200, seed: int = 0) -> dict:
    windows = prompts(reps, 32, seed)  # the acceptance tool's seeded validation windows
    drafts = {n: specdec.make_draft(n, target) for n in names}
    times: dict[str, list[float]] = {n: [] for n in [*names, "target"]}
    order = [*names, "target"]
    for r in range(reps):
        prompt = windows[r]
        for who in order[r % len(order):] + order[:r % len(order)]:  # round-robin, the first rotating
            if who == "target":
                times["target"] += target_passes(target, target.tokenize(prompt), chars // 2, seed + r)
            else:
                speculative_generate(target, _Timed(drafts[who], times[who]), prompt, chars, k=k, seed=seed + r)
    step = statistics.median(times["target"])
    out = {"k": k, "reps": reps, "chars": chars, "seed": seed, "threads": torch.get_num_threads(),
           "target_pass_s": step, "target_passes": len(times["target"]), "drafts": {}}
    for n in names:
        med = statistics.median(times[n])
        out["drafts"][n] = {"proposals": len(times[n]), "propose_s": med, "round_cost": med / step,
                            "c": med / step / k}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draft", action="append", default=None, help="repeatable (default: eagle)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--reps", type=int, default=12)
    ap.add_argument("--chars", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    target = load_target()
    out = measure(target, a.draft or ["eagle"], a.k, a.reps, a.chars, a.seed)
    if a.json:
        print(json.dumps(out))
        return 0
    print(f"k={a.k}, {a.reps} round-robin repetitions, {a.threads} thread(s): target pass (1 position) "
          f"{out['target_pass_s'] * 1e6:.0f} us (median of {out['target_passes']})")
    for n, d in out["drafts"].items():
        print(f"  {n:12} proposal {d['propose_s'] * 1e6:.0f} us (median of {d['proposals']}): "
              f"k*c {d['round_cost']:.3f}, c {d['c']:.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
