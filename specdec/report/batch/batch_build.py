"""`specdec batch`: the report's batch section on its own, within a budget -- the drafts built, then
`batch_section.measure` given the time left -- written as batch.md, batch.json and batch.png.

The settings are the report's (`settings.knobs_for`, `settings.workload_runs`), torch's and BLAS threads set and
recorded the way the report sets them (`hygiene.threads_for_measuring`), so a batch document reads like a
report's `batch` key (docs/report-json.md) with the machine and settings beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

from specdec.measure import hygiene
from specdec.measure.anatomy import roofline
from specdec.measure.schedule import Budget, Section, run_sections
from specdec.model import protocol
from specdec.report import figures, sections, settings
from specdec.report.batch import batch_render, batch_section
from specdec.util.files import atomic_path, write_atomic

BATCH_FILES = ("batch.md", "batch.json", "batch.png")


def measure_batch(target, drafts: list[str], k: int = 4, batches: list[int] | None = None,
                 chars: int = batch_section.BATCH_CHARS, budget: float = 120.0, quick: bool = False,
                 pairs: int | None = None, threads: int = 1, device: str = "cpu", workload=None,
                 started: float | None = None, log=print, draft_ks: dict[str, int] | None = None) -> dict:
    """The batch section alone within `budget` seconds (counted from `started`, a perf_counter reading, or now):
    each draft at k (or its own in `draft_ks`), for `batches` (default batch_section.BATCHES, as far as the
    budget allows)."""
    knobs = settings.knobs_for(quick, budget, pairs, [])
    knobs.update({"batch_k": k, "batch_ks": dict(draft_ks or {}), "batch_chars": chars,
                  "batch_sizes": list(batches or batch_section.BATCHES)})
    work, runs = settings.workload_runs(workload, None, None, chars, [max([k, *(draft_ks or {}).values()])], 1)
    clock = Budget(knobs["budget"], reserve=settings.WRITE_RESERVE, start=started)
    with hygiene.threads_for_measuring(threads) as thread_info:
        machine = {**hygiene.machine_info(thread_info, device, None), "backend": roofline.backend_name(target)}
        run = sections.ReportRun(target.to(device), list(drafts), [k], knobs, device, chars, 1.0, runs, log)
        parts, spent = run_sections([
            Section("drafts", lambda s: sections.setup(run)),
            Section("batch: B sequences at once, paired", lambda s: batch_section.measure(run, s), 1.0),
        ], clock, log)
    return {"machine": machine, "settings": {"workload": work.name, "k": k, "draft_k": knobs["batch_ks"], "chars": chars,
                                             "budget": knobs["budget"],
                                             "drafts": list(drafts), "target": protocol.describe(target),
                                             "min_pairs": knobs["min_pairs"], "precision": knobs["precision"]},
            **parts, "sections": spent, "wall_seconds": clock.elapsed()}


def write_batch(doc: dict, out_dir) -> list[Path]:
    """batch.md, batch.json and (with matplotlib) batch.png into out_dir, each written atomically."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    text = "\n".join(batch_render.batch_lines(doc)) + "\n"
    write_atomic(out / "batch.md", text)
    write_atomic(out / "batch.json", json.dumps(doc, indent=2) + "\n")
    paths = [out / "batch.md", out / "batch.json"]
    if doc.get("batch", {}).get("rows"):
        with atomic_path(out / "batch.png") as tmp:
            drawn = figures.plot_batch(doc, tmp)
        if drawn:
            paths.append(out / "batch.png")
    return paths
