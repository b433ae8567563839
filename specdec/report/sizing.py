"""The report sized to the model: what one token costs here, measured before any other section, and the plan
that fits the budget with it.

The knobs (`build.FULL`, `build.QUICK`) are sized for the shipped model on the development VM, whose pass costs a
fraction of a millisecond. A user's model can cost tens of times more per pass, and a slower machine (or a loaded
one) makes the shipped model cost more too; then the fixed work alone (the exactness draws, the counts over the
workload, the profiled attribution) would eat the budget and leave the timed pairs one each. So before any of that
runs, `plan` times a short target-only and a short speculative generation per draft and a few exactness draws (on
the decision clock, `measure.clock.now`: what it reads decides), estimates each section from those costs, and
shrinks the report, in this order, until the estimate fits:

1. the attribution's profiled blocks (fewer repeats, shorter blocks, none) and the cost table's calls per sample
   (a sample of a slow model lasts as long with fewer calls); the exactness draws (down to MIN_SAMPLES) and
   contexts (down to one);
2. the token trees (none), then the adaptive-k rows (none);
3. the workload runs the counts and pairs cycle through (down to one);
4. the k values (down to the one nearest 4);
5. the generated length (down to MIN_CHARS).

Every model is sized alike, the shipped one too: its knobs stay where the estimate fits (on the development VM
they do, with room), and a slower machine sheds the same way a user's model does.

Each change is one line in the report (`doc["sizing"]["changes"]`). Where even the smallest plan does not fit,
one line says, before the timed sections, how long a budget this model needs (`budget_needed`).
Everything here is an estimate made before the sections it sizes: how far off it was shows in the sections
table (each section's seconds against its allotment).
"""

from __future__ import annotations

import math

from specdec.decoding.generate import generate, speculative_generate
from specdec.measure.clock import now
from specdec.measure.exactness import first_char_counts
from specdec.measure.timing import timed
from specdec.decoding.registry import TREE_DRAFTS

PROBE_TOKENS = 16  # tokens per probe generation: enough that the prefill does not dominate
REFERENCE_TOKEN_S = 0.5e-3  # a token of target-only generation that the knobs' call counts are sized for
FIXED_SHARE = 0.45  # at most this share of the budget left goes to the fixed work and the costs
MIN_CHARS = 32
# A profiled block of a transformers model costs about this many times its bare run (the profiler's events on
# its many small ops; the shipped model's fused passes cost less: its estimate errs long, on the safe side).
PROFILER_FACTOR = 12.0
PAIR_FACTOR = 1.5  # a pair costs its two generations and as much again: the warm-up, the refined model's terms
PROBE_DRAWS = 200  # exactness draws the probe times (a draw is a draft sample and the rule: tens of µs)
MIN_SAMPLES = 2_000  # exactness draws per draft and context the sizing keeps at least (TV's baseline is at the
# same count, so fewer draws lose power, not validity)


def probe(run) -> dict:
    """Seconds per generated token: target-only, and speculative per draft at the largest k; seconds per
    exactness draw. Timed on the decision clock (`timing.timed(clock=now)`): the plan follows from them, so a
    test's fake clock fixes them and the guard's scale reaches them."""
    item, seed = run.runs[0]
    n = min(PROBE_TOKENS, run.chars)

    def per_token(fn) -> float:
        fn()  # the first call warms caches and kernels
        return timed(fn, run.device, clock=now) / n  # a decision's input: the decision clock

    k = max(run.ks)
    target = per_token(lambda: generate(run.target, item.prompt, n, seed, run.temperature))
    drafts = {name: per_token(lambda d=d: speculative_generate(run.target, d, item.prompt, n, k, seed,
                                                               run.temperature))
              for name, d in run.objs.items()}
    name, draft = next(iter(run.objs.items()))  # the draws of every draft cost alike: the draft's q is drawn once
    draw = timed(lambda: first_char_counts(run.target, draft, item.prompt, k, PROBE_DRAWS), run.device,
                 clock=now) / PROBE_DRAWS
    return {"target_token_s": target, "spec_token_s": drafts, "draw_s": draw, "probe_tokens": n}


