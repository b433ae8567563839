"""The report's overhead section: the target pass against its roofline floor, and where a step's and
a round's time goes, for the report's target backend.

It runs `attribution.attribution` first (its size set by the `overhead_chars` / `overhead_repeats` knobs, smaller
under --quick: the profiler cannot be cut short by a clock), then gives what is left of its seconds to the
machine's figures (`roofline.measure_machine`, MACHINE_SHARE) and the floor table (`roofline.overhead_table`,
the rest), each at least MIN_SECONDS so that every figure exists on a tiny budget. The document gets:

- `overhead`: one row per width in POSITIONS: `backend`, `positions`, `measured_us`, `floor_us`,
  `share` (1 - floor / measured), `flops`, `bytes` (the last four None, rendered "unknown", for a target whose
  architecture `roofline.pass_shape` cannot count);
- `attribution`: backend -> {"step": category -> µs, "round": category -> µs}
  (`profiler_split.CATEGORIES`, the residual last; they sum to the timed blocks' wall time: `accounted_us`; see
  `profiler_split.attribute`): "round" is the round generation runs (a report saved by an older version may also
  hold "round (old)", which is not shown);
- `overhead_setup`: what those figures were measured with: the machine's figures, `context_pos`, the draft and
  k of the round, the characters per profiled block, and per backend and scope `measured_us` (bare blocks),
  `accounted_us` (blocks with the labels' spans timed: the categories' sum), `profiled_us` (wall time under
  the profiler), `profiler_us` (its own cost outside the labels: events recorded x its cost per event here),
  `accounted_ratio` (median over repeats of a timed block over the bare one beside it: what is held to 1 +- 5 %),
  `stretch` (how much longer the unlabelled rest took profiled than timed) and `events_per_unit`.

On a device other than the CPU the floor model (CPU GEMM and cache figures) does not apply: the section
records why and measures nothing.
"""

from __future__ import annotations


import torch

from specdec.measure.anatomy import attribution as attribution_mod
from specdec.measure.anatomy import roofline
from specdec.measure.clock import now
from specdec.decoding.registry import make_draft

POSITIONS = (1, 2, 3, 5, 9)  # the widths: a step, and verify passes up to k = 8
CONTEXT_POS = 100  # cached positions before each timed pass, as `specdec overhead`
DRAFT, K = "bigram", 4  # the round's draft and k, as `specdec overhead`: the cheapest draft, so the target shows
MACHINE_SHARE = 0.4  # of the seconds the attribution leaves; the rest times the floor table
MIN_SECONDS = 0.3  # each of the machine's figures and the table gets at least this


def measure(run, seconds: float) -> dict:
    """The overhead table and the attribution of the report's target (`run`: a `sections.ReportRun`)."""
    backend = roofline.backend_name(run.target)
    if run.device != "cpu":
        return {"overhead": [], "attribution": {},
                "overhead_setup": {"skipped": f"the floor model is the CPU's; the target runs on {run.device}"}}
    kn = run.knobs
    draft = run.objs[DRAFT] if DRAFT in run.objs else make_draft(DRAFT, run.target)
    t0 = now()
    attr = ({} if not kn["overhead_repeats"] else  # sized out for a slow model (`sizing`): the floor table only
            attribution_mod.attribution(run.target, draft, K, chars=kn["overhead_chars"], repeats=kn["overhead_repeats"]))
    left = seconds - (now() - t0)  # the decision clock: a fake one in a test
    machine = roofline.measure_machine(max(MIN_SECONDS, MACHINE_SHARE * left), torch.get_num_threads())
    rows = roofline.overhead_table(run.target, machine, POSITIONS, CONTEXT_POS,
                                   seconds=max(MIN_SECONDS, (1 - MACHINE_SHARE) * left))
    return {
        "overhead": rows,
        "attribution": {backend: {scope: dict(a["categories"]) for scope, a in attr.items()}} if attr else {},
        "overhead_setup": {
            "machine": machine.to_dict(), "context_pos": CONTEXT_POS, "draft": DRAFT, "k": K,
            "chars": kn["overhead_chars"], "repeats": kn["overhead_repeats"],
            "totals": {backend: {scope: {key: a[key] for key in ("measured_us", "profiled_us", "profiler_us",
                                                                  "accounted_us", "accounted_ratio", "stretch",
                                                                  "events_per_unit")}
                                 for scope, a in attr.items()}},
        },
    }
