"""The report's tree configurations: which trees, their deterministic counts, exactness rows and cost terms.

The `trees` knob lists shapes, each applied to every table draft (bigram, ngram) among the report's drafts:
a fixed width × depth ("4x2x2x1") or a node budget ("budget 32"), whose shape Sequoia's dynamic program
(`sequoia.optimal_tree`) chooses from that draft's per-child acceptance, measured first (deterministically, over
the first `CHILD_RUNS` workload runs) and recorded in report.json. A tree configuration is keyed
(draft, its label) wherever a chain's is (draft, k): `run.acc`, `run.samplers`, the speedup rows' `Runs.key`.
Rows carry `tree`: {"shape", "budget" (nodes), "depth", "parents"}; chain rows carry `tree: null`.
"""

from __future__ import annotations

import numpy as np

from specdec.measure import exactness, round_samplers, tree_exactness
from specdec.decoding import trees
from specdec.decoding import sequoia
from specdec.decoding.drafts import TableDraft
from specdec.measure.anatomy.tree_timing import TREE_POSITIONS, tree_loop_sampler, verify_fns
from specdec.measure.acceptance import acceptance_over, measure_child_acceptance
from specdec.report.settings import DEFAULT_TREES  # noqa: F401  the report's two shapes per table draft

CHILD_WIDTH = 8  # children per node whose acceptance is measured (the DP never needs more at budget 32)
CHILD_RUNS = 3  # workload runs the child acceptance is measured over (the first ones: every category)


def tree_key(spec: trees.TreeSpec | None) -> dict | None:
    """What a row's `tree` holds: None for a chain."""
    if spec is None:
        return None
    return {"shape": str(spec), "budget": spec.budget, "depth": spec.depth, "parents": list(spec.parents),
            "nodes_per_depth": np.bincount(spec.depths).tolist()}


def table_drafts(run) -> list[str]:
    return [n for n in run.drafts if isinstance(run.objs[n], TableDraft)]


def _child_acceptance(run, name: str) -> np.ndarray:
    """The mean of `measure_child_acceptance` over the first CHILD_RUNS runs (every run generates the same
    number of characters, so the mean is the pooled rate)."""
    vs = [measure_child_acceptance(run.target, run.objs[name], item.prompt, run.chars, CHILD_WIDTH, seed,
                                         run.temperature) for item, seed in run.runs[:CHILD_RUNS]]
    return np.mean(vs, axis=0)


def expected_chars(spec: trees.TreeSpec, acceptance) -> float:
    """Characters per pass the child-acceptance model expects of a shape: 1 + Σ over nodes of the product of
    their path's acceptance (child i of any node accepted with acceptance[i]), the bonus included."""
    a = list(acceptance)
    rank: list[int] = []
    seen: dict[int, int] = {}
    for p in spec.parents:  # a node's rank among its siblings, in try order
        rank.append(seen.get(p, 0))
        seen[p] = rank[-1] + 1
    reach: list[float] = []
    for i, p in enumerate(spec.parents):
        r = a[rank[i]] if rank[i] < len(a) else 0.0
        reach.append(r * (reach[p] if p >= 0 else 1.0))
    return 1.0 + float(sum(reach))


def setup(run) -> dict:
    """Measure child acceptance per table draft, choose the shapes, record both (fixed, deterministic)."""
    out: dict = {}
    if not run.knobs.get("trees", DEFAULT_TREES):  # --trees alone: no trees, nothing to measure
        return {"child_acceptance": out}
    for name in table_drafts(run):
        acc = _child_acceptance(run, name)
        for text in run.knobs.get("trees", DEFAULT_TREES):
            c = trees.parse_tree(text)
            spec = sequoia.optimal_tree(acc, c)[0] if isinstance(c, int) else c
            run.trees[name, str(spec)] = spec
        out[name] = {"vector": acc.tolist(), "width": CHILD_WIDTH,
                     "runs": [[item.id, seed] for item, seed in run.runs[:CHILD_RUNS]],
                     "expected_chars_per_pass": {label: expected_chars(s, acc)
                                                 for (n, label), s in run.trees.items() if n == name}}
    return {"child_acceptance": out}


