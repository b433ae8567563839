"""The batch section: the paired speedup at each batch size B, the cost model extended to B, and the crossover
where a draft stops paying.

Per draft at its best k (the report's best measured k; `batch_k` where the report measured no speedup rows),
for B in BATCHES (as far as the budget allows): target-only and speculative generation of the same B sequences
(the workload's first B runs, cycled: each its prompt and seed), alternated pair by pair by the report's own
runner (`schedule.interleave`, `paired_sections.paired_figures`) beside an A/A row of target-only at B_FLOOR that
gives the noise floor. Before any pair, `batch_costs.measure` takes T_B(1), T_B(k+1) and each draft's step at every B;
from those and the batch's deterministic chars per pass comes the prediction at each B, made before its pairs.

The crossover of a draft is decided by `measure.crossover`'s rule, the one `specdec load` uses: a B pays when its
speedup's interval (at least the floor's width) lies above 1 and above the A/A's interval; the crossover is the
smallest B that does not pay after one that did, reported with the paying B before it, between which it lies,
and that B's interval -- or "pays at every B tried", "pays from B = X on", "never pays here". docs/batch.md
describes the keys (docs/report-json.md lists them).
"""

from __future__ import annotations

from specdec.decoding import batch as bt
from specdec.decoding.generate import generate, speculative_generate
from specdec.measure.anatomy import batch_costs
from specdec.measure.load import crossover as xo
from specdec.measure.schedule import Runs, interleave
from specdec.model.backends import backend_of
from specdec.report import paired_sections, sections

BATCHES = (1, 2, 4, 8, 16, 32)
B_FLOOR = 8  # the A/A row's batch: the middle of the curve
BATCH_CHARS = 100  # characters per sequence: a B = 32 pair is 6400 of them
COSTS_SHARE = 0.2  # of the section's seconds, for the cost samples before the pairs
BATCHED_KERNEL = "model.rows: torch ops over the backend's own cache memory"
VISIT_FACTOR = 3.0  # a visit costs its two generations and as much again (warm-up, collection)


def _batch(run: sections.ReportRun, B: int) -> tuple[list[str], list[int]]:
    """The B sequences of batch B: the workload's runs cycled, each its prompt and seed. (Every visit of a row
    runs this same batch: the rows' `items` are the first run only, which names the batch in the pairs.)"""
    picked = [run.runs[i % len(run.runs)] for i in range(B)]
    return [item.prompt for item, _ in picked], [seed for _, seed in picked]


def best_k(run: sections.ReportRun, name: str) -> int:
    """The draft's own k if given (`batch_ks`), else its best measured speedup's among the report's chain rows,
    else the `batch_k` knob."""
    given = (run.knobs.get("batch_ks") or {}).get(name)
    if given:
        return int(given)
    rows = [r for r in run.rows if r["draft"] == name and r.get("tree") is None]
    return int(max(rows, key=lambda r: r["measured"])["k"]) if rows else int(run.knobs.get("batch_k", 4))


def measure(run: sections.ReportRun, seconds: float) -> dict:
    """report.json's `batch` (see the module docstring)."""
    why = bt.target_support(run.target)
    if why:
        return {"batch": {"unavailable": why}}
    unavailable = {n: w for n in run.drafts if (w := bt.draft_support(run.objs[n]))}
    names = [n for n in run.drafts if n not in unavailable]
    chars = int(run.knobs.get("batch_chars", BATCH_CHARS))
    batches = list(run.knobs.get("batch_sizes") or BATCHES)
    ks = {n: best_k(run, n) for n in names}
    objs = {n: run.objs[n] for n in names}
    context = run.target.tokenize(run.runs[0][0].prompt)
    costs = batch_costs.measure(run.target, objs, ks, batches, context, run.temperature,
                                run.knobs.get("cost_samples", 12), COSTS_SHARE * seconds, run.device)
    one = {n: _counts(run, objs[n], ks[n], 1, chars) for n in names}  # B = 1's passes size every B's pairs
    left = (1 - COSTS_SHARE) * seconds
    batches, dropped = _fit(run, costs, {n: c["passes"] for n, c in one.items()}, batches, chars, left)
    counts = {(n, B): one[n] if B == 1 else _counts(run, objs[n], ks[n], B, chars) for n in names for B in batches}
    floor_b = min(B_FLOOR, max(batches))
    plain = {B: _plain(run, B, chars) for B in set(batches) | {floor_b}}
    floor = Runs(f"noise floor (A/A, B={floor_b})", {"a": plain[floor_b], "b": plain[floor_b]}, ("a", "b"),
                 warm=_plain(run, floor_b, 10), items=run.runs[:1])
    rows = [Runs((n, B), {"target": plain[B], "spec": _spec(run, objs[n], ks[n], B, chars)}, ("target", "spec"),
                 warm=_spec(run, objs[n], ks[n], B, 10), items=run.runs[:1]) for n in names for B in batches]
    interleave([floor] + rows, left, run.knobs["min_pairs"], run.knobs["precision"], run.device, run.log, "batch ")
    f = paired_sections.paired_figures(floor, "a", "b")
    noise = {**f, "drift": 0.0, "batch": floor_b}
    docs = [_row(r, costs, counts, ks, noise) for r in rows]
    return {"batch": {
        # what ran: B = 1 the backend's own single-sequence kernels (the loop's B = 1 path), B > 1 `model.rows`
        "kernels": {"single": backend_of(run.target), "batched": BATCHED_KERNEL},
        "batches": batches, "dropped_batches": dropped, "chars": chars, "ks": ks, "noise_floor": _slim(noise),
        "costs": costs, "rows": docs,
        "crossover": {n: crossover([d for d in docs if d["draft"] == n], noise) for n in names},
        "unavailable_drafts": unavailable,
    }}


