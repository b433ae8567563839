"""`specdec report`: measure everything on this machine within a time budget, then write tables and figures.

The report is a list of sections (`schedule.Section`; the functions are in `sections` and `paired_sections`),
each returning its part of the JSON document, run by one scheduler against a budget in seconds: fixed work first
(building the drafts `lineup` chose, the tree configurations' child acceptance and shapes, the exactness
draws, the deterministic acceptance counts), then the timed sections, each given its share of the time left --
the overhead table (the target pass against its floor, and where the time goes), the cost table, the paired
speedups (with the A/A noise floor among them), adaptive k, greedy.
Every figure is taken over a workload (by default the shipped `shakespeare24`), or over one prompt and seed.
Measurement and presentation (`render`) are separate: every table, finding and figure is rendered from the
document, so a `report.json` from another machine or commit renders the same way and `specdec compare` reads
the same keys. `write` puts the files in place atomically.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import tempfile
from pathlib import Path
from typing import Callable

from specdec.model import protocol
from specdec.measure import hygiene, machine_record
from specdec.measure.anatomy import roofline
from specdec.measure.clock import using
from specdec.report.batch import batch_section
from specdec.report.compare import compare
from specdec.report import figures, headline, lineup, paired_sections, sections, sizing
from specdec.report.anatomy import overhead_section
from specdec.report import tree_sections as ts
from specdec.report.settings import (BATCH_SHARE, DEFAULT_KS, FULL, QUICK, SHARES, STARTUP, WRITE_RESERVE,  # noqa: F401
                                     knobs_for, workload_runs)  # the report's settings, under their old names too
from specdec.decoding.drafts import Draft
from specdec.model.backends import backend_of, check_device
from specdec.model.gpt import GPT
from specdec.report.markdown import config_label
from specdec.measure.schedule import Budget, Section, run_sections
from specdec.util.files import swap_folder


def measure(
    target: GPT,
    drafts: list[str | Draft] | None = None,
    ks: list[int] | None = None,
    quick: bool = False,
    pairs: int | None = None,
    threads: int = 1,
    device: str = "cpu",
    chars: int = 200,
    seed: int | None = None,
    prompt: str | None = None,
    temperature: float = 1.0,
    budget: float | None = None,
    cpus: list[int] | None = None,
    workload: str | os.PathLike | None = None,
    trees: list[str] | None = None,
    after_own_run: bool = False,
    between_run: str | None = "auto",
    started: float | None = None,
    batched: bool = False,
    log=print,
    clock: Callable[[], float] | None = None,
    sizing_costs: dict | bool | None = None,
) -> dict:
    """Run every section within `budget` seconds and return the report document (its keys: docs/report-json.md).

    target: the shipped GPT or any `model.protocol.Target` (a Hugging Face model: `load_target("hf:PATH")`).
    drafts: names (`make_draft`'s) or Draft objects, whose `.name` names their rows; default `lineup.default_drafts`.
    A target other than the shipped GPT measures in its own units (settings.units: "tokens" unless its tokens
    are the corpus's characters) and records what it cannot have in doc["unavailable"] (section -> reason).
    workload: a shipped name or a prompts file (default: the shipped one); prompt: one prompt instead (with
    `seed`, default 0) -- the single configuration, e.g. the write-up's 'ROMEO:', seed 0. seed with a workload:
    that one seed for every item. pairs: the minimum of alternated pairs per speedup row (default 5).
    cpus: pin the process to these CPUs first. Torch's threads are set to `threads` (inter-op too where torch
    allows) and recorded. trees: tree shapes ('4x2x2x1') and node budgets ('budget 32': the shape from the
    measured child acceptance), each for every table draft among `drafts` (default `tree_sections.DEFAULT_TREES`;
    [] for none). between_run: "auto" adds this machine's recorded between-run term to the speedup intervals
    (`machine_record`; none until a calibration is recorded), "off" leaves it out. started: a
    `clock.now()` reading the budget counts from (default: now); `specdec report` passes the moment the
    package was imported, so that start-up is inside `--budget` and shows as a section of its own.
    batched: add the batch section (`batch_section`: the paired speedup at batch sizes B = 1..32, each draft at its
    best measured k), BATCH_SHARE of the time the other timed sections leave.
    clock: the decision clock every budget, deadline and warm-up of this report reads (default: the real one,
    `measure.clock.now`); a test passes a fake one, so that what the report decides never depends on the
    machine. sizing_costs: the plan's per-token costs (`sizing.probe`'s keys: target_token_s, spec_token_s per
    draft), given instead of measured; False keeps the knobs as given (no probe, no changes); None measures them.
    """
    with using(clock):
        shipped = isinstance(target, GPT)
        if shipped:  # a CPU-only backend on CUDA would run eager under its own name
            check_device(backend_of(target), device)
        given, skipped = lineup.drafts_for(target, drafts, device, log)
        knobs = knobs_for(quick, budget, pairs, trees)
        unavailable = lineup.unavailable(target, knobs)
        ks = sorted(set(ks or DEFAULT_KS))
        # the shipped GPT's prompts are checked against its characters as always; any other target's by its
        # tokenizer
        work, runs = workload_runs(workload, prompt, seed, chars, ks, knobs["every"], None if shipped else target)
        left = Budget(knobs["budget"], reserve=WRITE_RESERVE + 0.02 * knobs["budget"], start=started)
        startup = left.elapsed() if started is not None else None
        affinity = hygiene.pin(cpus)
        with hygiene.threads_for_measuring(threads) as thread_info:
            machine = {**hygiene.machine_info(thread_info, device, affinity), "pinned": cpus is not None,
                       "backend": roofline.backend_name(target)}
            knobs["between_run"] = machine_record.resolve(between_run, machine)
            run = sections.ReportRun(target.to(device), list(given), ks, knobs, device, chars, temperature, runs, log,
                                     given={n: d for n, d in given.items() if isinstance(d, Draft)},
                                     sizing_costs=sizing_costs)
            settings = {"workload": {"name": work.name, "items": len(runs), "seeds": sorted({s for _, s in runs}),
                                     "runs": [[item.id, s] for item, s in runs]},
                        "prompt": prompt, "chars": chars, "seed": seed, "temperature": temperature, "ks": ks,
                        "drafts": run.drafts, "quick": quick, **knobs}
            doc = _document(target, machine, settings, skipped, unavailable, log)
            todo = _sections(run, machine["backend"], with_writeup=prompt is None and shipped)
            if batched:
                todo.append(Section("batch: B sequences at once, paired", lambda s: batch_section.measure(run, s),
                                    BATCH_SHARE))
            parts, spent = run_sections(todo, left, log)
        doc.update(parts)
        _sized_settings(doc["settings"], run)
        if startup is not None:
            spent.insert(0, {"section": STARTUP, "seconds": round(startup, 2), "allotted": None})
        return _conclude(doc, spent, left.elapsed(), after_own_run, log)


def _document(target, machine: dict, settings: dict, skipped: dict, unavailable: dict, log) -> dict:
    """The report's head: the machine, the settings with the target and its units, the drafts skipped and the
    sections this target cannot have (each said on the log)."""
    doc = {"machine": machine, "settings": {**settings, "target": protocol.describe(target),
                                            "units": protocol.units(target)}}
    if skipped:
        doc["skipped"] = skipped
    if unavailable:
        doc["unavailable"] = unavailable
        for section, why in unavailable.items():
            log(f"[setup] unavailable for this target: {section}: {why}")
    return doc


def _timed_shares(run: sections.ReportRun) -> dict[str, float]:
    """The timed sections' shares as `sizing` names them (the overhead section on a CPU only)."""
    shares = {"overhead": SHARES["overhead"] if run.device == "cpu" else 0.0, "costs": SHARES["costs"],
              "speedup": SHARES["speedup"], "adaptive": SHARES["adaptive"], "greedy": SHARES["greedy"]}
    total = sum(SHARES.values())
    return {name: share / total for name, share in shares.items()}


