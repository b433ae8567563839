"""`specdec load`: the report's load section on its own, within a budget -- the drafts built, then
`load_section.measure` given the time left -- written as load.md, load.json and load.png.

The settings are the report's (`build.knobs_for`, `build.workload_runs`), torch's and BLAS threads set and
recorded the way the report sets them (`hygiene.threads_for_measuring`), so a load document reads like a
report's `load` key (docs/report-json.md) with the machine and settings beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

from specdec.measure import hygiene, roofline
from specdec.measure.schedule import Budget, Section, run_sections
from specdec.model import protocol
from specdec.report import build, figures, load_render, load_section, sections
from specdec.util.files import atomic_path, write_atomic

LOAD_FILES = ("load.md", "load.json", "load.png")


def measure_load(target, drafts: list[str], k: int = 4, batches: list[int] | None = None,
                 chars: int = load_section.LOAD_CHARS, budget: float = 120.0, quick: bool = False,
                 pairs: int | None = None, threads: int = 1, device: str = "cpu", workload=None,
                 started: float | None = None, log=print, draft_ks: dict[str, int] | None = None) -> dict:
    """The load section alone within `budget` seconds (counted from `started`, a perf_counter reading, or now):
    each draft at k (or its own in `draft_ks`), for `batches` (default load_section.BATCHES, as far as the
    budget allows)."""
    knobs = build.knobs_for(quick, budget, pairs, [])
    knobs.update({"load_k": k, "load_ks": dict(draft_ks or {}), "load_chars": chars,
                  "load_batches": list(batches or load_section.BATCHES)})
    work, runs = build.workload_runs(workload, None, None, chars, [max([k, *(draft_ks or {}).values()])], 1)
    clock = Budget(knobs["budget"], reserve=build.WRITE_RESERVE, start=started)
    with hygiene.threads_for_measuring(threads) as thread_info:
        machine = {**hygiene.machine_info(thread_info, device, None), "backend": roofline.backend_name(target)}
        run = sections.ReportRun(target.to(device), list(drafts), [k], knobs, device, chars, 1.0, runs, log)
        parts, spent = run_sections([
            Section("drafts", lambda s: sections.setup(run)),
            Section("load: batches of B sequences, paired", lambda s: load_section.measure(run, s), 1.0),
        ], clock, log)
    return {"machine": machine, "settings": {"workload": work.name, "k": k, "draft_k": knobs["load_ks"], "chars": chars,
                                             "budget": knobs["budget"],
                                             "drafts": list(drafts), "target": protocol.describe(target),
                                             "min_pairs": knobs["min_pairs"], "precision": knobs["precision"]},
            **parts, "sections": spent, "wall_seconds": clock.elapsed()}


def write_load(doc: dict, out_dir) -> list[Path]:
    """load.md, load.json and (with matplotlib) load.png into out_dir, each written atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(load_render.load_lines(doc)) + "\n"
    write_atomic(out / "load.md", text)
    write_atomic(out / "load.json", json.dumps(doc, indent=2) + "\n")
    paths = [out / "load.md", out / "load.json"]
    if doc.get("load", {}).get("rows"):
        with atomic_path(out / "load.png") as tmp:
            drawn = figures.plot_load(doc, tmp)
        if drawn:
            paths.append(out / "load.png")
    return paths
