"""The report's settings: its ks, its full and quick knobs, the timed sections' shares of the budget, the seconds
kept for writing, the default tree configurations, and the two functions that turn a command line into knobs and
workload runs. `specdec report` (`build`), `specdec batch` (`batch.batch_build`) and `specdec engines`
(`engines.engine_build`) share them; they live here, at report's base, so that neither of the latter imports the
report itself."""

from __future__ import annotations

from specdec.decoding.trees import parse_tree
from specdec.measure import workload as wl
from specdec.measure.pairs import MIN_PAIRS

DEFAULT_TREES = ("4x2x2x1", "budget 32")  # two shapes per table draft: the report's time budget is fixed
DEFAULT_KS = (1, 2, 4, 8)
# budget: seconds for the whole report. min_pairs: alternated pairs every speedup row gets before the rest of
# the time goes to the widest rows; precision: a row stops once its re-run interval is narrower than this
# fraction of its figure. samples: exactness draws per draft and context; contexts: workload prompts the
# exactness check runs at. every: the report runs every n-th workload item. cost_samples: most round-robin cost
# samples (fewer when the costs' share of the budget runs out), cost_calls: calls per sample; term_calls: rounds
# per sample of each refined-model term (see round_samplers.loop_sampler); min_triples: rotated runs per adaptive row.
# overhead_chars / overhead_repeats: characters per profiled block and profiled blocks per scope of the overhead
# section's attribution (see overhead_section).
FULL = {"budget": 300.0, "min_pairs": MIN_PAIRS, "precision": 0.03, "samples": 20_000, "contexts": 3, "every": 3,
        "cost_samples": 40, "cost_calls": 10, "term_calls": 6, "min_triples": 3, "overhead_chars": 40,
        "overhead_repeats": 9}
# --quick gives every row 5 pairs too: fewer leave the headline's rows without a verdict on a slower machine
# (the sizing sheds rows and length instead, each change a line).
QUICK = {"budget": 60.0, "min_pairs": MIN_PAIRS, "precision": 0.08, "samples": 5_000, "contexts": 1, "every": 8,
         "cost_samples": 12, "cost_calls": 10, "term_calls": 4, "min_triples": 2, "overhead_chars": 20,
         "overhead_repeats": 5}
# Of the time the fixed work leaves. Costs: ~12 samples (each ~2.5 s here), enough for c's per-sample test in
# `specdec compare` and a prediction that is not hostage to one sample (0.12 with twice the calls gave 4).
# Overhead: the floor table and the machine's figures (a few seconds of a full report), taken from the speedups.
SHARES = {"overhead": 0.05, "costs": 0.17, "speedup": 0.60, "adaptive": 0.13, "greedy": 0.05}
# Seconds kept back from the budget (plus 2 % of it) for what follows the sections: writing report.md and
# report.json and drawing three figures took 2.3 s on the 2-core VM (matplotlib's import most of it), and the
# interpreter's exit about 0.5 s more.
WRITE_RESERVE = 4.0
# The batch section's share when asked for (`measure(batched=True)`): against the other timed sections' 1.0 in all,
# it gets a fifth of the time they leave, after greedy; `sizing` does not plan it (the shipped model only).
BATCH_SHARE = 0.25
STARTUP = "start-up: import torch, load the target, check the inputs"  # the sections table's first row, if timed


def knobs_for(quick: bool, budget: float | None, pairs: int | None, trees: list[str] | None) -> dict:
    """QUICK or FULL with the caller's budget, minimum pairs and tree configurations (each checked now, so a
    bad shape fails before anything is measured)."""
    knobs = dict(QUICK if quick else FULL)
    if budget is not None:
        knobs["budget"] = float(budget)
    if pairs is not None:
        knobs["min_pairs"] = pairs
    knobs["trees"] = list(DEFAULT_TREES if trees is None else trees)
    for text in knobs["trees"]:
        parse_tree(text)
    return knobs


def workload_runs(workload, prompt: str | None, seed: int | None, chars: int, ks: list[int], every: int,
                  target=None):
    """The workload and the (item, seed) runs the report measures: one prompt and seed, or every `every`-th
    run of the workload (its prompts checked against the target's tokenizer and context)."""
    if prompt is not None:
        work = wl.single(prompt, 0 if seed is None else seed)
        return work, work.runs()
    work = wl.load_workload(workload or wl.DEFAULT_WORKLOAD, seeds=None if seed is None else [seed], chars=chars,
                            max_k=max(ks), target=target)
    return work, work.cycled(every)