def _sized_settings(settings: dict, run: sections.ReportRun) -> None:
    """The settings as the sizing left them (`sizing.plan` may shrink the runs, ks, length and call counts)."""
    settings.update(run.knobs)
    settings["ks"], settings["chars"] = list(run.ks), run.chars
    w = settings["workload"]
    w.update(items=len(run.runs), seeds=sorted({s for _, s in run.runs}), runs=[[item.id, s] for item, s in run.runs])


def _sections(run: sections.ReportRun, backend: str, with_writeup: bool) -> list[Section]:
    """The report's sections in order: the fixed work, then the timed ones with their shares."""
    knobs = run.knobs
    contexts = lambda: min(knobs["contexts"], len(run.runs))  # read when the section runs: sizing may cut them
    todo = [
        Section("drafts", lambda s: sections.setup(run)),
        Section("sizing: what a token costs here, and the report that fits the budget",
                lambda s: {"sizing": sizing.plan(run, s, _timed_shares(run), run.sizing_costs)}),
        Section("trees: child acceptance and shapes (deterministic)", lambda s: _trees(run)),
        Section(lambda: f"exactness: {knobs['samples']} draws per draft at {contexts()} context(s)",
                lambda s: sections.exactness_rows(run, contexts())),
        Section(lambda: f"acceptance over {len(run.runs)} run(s) (deterministic)", lambda s: sections.acceptance(run)),
        Section(f"overhead: the {backend} target pass against its floor, and where the time goes",
                lambda s: overhead_section.measure(run, s), SHARES["overhead"]),
        Section("costs: round-robin samples", lambda s: sections.costs(run, s), SHARES["costs"]),
        Section("speedup: alternated pairs, rows interleaved", lambda s: paired_sections.speedup(run, s), SHARES["speedup"]),
        Section("adaptive k: rotated triples", lambda s: paired_sections.adaptive(run, s), SHARES["adaptive"]),
        Section("greedy (temperature 0)", lambda s: paired_sections.greedy(run, s), SHARES["greedy"]),
    ]
    if with_writeup:  # the write-up's table too, exactly as published (a few seconds), after the counts
        todo.insert(5, Section("acceptance, the write-up's prompt and seed", lambda s: sections.writeup_acceptance(run)))
    return todo


