"""The report's sections: each a function of the shared run state (and its seconds) returning its part of the
document. `report.measure` lists them and `schedule.run_sections` runs them against the budget. Here: the state
they share (`ReportRun`), the drafts, the exactness rows, the deterministic acceptance counts and the cost table;
the paired sections (speedup, adaptive k, greedy) are in `paired_sections`, the trees' parts in
`tree_sections`.

Every figure is taken over the report's workload runs -- (prompt, seed) pairs, see `workload.Workload.cycled`
-- or over the one run of `--prompt/--seed`. Deterministic counts (acceptance, passes) cover every run.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field

import numpy as np

from specdec.measure import exactness, stats, cost_table, round_samplers
from specdec.report import tree_sections as ts
from specdec.measure import acceptance_engines
from specdec.measure.acceptance import acceptance_over
from specdec.decoding.generate import generate, speculative_generate
from specdec.decoding.registry import make_draft
from specdec.model.gpt import GPT

WRITEUP_RUN = ("ROMEO:", 0)  # the write-up's acceptance table: this prompt, this seed


@dataclass
class ReportRun:
    """What the sections share while a report is measured."""

    target: GPT
    drafts: list[str]
    ks: list[int]
    knobs: dict
    device: str
    chars: int
    temperature: float
    runs: list  # (WorkloadItem, seed) pairs
    log: object
    given: dict = field(default_factory=dict)  # name -> a Draft object the caller passed (built by name otherwise)
    objs: dict = field(default_factory=dict)
    acc: dict = field(default_factory=dict)  # (draft, k) -> `acceptance.acceptance_over`'s result
    samplers: dict = field(default_factory=dict)
    costs: cost_table.Costs | None = None
    floor: dict | None = None  # the A/A noise floor's figures, once measured
    rows: list = field(default_factory=list)
    trees: dict = field(default_factory=dict)  # (draft, label) -> TreeSpec: the tree configurations
    child: dict = field(default_factory=dict)  # draft -> measured child acceptance (report.json's record)
    sizing_costs: dict | bool | None = None  # `sizing.plan`'s per-token costs given (a fixed plan), False: none

    def spec(self, name: str, k: int, chars: int | None = None, temperature: float | None = None, **kw):
        """A call generating one run speculatively: fn((item, seed))."""
        t = self.temperature if temperature is None else temperature
        return lambda run: speculative_generate(self.target, self.objs[name], run[0].prompt, chars or self.chars,
                                                k, run[1], t, **kw)

    def plain(self, chars: int | None = None, temperature: float | None = None):
        t = self.temperature if temperature is None else temperature
        return lambda run: generate(self.target, run[0].prompt, chars or self.chars, run[1], t)

    def mean_position(self) -> int:
        """Where a generation is on average: attention (and so every pass) grows with the position."""
        return self.mean_prompt_chars() + self.chars // 2

    def mean_prompt_chars(self) -> int:
        """The workload's mean prompt length in the target's tokens (characters for the shipped model): what a
        generation's first pass (its prefill) runs over."""
        return round(np.mean([len(self.target.tokenize(item.prompt)) for item, _ in self.runs]))


def setup(run: ReportRun) -> dict:
    for name in run.drafts:
        run.log(f"    building draft {name}" if name not in run.given else f"    draft {name}: the caller's object")
        run.objs[name] = make_draft(run.given.get(name, name), run.target)  # an object: the device check only
    # The models and tables live until the end: the collector need never walk them again (the n-gram draft's
    # millions of entries make a full collection cost ~0.1 s, whenever it fires).
    gc.collect()
    gc.freeze()
    return {}


def exactness_rows(run: ReportRun, contexts: int) -> dict:
    """TV and chi-square of the first character at several workload contexts (the first `contexts` runs'
    prompts), each with the target sampled directly as its baseline; every row's verdict is decided over all
    of them at once, so the whole table's false-alarm rate is the family's (Bonferroni over every test)."""
    n, rows = run.knobs["samples"], []
    for item, _ in run.runs[:contexts]:
        part = [exactness.target_row(run.target, n, 0, item.prompt)] + exactness.verify(
            run.target, run.objs, k=max(run.ks), samples=n, seed=0, prompt=item.prompt)
        rows += [{**r, "tree": None, "context": item.id} for r in part] + ts.exactness_rows(run, item.prompt, item.id)
    return {"exactness": exactness.verdicts(rows)}