def _plain(run, B: int, chars: int):
    prompts, seeds = _batch(run, B)
    return lambda _item: generate(run.target, prompts, chars, seeds, run.temperature)


def _spec(run, draft, k: int, B: int, chars: int):
    prompts, seeds = _batch(run, B)
    return lambda _item: speculative_generate(run.target, draft, prompts, chars, k, seeds, run.temperature)


def _counts(run, draft, k: int, B: int, chars: int) -> dict:
    """The batch's deterministic counts: chars per pass over its sequences, its batched passes."""
    out = _spec(run, draft, k, B, chars)(None)
    gen = sum(g.stats.chars for g in out)
    return {"chars_per_pass": gen / out.rows, "passes": out.passes, "row_passes": out.rows,
            "acceptance": sum(g.stats.accepted for g in out) / max(1, sum(g.stats.drafted for g in out))}


def _fit(run, costs: dict, passes: dict[str, int], batches: list[int], chars: int,
         seconds: float) -> tuple[list[int], list[int]]:
    """The batches whose minimum pairs fit `seconds` (by the cost samples' step times and each draft's passes at
    B = 1), smallest first; the smallest always stays. Returns (kept, dropped)."""
    def visit_s(B: int) -> float:
        step = costs["batches"][str(B)]["step_us"] * 1e-6
        spec = sum(p * step * 1.5 for p in passes.values())
        return VISIT_FACTOR * (chars * step * (len(passes) + 1) + spec)

    kept, total = [], 0.0
    for B in sorted(batches):
        need = visit_s(B) * run.knobs["min_pairs"]
        if kept and total + need > seconds:
            break
        kept.append(B)
        total += need
    return kept, [B for B in batches if B not in kept]


def _row(r: Runs, costs: dict, counts: dict, ks: dict, floor: dict) -> dict:
    name, B = r.key
    fig = paired_sections.paired_figures(r, "target", "spec", floor)
    term = costs["batches"][str(B)]["drafts"][name]
    cpp = counts[name, B]["chars_per_pass"]
    return {"draft": name, "batch": B, "k": ks[name], **counts[name, B],
            "predicted_before": batch_costs.predicted_speedup(cpp, ks[name], term["r_measured"], term["c_measured"]),
            "r_measured": term["r_measured"], "r_predicted": term["r_predicted"], "c_measured": term["c_measured"],
            **{key: fig[key] for key in ("measured", "ci_low", "ci_high", "width", "pairs", "measured_min",
                                         "measured_max", "ratios")}}


def _slim(noise: dict) -> dict:
    return {key: noise[key] for key in ("measured", "ci_low", "ci_high", "width", "pairs", "batch")}


def crossover(rows: list[dict], floor: dict) -> dict:
    """A draft's crossover by `measure.crossover`'s rule, the one `specdec load` uses: each B's verdict against 1
    and the A/A `floor` (pays / costs / not distinguishable; too few pairs below 3), then along B the lowest B
    that does not pay after one that did (module docstring). Returns {"answer", "batch" (that B; for "never
    pays here" the smallest B judged; else None), "after" (the paying B judged below it; for the answers where
    it pays at the top, the largest B), "speedup", "ci_low", "ci_high", "slower" (its verdict is "costs") at
    "batch", "from" (for "pays from a level on": the smallest paying B), "verdicts" (B → verdict), "text"}."""
    rows = sorted(rows, key=lambda r: r["batch"])
    verdicts = [xo.verdict({"ci_low": r["ci_low"], "ci_high": r["ci_high"], "n": r["pairs"]}, floor) for r in rows]
    found = xo.find(verdicts)
    answer = found["answer"]
    out = {"answer": answer, "verdicts": {str(r["batch"]): v for r, v in zip(rows, verdicts)}}
    judged = [r for r, v in zip(rows, verdicts) if v in xo.JUDGED]
    if answer in ("pays at every level tried", "pays from a level on"):
        top = judged[-1]["batch"]
        if answer == "pays at every level tried":
            return {**out, "batch": None, "after": top, "text": f"pays at every B tried (up to B = {top})"}
        low = rows[found["first_paid"]]["batch"]
        return {**out, "batch": None, "after": top, "from": low,
                "text": f"pays from B = {low} on (up to B = {top}; it does not pay below B = {low})"}
    if answer == "no level judged":
        return {**out, "batch": None, "after": None, "text": "too few pairs at every B to judge"}
    if answer == "crossover":
        at, after = rows[found["stop"]], rows[found["before"]]["batch"]
        head = f"stops paying at B = {at['batch']} (pays at B = {after})"
    else:  # never pays here
        at, after = judged[0], None
        head = f"never pays here (not faster beyond the noise even at B = {at['batch']})"
    return {**out, "batch": at["batch"], "after": after, "speedup": at["measured"], "ci_low": at["ci_low"],
            "ci_high": at["ci_high"], "slower": verdicts[rows.index(at)] == xo.COSTS,
            "text": f"{head}: {at['measured']:.2f}x [{at['ci_low']:.2f}, {at['ci_high']:.2f}]"}