def _conclude(doc: dict, spent: list[dict], wall: float, after_own_run: bool, log) -> dict:
    """What follows from the measured sections: recommendations, the end's load average, the time spent, the
    machine's state shift and warnings (logged), and the headline the report opens with."""
    doc["recommendations"] = recommend(doc["speedup"])
    doc["machine"]["load_end"] = hygiene.load_average()
    hygiene.end_of_run(doc["machine"])  # others_cpus: what other processes took of our CPUs during the run
    doc["sections"] = spent
    doc["wall_seconds"] = wall
    doc["state_shift"] = hygiene.state_shift(doc.get("speedup", []))
    doc["warnings"] = (hygiene.warnings(doc["machine"], doc.get("noise_floor"), after_own_run, doc["state_shift"])
                       + headline.result_warnings(doc))
    for w in doc["warnings"]:
        log(w)
    doc["headline"] = headline.headline_facts(doc)
    doc["detectable"] = compare.detectable(doc)  # what a comparison against this report could see, per row
    return doc


def _trees(run: sections.ReportRun) -> dict:
    out = ts.setup(run)
    run.child = out["child_acceptance"]
    return out


def recommend(rows: list[dict]) -> dict:
    """Per draft: the k with the best prediction made before the run, the k with the best measured speedup
    over the workload, and how often each k was best per item (among the items every k's row timed); and the
    same over every configuration, chains and trees (best_config_*)."""
    out = {}
    for name in dict.fromkeys(r["draft"] for r in rows):
        mine = [r for r in rows if r["draft"] == name]
        everything = _best(mine, config_label)
        mine = [r for r in mine if r.get("tree") is None]
        if not mine:
            out[name] = everything
            continue
        bp = max(mine, key=lambda r: r["predicted_before"])
        bm = max(mine, key=lambda r: r["measured"])
        ratio = {r["k"]: {(e["prompt_id"], e["seed"]): e["ratio"] for e in r["per_item_ratios"]} for r in mine}
        common = set.intersection(*(set(v) for v in ratio.values()))
        per_item = dict.fromkeys(sorted(ratio), 0)
        for item in common:
            per_item[max(ratio, key=lambda k: (ratio[k][item], -k))] += 1
        out[name] = {"best_k_predicted": bp["k"], "predicted": bp["predicted_before"],
                     "best_k_measured": bm["k"], "measured": bm["measured"],
                     "best_k_per_item": {str(k): n for k, n in per_item.items()}, "items_compared": len(common),
                     **everything}
    return out