def estimate(run, p: dict) -> dict[str, float]:
    """Seconds each section is expected to take with the run's current knobs: the fixed counts, and each timed
    section's minimum (overhead's profiled blocks, three cost samples, every speedup row and the floor
    `min_pairs` times, each draft's adaptive triples, the greedy row's pairs)."""
    kn = run.knobs
    t, spec = p["target_token_s"], p["spec_token_s"]
    runs, chars, ks = len(run.runs), run.chars, run.ks
    tables = [n for n in spec if n in TREE_DRAFTS]
    trees = len(kn.get("trees") or []) * len(tables)
    # every k at the report's temperature, and the largest k again greedy (the engines' figures, table 2c)
    per_spec = sum(spec.values()) * (len(ks) + 1) + sum(spec[n] for n in tables) * len(kn.get("trees") or [])
    contexts = min(kn.get("contexts", 1), runs)
    exactness = contexts * (len(spec) + 1 + trees) * kn.get("samples", 0) * p.get("draw_s", 0.0)  # +1: the target
    return {
        "counts": runs * chars * per_spec + exactness,
        "overhead": 2 * 2 * kn["overhead_chars"] * kn["overhead_repeats"] * t * PROFILER_FACTOR,
        "costs": 3 * sum((len(ks) + trees) * kn["term_calls"] * 4 * (t + s) for s in spec.values()),
        "speedup": PAIR_FACTOR * kn["min_pairs"] * chars * (2 * t + t * (len(spec) * len(ks) + trees) + per_spec),
        "adaptive": (PAIR_FACTOR * kn["min_triples"] * chars * sum(t + 2 * s for s in spec.values())
                     if kn.get("adaptive", True) else 0.0),
        "greedy": PAIR_FACTOR * kn["min_pairs"] * chars * (t + max(spec.values())),
    }


def fits(e: dict[str, float], seconds: float, shares: dict[str, float]) -> bool:
    """The counts within FIXED_SHARE of the time; the speedup rows' minimum within the speedup section's share
    of the rest (the answer: the scheduler gives it that share, and it uses all of it on a slow model); and every
    timed section's minimum within the rest (time a section leaves unused goes to the ones after it, so the
    smaller sections are held to the total, not to their own small shares)."""
    left = seconds - e["counts"]
    return (e["counts"] <= FIXED_SHARE * seconds and e["speedup"] <= shares["speedup"] * left
            and sum(e[name] for name in shares) <= left)


def plan(run, seconds: float, shares: dict[str, float], given: dict | bool | None = None) -> dict:
    """Measure the per-token costs and shrink `run` (knobs, runs, ks, chars) until the estimate fits
    `seconds` with each timed section in its `shares`; returns report.json's `sizing`. Any model, the shipped one
    too, keeps every knob the estimate fits. given: the costs (`probe`'s keys; draw_s may be left out)
    instead of measuring them -- a fixed plan, the same on any machine; False: no sizing at all (the knobs as
    given; the plan records only that)."""
    if given is False:
        return {"seconds": round(seconds, 1), "changes": [], "fixed": "off"}
    p = probe(run) if given is None else {"probe_tokens": 0, **given, "fixed": "given"}
    changes = _shrink(run, p, seconds, shares)
    e = estimate(run, p)
    out = {**p, "estimate_s": {k: round(v, 2) for k, v in e.items()}, "seconds": round(seconds, 1),
           "changes": changes}
    if not fits(e, seconds, shares):
        # the smallest budget whose time left would fit this plan, plus what was spent before the sizing
        need = max(e["counts"] / FIXED_SHARE, e["counts"] + e["speedup"] / shares["speedup"],
                   e["counts"] + sum(e[name] for name in shares))
        out["budget_needed"] = math.ceil(run.knobs["budget"] - seconds + need)
        run.log(f"WARNING: this budget gives no verdict for this model: its smallest report needs about "
                f"{need:.0f} s and {seconds:.0f} s are left; give --budget {out['budget_needed']} or more")
    for change in changes:
        run.log(f"    sized for this model: {change}")
    return out


