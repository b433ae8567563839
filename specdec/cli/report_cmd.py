"""`specdec report` and `specdec calibrate`: checks, the measurement (one backend or all), the calibration of a
`--repeat` folder."""

from __future__ import annotations

import sys

from specdec.cli import models
from specdec.cli.checks import UsageError, at_least, device_arg, work_plan, work_switches, writable_dir
from specdec.engines.registry import ENGINES
from specdec.measure import entry
from specdec.util.files import write_atomic


def cmd_report(args) -> int:
    import math
    from pathlib import Path

    if args.engine and args.engine != ["specdec"]:
        from specdec.cli.engine_cmd import cmd_engine_report

        return cmd_engine_report(args)
    for option in ("url", "baseline_url", "temperature"):
        if getattr(args, option) is not None:
            raise UsageError(f"--{option.replace('_', '-')} is for an engine report (--engine "
                             f"{' '.join(n for n in ENGINES if n != 'specdec')}); specdec's own report takes none")
    # the numbers first, before torch and scipy load (seconds on a slow machine): a typo answers at once
    if args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.pairs is not None and args.pairs < 1:
        raise UsageError(f"--pairs must be at least 1, got {args.pairs}")
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    if args.seed is not None:
        at_least("--seed", args.seed, 0)
    if args.prompt is not None and args.workload is not None:
        raise UsageError("give --prompt (one configuration) or --workload, not both")
    work_switches(args, "work columns")

    from specdec.measure import hygiene, machine_record
    from specdec.decoding.trees import parse_tree
    from specdec.report import render, build as report

    for text in args.trees or []:  # a bad tree configuration is found before anything is loaded
        try:
            parse_tree(text)
        except ValueError as exc:
            raise UsageError(f"--trees: {exc}") from None
    device_arg(args.device)
    cpus = hygiene.parse_cpus(args.cpu) if args.cpu is not None else None
    models.check_draft_names(args.drafts or [], args.device)
    ks = models.ks_arg(args.ks, report.DEFAULT_KS)
    try:  # a corrupt record is found now, not after the first report
        machine_record.load({})
    except machine_record.RecordError as exc:
        raise UsageError(str(exc)) from None
    # a report's work is counted on the CPU only; a report has no engine here (engine reports returned above)
    off_cpu = "" if args.device == "cpu" else f"counted on the CPU only (this report runs on {args.device})"
    args.work_plan = work_plan(args, {}, off_cpu)
    if args.backend == "all":
        if args.repeat > 1:
            raise UsageError("--backend all measures one report per backend; give --repeat with one backend")
        return _report_all(args, ks, cpus)
    # every place a result goes is checked before anything is measured: a report is minutes of work
    outs = [Path(args.out)] + [Path(args.out) / f"repeat-{i}" for i in range(2, args.repeat + 1)]
    for out in outs:
        writable_dir("--out", str(out))
    writable_dir("--out", str(outs[0].absolute().parent))  # report.write builds the folder beside it, then swaps
    target = models.load_target(args)
    drafts = _check_report_inputs(args, target, ks)
    docs = []
    for i, out in enumerate(outs, start=1):
        if args.repeat > 1:
            models.log(f"== report {i} of {args.repeat} ==")
        doc = _measure_report(args, target, drafts, ks, cpus, after_own_run=i > 1)
        text = render.tables(doc)
        print(text)
        for path in report.write(doc, out, text):
            models.log(f"wrote {path}")
        docs.append(doc)
    if len(docs) > 1:
        code = _calibration(docs, outs[0], record=True)
        return code or _work_failed(docs)
    return _work_failed(docs)


def _work_failed(docs: list[dict]) -> int:
    """1 where counting was tried and failed (the report is written, with why), as `specdec ab` does: a failed
    count is a failure, not "unavailable"; 0 otherwise."""
    failed = [d["work"]["reason"] for d in docs if (d.get("work") or {}).get("failed")]
    for reason in failed:
        print(f"specdec report: the work count failed (the timed report is written): {reason}", file=sys.stderr)
    return 1 if failed else 0


