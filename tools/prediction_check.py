"""Does the refined model price what generation really pays? The cost samplers against real generations.

For each draft:k given, over the full report's runs of the shipped workload (`Workload.cycled(3)`), 1 thread:
1. the run's deterministic counts (passes, drafted, rounds that accepted every draft);
2. in alternation, --repeats times (default 15): three samples of the report's loop sampler (`round_samplers.loop_sampler`, at the
   report's mean position and mean prompt length), then every run generated target-only, then speculatively,
   each side's total time;
3. the measured speedup (median over repeats of the target-only / speculative totals) against the refined model
   from the samplers' medians, with and without each run's first step and first round priced apart, and each
   side's real time against the model's.

    python tools/prediction_check.py ngram:8 small:8 --backend onnx   # ~45 s per row; run nothing else meanwhile
"""
import argparse
import time

import numpy as np

from specdec import DRAFTS, load_target, load_workload, make_draft
from specdec.decoding import generate as decode
from specdec.measure import hygiene, stats, round_samplers

CHARS = 200



def _row(text: str) -> tuple[str, int]:
    name, _, k = text.partition(":")
    if name not in DRAFTS or not k.isdigit() or int(k) < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not draft:k; allowed drafts: {', '.join(DRAFTS)}, k >= 1")
    return name, int(k)


ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
ap.add_argument("rows", nargs="+", type=_row, help="draft:k, e.g. ngram:8")
ap.add_argument("--backend", default="onnx")
ap.add_argument("--repeats", type=int, default=15, help="alternations of samplers and generations")
args = ap.parse_args()

hygiene.set_threads(1)
target = load_target(backend=args.backend)
workload = load_workload("shakespeare24")
runs = workload.cycled(3)  # the full report's runs
prompt_chars = round(np.mean([len(item.prompt) for item, _ in runs]))
print(f"backend {args.backend}, {len(runs)} runs of {CHARS} characters, mean prompt {prompt_chars} characters")
with hygiene.no_gc():
    for name, k in args.rows:
        draft = make_draft(name, target)
        counts = [decode.speculative_generate(target, draft, it.prompt, CHARS, k, s).stats for it, s in runs]
        chars, passes = sum(c.chars for c in counts), sum(c.target_passes for c in counts)
        drafted = sum(c.drafted for c in counts)
        full = sum(c.accepted_per_position[k] for c in counts) / sum(c.draft_calls for c in counts)
        sampler = round_samplers.loop_sampler(target, draft, k, 1.0, "cpu", 6, full, prompt_chars + CHARS // 2,
                                      prompt_chars)
        terms, plain, spec = [], [], []
        for _ in range(args.repeats):
            terms += [sampler() for _ in range(3)]
            t0 = time.perf_counter()
            for it, s in runs:
                decode.generate(target, it.prompt, CHARS, s)
            t1 = time.perf_counter()
            for it, s in runs:
                decode.speculative_generate(target, draft, it.prompt, CHARS, k, s)
            t2 = time.perf_counter()
            plain.append(t1 - t0)
            spec.append(t2 - t1)
        step, char, rnd, first_step, first_round = np.median(np.asarray(terms), axis=0)
        measured = float(np.median(np.asarray(plain) / np.asarray(spec)))
        model = stats.refined_terms(chars, passes, drafted, step, rnd, char, len(runs), first_step, first_round, k)
        flat = stats.refined_speedup(chars, passes, drafted, step, rnd, char)
        print(f"{name} k={k}: measured {measured:.3f}; model {model['speedup']:.3f} "
              f"({model['speedup'] / measured - 1:+.1%}), without first steps and rounds {flat:.3f} "
              f"({flat / measured - 1:+.1%}); real / model: target-only "
              f"{np.median(plain) * 1e6 / model['target_only_us'] - 1:+.1%}, speculative "
              f"{np.median(spec) * 1e6 / model['speculative_us'] - 1:+.1%}; terms µs: step {step:.0f}, char "
              f"{char:.1f}, round {rnd:.0f}, first step {first_step:.0f}, first round {first_round:.0f}")