def _shrink(run, p: dict, seconds: float, shares: dict[str, float]) -> list[str]:
    """The knobs' changes, in order (the module docstring's steps), until the estimate fits or none is left."""
    changes: list[str] = []
    kn = run.knobs
    scale = REFERENCE_TOKEN_S / max(p["target_token_s"], 1e-9)
    if scale < 0.5:  # a model clearly slower than the knobs assume
        for key, floor in (("cost_calls", 2), ("term_calls", 2)):
            new = max(floor, round(kn[key] * scale))
            if new < kn[key]:
                changes.append(f"{key.replace('_', ' ')} per cost sample {kn[key]} -> {new}")
                kn[key] = new
    draws = [_fewer_draws] if p.get("draw_s") else []  # draws of no known cost: fewer would buy nothing
    for step in (_fewer_profiled, *draws, _no_trees, _no_adaptive, _fewer_runs, _fewer_ks, _shorter):
        while not fits(estimate(run, p), seconds, shares):
            change = step(run)
            if change is None:
                break
            changes.append(change)
    return changes


def _fewer_profiled(run) -> str | None:
    kn = run.knobs
    if kn["overhead_repeats"] > 3:
        old, kn["overhead_repeats"] = kn["overhead_repeats"], max(3, kn["overhead_repeats"] // 2)
        return f"profiled blocks per scope {old} -> {kn['overhead_repeats']}"
    if kn["overhead_chars"] > 8:
        old, kn["overhead_chars"] = kn["overhead_chars"], max(8, kn["overhead_chars"] // 2)
        return f"tokens per profiled block {old} -> {kn['overhead_chars']}"
    if kn["overhead_repeats"]:
        kn["overhead_repeats"] = 0
        return "profiled blocks: none (where the time goes is left out; `specdec overhead` measures it alone)"
    return None


def _fewer_draws(run) -> str | None:
    kn = run.knobs
    if kn.get("samples", 0) > MIN_SAMPLES:
        old, kn["samples"] = kn["samples"], max(MIN_SAMPLES, kn["samples"] // 2)
        return f"exactness draws per draft and context {old} -> {kn['samples']}"
    if kn.get("contexts", 1) > 1:
        old, kn["contexts"] = kn["contexts"], 1
        return f"exactness contexts {old} -> 1"
    return None


def _no_trees(run) -> str | None:
    if not run.knobs.get("trees"):
        return None
    run.knobs["trees"] = []
    return "token trees: none (each tree configuration is one more row to count and time)"


def _no_adaptive(run) -> str | None:
    if not run.knobs.get("adaptive", True):
        return None
    run.knobs["adaptive"] = False
    return "adaptive k: not timed (its triples of every draft come after the fixed-k answer)"


def _fewer_runs(run) -> str | None:
    if len(run.runs) <= 1:
        return None
    old = len(run.runs)
    run.runs[:] = run.runs[: max(1, old // 2)]  # the first ones: each prompt category comes early in the cycle
    return f"workload runs {old} -> {len(run.runs)}"


def _fewer_ks(run) -> str | None:
    if len(run.ks) <= 1:
        return None
    old = list(run.ks)
    drop = max(old, key=lambda k: (abs(math.log2(k) - 2), k))  # the k farthest from 4 goes first
    run.ks[:] = [k for k in old if k != drop]
    return f"k values {' '.join(map(str, old))} -> {' '.join(map(str, run.ks))}"


def _shorter(run) -> str | None:
    if run.chars <= MIN_CHARS:
        return None
    old, run.chars = run.chars, max(MIN_CHARS, run.chars // 2)
    return f"generated length {old} -> {run.chars}"