def _check_report_inputs(args, target, ks: list[int]) -> list[str]:
    """Before anything is built or measured: the largest k's rounds must fit after the prompt (the write-up's
    when a workload's prompts are checked), and a bad workload file fails now, not after the drafts are built.
    Returns the drafts to measure (`_report_drafts`); --trees on a target without trees fails here too."""
    from specdec.measure import workload
    from specdec.decoding.generate import check_request
    from specdec.model.protocol import tree_support

    check_request(target, args.prompt or "ROMEO:", args.chars, k=max(ks))
    if args.prompt is None:
        workload.load_workload(args.workload or workload.DEFAULT_WORKLOAD, chars=args.chars, max_k=max(ks))
    reason = tree_support(target)
    if reason and args.trees:  # asked for: an error; the default trees are left out by the report, saying why
        raise UsageError(f"--trees: {reason}")
    return _report_drafts(args, target)


def _report_drafts(args, target) -> list | None:
    """What `report.measure` gets as drafts. Every shipped draft fits the shipped model: names. Drafts named
    beside an hf: target, hf: drafts and the user's MODULE:CALLABLE ones are built here once (Draft objects, an
    hf: one in --dtype), so that one the target cannot have (another vocabulary, a quantized copy of a model that
    is not the shipped GPT) fails now, not minutes into the report. None for an hf: target's default set (the
    report's own choice)."""
    from specdec.report import lineup

    hf_target = models.is_hf(models.target_spec(args))
    if not args.drafts:  # the shipped model's: every shipped draft on the device, and those that read it
        return None if hf_target else models.drafts_arg(None, args.device) + lineup.reading_drafts(target)
    if not hf_target and not any(models.is_hf(n) or entry.is_entry(n) for n in args.drafts):
        return args.drafts
    return list(models.build_drafts(args, target, args.drafts).values())


def _measure_report(args, target, drafts: list | None, ks: list[int], cpus, after_own_run: bool,
                    backend: str | None = None) -> dict:
    """`report.measure` with the command's settings. The first report's budget counts from the command's start
    (`main`: the package's import), so that `--budget` bounds its wall time (start-up included), not only its
    sections'."""
    from specdec.report import build as report

    doc = report.measure(target, drafts, ks, quick=args.quick, pairs=args.pairs, threads=args.threads,
                         device=args.device, chars=args.chars, seed=args.seed, budget=args.budget, cpus=cpus,
                         workload=args.workload, prompt=args.prompt, trees=args.trees, after_own_run=after_own_run,
                         between_run=args.between_run, started=None if after_own_run else args.started,
                         batched=args.batched, log=models.log)
    _count_work(args, doc, backend, drafts)
    return doc


def _count_work(args, doc: dict, backend: str | None, drafts: list | None = None) -> None:
    """doc["work"]: the cost table's calls counted in a worker of this checkout, after the timed sections (the
    seconds it took: a section of its own, outside --budget). A user's MODULE:CALLABLE draft is counted by its
    entry point (the worker imports it from the current folder) under the name the report gives it."""
    from specdec.measure.ab import work_costs

    kind, why_not = args.work_plan
    if kind is None:
        doc["work"] = work_costs.ab_work.unavailable(why_not)
        return
    # _report_drafts built args.drafts in order: a user's draft object stands at its entry point's place
    entries = {spec: d.name for spec, d in zip(args.drafts or [], drafts or [])
               if entry.is_entry(spec) and not isinstance(d, str)}
    by_name = {name: spec for spec, name in entries.items()}
    config = {"target": models.target_spec(args), "backend": backend or models.backend_name(args), "dtype": args.dtype,
              "drafts": [by_name.get(n, n) for n in doc["settings"]["drafts"]], "ks": doc["settings"]["ks"],
              "chars": doc["settings"]["chars"], "prompt": args.prompt or "ROMEO:", "seed": args.seed or 0,
              "temperature": doc["settings"]["temperature"], "threads": doc["machine"]["threads"]}
    models.log(f"[work] counting the cost table's calls ({work_costs.work.NAMES[kind]}), after the timed sections")
    draft_k = doc.get("costs", {}).get("draft_k") or max(doc["settings"]["ks"])
    doc["work"] = work_costs.measure(config, kind, draft_k, progress=lambda s: models.log(f"[work] {s}"),
                                     entries=entries)
    if doc["work"].get("failed"):
        models.log(f"[work] {doc['work']['reason']}")
    doc["sections"].append({"section": "work: the cost table's calls counted (after the timing, outside --budget)",
                            "seconds": doc["work"].get("seconds", 0.0), "allotted": None})