def _best(mine: list[dict], label) -> dict:
    """best_config_predicted / _measured over a draft's rows (chains and trees), their figures, and how
    often each configuration was best per item."""
    bp = max(mine, key=lambda r: r["predicted_before"])
    bm = max(mine, key=lambda r: r["measured"])
    ratio = {label(r): {(e["prompt_id"], e["seed"]): e["ratio"] for e in r["per_item_ratios"]} for r in mine}
    common = set.intersection(*(set(v) for v in ratio.values()))
    per_item = dict.fromkeys(ratio, 0)
    for item in common:
        per_item[max(ratio, key=lambda c: ratio[c][item])] += 1
    return {"best_config_predicted": label(bp), "best_config_predicted_speedup": bp["predicted_before"],
            "best_config_measured": label(bm), "best_config_measured_speedup": bm["measured"],
            "best_config_measured_ci": [bm["ci_low"], bm["ci_high"]],
            "best_config_per_item": per_item, "configs_items_compared": len(common)}


REPORT_FILES = ("report.md", "speedup.png", "per-prompt.png", "attribution.png", "batch.png", "report.json")


def write(doc: dict, out_dir: str | os.PathLike, markdown: str) -> list[Path]:
    """Write report.md, speedup.png, per-prompt.png, attribution.png and report.json into out_dir, so that
    it holds this run's report files and no other run's.

    Everything is rendered into a temporary folder beside out_dir first. Then, with SIGINT held off, whatever
    out_dir holds besides report files (repeat-N/ folders, a calibration, the user's own files) is moved
    into it, and it is swapped in for out_dir (`swap_folder`): an interrupt or a crash leaves the earlier
    report or the new one, never half of one, and never a figure of an earlier run beside the new report.
    """
    out = Path(out_dir).absolute()  # checked before measuring (checks.writable_dir in the CLI)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))
    try:
        names = _render_files(doc, tmp, markdown)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        cwd = os.getcwd()  # a working directory inside out_dir follows the old folder: re-entered below
        try:
            for entry in out.iterdir() if out.is_dir() else ():
                if entry.name not in REPORT_FILES:
                    os.replace(entry, tmp / entry.name)
            swap_folder(tmp, out)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        with contextlib.suppress(OSError):
            os.chdir(cwd)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [Path(out_dir) / n for n in names]


def _render_files(doc: dict, folder: Path, markdown: str) -> list[str]:
    """The report's files in `folder`; their names, in the order written (a figure matplotlib cannot draw is
    left out)."""
    (folder / "report.md").write_text(markdown)
    names = ["report.md"]
    if figures.plot_speedup(doc, folder / "speedup.png"):
        names.append("speedup.png")
    if figures.plot_per_prompt(doc, folder / "per-prompt.png"):
        names.append("per-prompt.png")
    if figures.plot_attribution(doc.get("attribution") or {}, folder / "attribution.png",
                                f"where the time goes ({doc['machine'].get('backend', 'eager')} backend)"):
        names.append("attribution.png")
    if (doc.get("batch") or {}).get("rows") and figures.plot_batch(doc, folder / "batch.png"):
        names.append("batch.png")
    (folder / "report.json").write_text(json.dumps(doc, indent=2) + "\n")
    names.append("report.json")
    return names