def acceptance_rows(run, child: dict) -> list[dict]:
    """Table 2's tree rows (deterministic, every workload run); fills run.acc[(draft, label)]."""
    rows = []
    for (name, label), spec in run.trees.items():
        a = acceptance_over(run.target, run.objs[name], spec.depth, None, run.chars, run.temperature, run.runs,
                            tree=spec)
        run.acc[name, label] = a
        t = a["totals"]
        rows.append({"draft": name, "k": spec.depth, "tree": tree_key(spec), "acceptance": t["acceptance"],
                     "chars_per_pass": t["chars_per_pass"], "target_passes": t["target_passes"],
                     "chars": t["chars"], "drafted": t["drafted"], "runs": a["runs"],
                     "nodes_per_round": t["drafted"] / t["draft_calls"] if t["draft_calls"] else 0.0,
                     "expected_chars_per_pass": child.get(name, {}).get("expected_chars_per_pass", {}).get(label),
                     **{key: a[key] for key in ("accepted_per_position", "tried_per_depth", "accepted_per_depth",
                                                "depth_acceptance", "per_item")},
                     "summary": {"acceptance": a["acceptance"], "chars_per_pass": a["chars_per_pass"]}})
    return rows


def exactness_rows(run, prompt: str, context: str) -> list[dict]:
    """`exactness.verify`'s row shape for every tree configuration at one context, plus `tree`."""
    rows = []
    for (name, _), spec in run.trees.items():
        for r in tree_exactness.verify_tree(run.target, {name: run.objs[name]}, spec, run.knobs["samples"], 0, prompt):
            base = exactness.baseline_tv(exactness.target_distribution(run.target, prompt), r["samples"], 0)
            rows.append({"draft": name, "k": spec.depth, "samples": r["samples"], "tv": r["tv"],
                         "baseline_tv": r["baseline_tv"], "baseline_tv_min": float(base.min()),
                         "baseline_tv_max": r["baseline_tv_max"], "p_value": r["p_value"],
                         "tree": tree_key(spec), "context": context})
    return rows


def cost_extras(run) -> tuple[dict, dict]:
    """(fns, samplers) the cost table's round-robin takes beside its own: the tree-masked verify passes by
    positions, and per tree configuration its refined-model terms (also kept in run.samplers, for the pairs)."""
    samplers = {}
    for (name, label), spec in run.trees.items():
        s = tree_loop_sampler(run.target, run.objs[name], spec, run.temperature, run.device,
                              run.knobs["term_calls"], position=run.mean_position(),
                              prompt_chars=run.mean_prompt_chars())
        run.samplers[name, label] = samplers[f"tree:{name}:{label}"] = s
    return verify_fns(run.target, TREE_POSITIONS, run.device), samplers


def costs_doc(run, c) -> dict:
    """report.json's tree cost keys: T(N) (µs, medians) and T(N)/T(1) per sample; the tree configurations'
    refined-model terms (medians, µs)."""
    single = np.asarray(c.extra_samples["tree_verify1"])
    verify = {str(n): np.asarray(c.extra_samples[f"tree_verify{n}"]) for n in TREE_POSITIONS}
    loop: dict = {}
    for name, label in run.trees:
        m = round_samplers.term_medians(before_terms(run, name, label))
        loop.setdefault(name, {})[label] = {"step_us": m["step"], "node_us": m["draft_char"], "round_us": m["round"],
                                            "first_step_us": m["first_step"], "first_round_us": m["first_round"]}
    return {"tree_verify_pass_us": {n: float(np.median(v)) for n, v in verify.items()},
            "tree_verify_ratio_samples": {n: (v / single).tolist() for n, v in verify.items()},
            "tree_loop": loop}


def before_terms(run, name: str, label: str) -> np.ndarray:
    """(samples, 5) µs of a tree configuration (`round_samplers.TERMS`, a node for the drafted character), from the cost
    table's round-robin."""
    return np.asarray(run.costs.extra_samples[f"tree:{name}:{label}"], dtype=float)