def acceptance(run: ReportRun) -> dict:
    """Deterministic counts over every run of the workload, per draft x k; and the write-up's table."""
    rows = []
    for name in run.drafts:
        for k in run.ks:
            a = acceptance_over(run.target, run.objs[name], k, None, run.chars, run.temperature, runs=run.runs)
            run.acc[name, k] = a
            tot = a["totals"]
            fit = stats.acceptance_alpha(a["accepted_per_position"], k)
            rows.append({"draft": name, "k": k, "acceptance": tot["acceptance"],
                         "chars_per_pass": tot["chars_per_pass"], "target_passes": tot["target_passes"],
                         "chars": tot["chars"], "drafted": tot["drafted"], "runs": a["runs"],
                         "alpha": fit.alpha, "expected_length": stats.expected_length(fit.alpha, k),
                         "geometric_p": fit.p_value, "bunched": bool(fit.bunched),
                         "accepted_per_position": a["accepted_per_position"],
                         "position_acceptance": a["position_acceptance"],
                         "summary": {"acceptance": a["acceptance"], "chars_per_pass": a["chars_per_pass"]},
                         "per_item": a["per_item"], "tree": None,
                         "engines": _engines(a), "engines_temperature": run.temperature})
        if run.temperature != 0:  # the engines' figures greedy too (users report both), at the largest k
            rows[-1]["engines_greedy"] = _engines(acceptance_over(run.target, run.objs[name], max(run.ks), None,
                                                                  run.chars, 0.0, runs=run.runs))
    return {"acceptance": rows + ts.acceptance_rows(run, run.child)}


def _engines(a: dict) -> dict:
    """The engines' acceptance figures of an `acceptance_over` result, overall and per content category."""
    return acceptance_engines.by_category(a["per_item"], {r["prompt_id"]: r["category"] or "other"
                                                          for r in a["per_item"]})


def writeup_acceptance(run: ReportRun) -> dict:
    """The write-up's acceptance table, exactly: prompt 'ROMEO:', seed 0, every draft x k."""
    prompt, seed = WRITEUP_RUN
    rows = []
    for name in run.drafts:
        for k in run.ks:
            st = speculative_generate(run.target, run.objs[name], prompt, run.chars, k, seed, run.temperature).stats
            rows.append({"draft": name, "k": k, "acceptance": st.acceptance, "chars_per_pass": st.chars_per_pass,
                         "target_passes": st.target_passes, "drafted": st.drafted,
                         "accepted_per_position": st.accepted_per_position})
    return {"acceptance_writeup": {"prompt": prompt, "seed": seed, "rows": rows}}


def costs(run: ReportRun, seconds: float) -> dict:
    """The cost table, and the refined model's terms per draft x k and per tree configuration, measured before
    any speedup pair: from these and the deterministic counts comes the prediction made before the measurement
    it predicts. The tree-masked passes T(N) take their turns in the same round-robin."""
    kn = run.knobs
    for name in run.drafts:
        for k in sorted(set(run.ks) | {4}):
            a = run.acc.get((name, k))
            rounds = sum(a["accepted_per_position"]) if a else 0
            full = a["accepted_per_position"][k] / rounds if rounds else 0.0
            run.samplers[name, k] = round_samplers.loop_sampler(run.target, run.objs[name], k, run.temperature, run.device,
                                                        kn["term_calls"], all_accepted=full,
                                                        position=run.mean_position(),
                                                        prompt_chars=run.mean_prompt_chars())
    tree_fns, tree_samplers = ts.cost_extras(run)
    c = cost_table.measure_costs(run.target, run.objs, run.ks, samples=kn["cost_samples"], number=kn["cost_calls"],
                             temperature=run.temperature, device=run.device, samplers=run.samplers,
                             seconds=seconds, extra_fns=tree_fns, extra_samplers=tree_samplers)
    run.costs = c
    return {"costs": {
        "samples": c.samples,
        "target_pass_us": c.target_pass_us,
        "verify_pass_us": {str(n): v for n, v in c.verify_pass_us.items()},
        "verify_ratio_samples": {str(n): v for n, v in c.verify_ratio_samples.items()},
        "step_us": c.step_us,
        "round_us": {str(k): v for k, v in c.round_us.items()},
        "drafts": {n: {"char_us": c.draft_char_us[n], "char_us_range": c.char_range[n], "c": c.c(n),
                       "c_range": c.c_range(n), "c_samples": c.c_samples[n],
                       "weight_bytes": run.objs[n].weight_bytes()} for n in run.drafts},
        "draft_k": c.draft_k,
        "position": run.mean_position(),
        "prompt_chars": run.mean_prompt_chars(),
        "loop": {n: {str(k): _loop_doc(c, n, k) for k in run.ks} for n in run.drafts},
        **ts.costs_doc(run, c),
    }}


def _loop_doc(c: cost_table.Costs, name: str, k: int) -> dict:
    """report.json's refined-model terms of one draft and k before the run (medians, µs)."""
    m = round_samplers.term_medians(c.loop_samples[name, k])
    return {"char_us": c.loop_char_us[name][k], "round_us": c.loop_round_us[name][k], "step_us": m["step"],
            "first_step_us": m["first_step"], "first_round_us": m["first_round"]}