def _report_all(args, ks: list[int], cpus) -> int:
    """One full report per backend (each `--budget`, in OUT/<backend>/), then every backend's speedup table and
    what moved (`backend_report`) in OUT/backends.md and OUT/backends.json."""
    import json
    from pathlib import Path

    from specdec.report.engines import backend_report
    from specdec.report import figures as overhead_plot, render, build as report
    from specdec.model.backends import BACKENDS

    out = Path(args.out)
    for name in ("",) + BACKENDS:
        writable_dir("--out", str(out / name))
    drafts = _check_report_inputs(args, models.load_target(args, "eager"), ks)
    docs = {}
    for i, name in enumerate(BACKENDS, start=1):
        models.log(f"== backend {name} ({i} of {len(BACKENDS)}) ==")
        doc = _measure_report(args, models.load_target(args, name), drafts, ks, cpus, after_own_run=i > 1,
                              backend=name)
        for path in report.write(doc, out / name, render.tables(doc)):
            models.log(f"wrote {path}")
        docs[name] = doc
    found = backend_report.finding(docs)
    text = backend_report.render(docs, found)
    print(text)
    write_atomic(out / "backends.md", text)
    write_atomic(out / "backends.json", json.dumps(found, indent=2) + "\n")
    models.log(f"wrote {out / 'backends.md'} and {out / 'backends.json'}")
    attribution = {b: a for doc in docs.values() for b, a in (doc.get("attribution") or {}).items()}
    if overhead_plot.write_attribution(attribution, out / "attribution.png", "where the time goes, by backend"):
        models.log(f"wrote {out / 'attribution.png'}")
    return _work_failed(list(docs.values()))


def _calibration(docs: list[dict], out, record: bool) -> int:
    """Coverage of each consecutive pair of reports, written beside the first; each pair's needs appended to
    this machine's between-run record (after the reports: none of them used what their own pair says)."""
    import json

    from specdec.report.compare import calibrate
    from specdec.measure import machine_record

    covs = []
    for a, b in zip(docs, docs[1:]):
        cov = calibrate.coverage(a, b)
        cov["between_run"] = calibrate.between_run(a, b)
        cov["against_rerun"] = calibrate.against_rerun(a, b)
        covs.append(cov)
    text = calibrate.render(covs)
    print(text)
    for name, content in (("calibration.md", text), ("calibration.json", json.dumps(covs, indent=2) + "\n")):
        write_atomic(out / name, content)
        models.log(f"wrote {out / name}")
    if record:
        machine = docs[0]["machine"]
        for (a, _), cov in zip(zip(docs, docs[1:]), covs):
            path = machine_record.append(machine, {
                "date": a["machine"].get("date"), "commit": a["machine"].get("commit"),
                "quick": a["settings"].get("quick"), **cov["between_run"]})
        entries = machine_record.load(machine)
        tau = machine_record.learnt(entries)
        later = (f"the default τ = {machine_record.DEFAULT_TAU:.1%} until it has {machine_record.MIN_CALIBRATIONS}"
                 if tau is None else f"τ = {tau:.1%}")
        models.log(f"recorded {len(covs)} calibration(s) in {path}: this machine now has {len(entries)}; later reports "
                   f"add {later} between runs")
    return 0 if all(c["passed"] for c in covs) else 1


def cmd_calibrate(args) -> int:
    from pathlib import Path

    from specdec.measure import machine_record
    from specdec.report.compare import calibrate

    folder = Path(args.folder)
    paths = [folder / "report.json"] + _repeat_reports(folder)
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or len(paths) < 2:
        raise UsageError(f"{folder}: needs report.json and repeat-2/report.json (from `specdec report --repeat 2 "
                         f"--out {folder}`); missing: {', '.join(missing) or 'repeat-2/report.json'}")
    try:  # reading is checked here; what the calibration itself raises is a bug, not bad input
        docs = [calibrate.load(p) for p in paths]
    except OSError as exc:
        raise UsageError(f"{exc.filename}: {exc.strerror}") from None
    keys = {machine_record.key(d["machine"]) for d in docs}
    if len(keys) > 1:
        raise UsageError(f"{folder}: the reports come from different machines or settings: {sorted(keys)}")
    return _calibration(docs, folder, record=not args.no_record)


def _repeat_reports(folder) -> list:
    """FOLDER/repeat-N/report.json in the order of N; a repeat-* folder not named so is one line of error."""
    import re

    found = []
    for path in folder.glob("repeat-*/report.json"):
        match = re.fullmatch(r"repeat-([0-9]+)", path.parent.name)
        if match is None:
            raise UsageError(f"{path.parent}: not a repeat folder (allowed: repeat-N with N a number, as "
                             "`specdec report --repeat` names them); rename or remove it")
        found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]
