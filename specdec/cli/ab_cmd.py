"""`specdec ab A B`: did B make anything slower than A? Checks, the run, the verdicts (exit 1 when a row got worse)."""

from __future__ import annotations

import json
import math
import os
import sys

from specdec.cli import models
from specdec.cli.checks import UsageError, at_least, temperature_arg, work_plan, work_switches
from specdec.measure import entry

DEFAULT_DRAFTS = ("bigram", "ngram")  # the shipped target's; an hf: target's default is prompt-lookup
DEFAULT_KS = (2, 4)
MAX_BUDGET = 3600.0


def _cpu(text: str | None) -> int:
    """One CPU both workers of every pair run on: --cpu, else the highest-numbered one this process may use
    (CPU 0 takes most of the machine's interrupts)."""
    allowed = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if not allowed:
        raise UsageError("specdec ab pins its workers to one CPU, which this platform cannot do (Linux only)")
    if text is None:
        return allowed[-1]
    if not text.isdigit() or int(text) not in allowed:
        raise UsageError(f"--cpu {text!r}: one CPU this process may use (allowed: {', '.join(map(str, allowed))})")
    return int(text)


def _check(args) -> tuple[dict, int]:
    """Every option checked before a worktree or a worker exists; the workers' config and the CPU."""
    if (args.a is None) != (args.a_path is not None) or (args.b is None) != (args.b_path is not None):
        raise UsageError("give each side once: a revision (A, B) or a folder (--a-path DIR, --b-path DIR); got "
                         f"A={args.a or args.a_path}, B={args.b or args.b_path}")
    if not (math.isfinite(args.budget) and 0 < args.budget <= MAX_BUDGET):
        raise UsageError(f"--budget must be seconds in (0, {MAX_BUDGET:g}], got {args.budget}")
    at_least("--pairs", args.pairs, 2)
    at_least("--chars", args.chars, 2)
    at_least("--threads", args.threads, 1)
    at_least("--seed", args.seed, 0)
    temperature_arg(args.temperature)
    work_switches(args, "work rows")
    ks = models.ks_arg(args.ks, DEFAULT_KS)
    if args.engine is not None:
        return _check_engine(args, ks), _cpu(args.cpu)
    if args.url is not None or args.baseline_url is not None:
        raise UsageError("--url and --baseline-url are for --engine openai")
    spec = models.target_spec(args)
    if models.is_hf(spec) and not os.path.isdir(spec[len("hf:"):]) and not args.allow_download:
        raise UsageError(f"--target {spec}: no such folder (specdec {args.command} loads a local Hugging Face "
                         "folder)")
    own = entry.is_entry(spec)
    drafts = args.drafts or (["prompt-lookup"] if models.is_hf(spec) or own else list(DEFAULT_DRAFTS))
    models.check_draft_names([d for d in drafts if not entry.is_entry(d)])
    config = {"target": spec, "backend": models.backend_name(args), "dtype": args.dtype, "drafts": drafts,
              "ks": ks, "chars": args.chars, "prompt": args.prompt, "seed": args.seed,
              "temperature": args.temperature, "threads": args.threads}
    if not own:  # a user's target is checked in each revision (`probe`); a shipped or hf: one here, as always
        _check_models(args, [d for d in drafts if not entry.is_entry(d)], ks)
    if entries(config):  # a user's code: the running specdec is the harness of both sides
        config["harness"] = entry.harness_root()
    return config, _cpu(args.cpu)


def entries(config: dict) -> list[str]:
    """The config's `MODULE:CALLABLE` entry points (a user's own target and drafts), target first."""
    return [s for s in [config.get("target"), *config.get("drafts", [])] if entry.is_entry(s)]


def probe(config: dict):
    """The check `sources` runs on each tree before a worktree exists: its entry points import with the running
    specdec and return a Target and Drafts (`entry.probe`, in a subprocess on a temporary export)."""
    def check(src, root) -> None:
        where = f"{src.label} = {src.name}"
        if root is None:
            entry.probe(src.path, where, config["target"], config["drafts"], config["harness"])
        else:
            entry.probe_commit(root, src.commit, where, config["target"], config["drafts"], config["harness"])
    return check


def _check_engine(args, ks: list[int]) -> dict:
    """The engine opened here once with this checkout's code (every input it checks: one line, exit 2), then
    closed; the workers' config. The drafts default to the engine's own."""
    from specdec.engines.base import EngineOptions
    from specdec.engines.registry import open_engine

    if args.backend != "auto" or args.checkpoint is not None:
        raise UsageError(f"--{'backend' if args.backend != 'auto' else 'checkpoint'} is for specdec's own loop, not "
                         f"for --engine {args.engine} (give the engine's model with --target)")
    if (args.engine == "openai") != (args.url is not None and args.baseline_url is not None):
        raise UsageError("--engine openai needs --url and --baseline-url, and only it takes them")
    options = EngineOptions(target=args.target, drafts=list(args.drafts or []), dtype=args.dtype, threads=args.threads,
                            url=args.url, baseline_url=args.baseline_url, log=models.log)
    engine = open_engine(args.engine, options)
    try:
        drafts = engine.drafts()
        engine.generate(args.prompt, args.chars, args.seed, args.temperature)  # the prompt and length fit it
    finally:
        engine.close()
    return {"engine": args.engine, "target": args.target, "url": args.url, "baseline_url": args.baseline_url,
            "dtype": args.dtype, "drafts": drafts, "ks": ks, "chars": args.chars, "prompt": args.prompt,
            "seed": args.seed, "temperature": args.temperature, "threads": args.threads}


def _check_models(args, drafts: list[str], ks: list[int]) -> None:
    """The target and drafts load here, and the prompt and characters fit them, with this checkout's code: what
    every revision's workers will be asked, refused in one line before a worktree or a worker exists."""
    from specdec.decoding.generate import check_request

    target = models.load_target(args)
    check_request(target, args.prompt, args.chars, k=max(ks), temperature=args.temperature)
    models.build_drafts(args, target, drafts)


INCOMPLETE = 3  # the exit status of a run that stopped early (interrupted, or a part failed): what it measured is kept


def cmd_ab(args) -> int:
    """Check, time, keep the timing's document (args.out), count, keep the whole document, print it. ^C or
    SIGTERM at any phase: the workers, the counting process and the worktrees are ended, the document of what
    was measured is kept and printed with what is missing, and the exit status is INCOMPLETE."""
    config, cpu = _check(args)
    out = _out_path(args.out)
    kind, why_not = work_plan(args, config)  # an engine in a server has none
    try:
        return _run(args, config, cpu, out, kind, why_not)
    except KeyboardInterrupt:  # before the timing began or after it was kept: worktrees removed on the way out
        print(f"specdec ab: INCOMPLETE: interrupted; whatever was measured is in {out}" if out.exists() else
              "specdec ab: INCOMPLETE: interrupted before anything was measured", file=sys.stderr)
        return INCOMPLETE


def _run(args, config: dict, cpu: int, out, kind: str | None, why_not: str) -> int:
    from specdec.measure.ab import ab, ab_work
    from specdec.measure.ab.ab_sources import sources
    from specdec.report.ab import ab_render

    own = entries(config)
    with sources(args.a, args.b, args.a_path, args.b_path, cwd=args.repo, entries=own,
                 probe=probe(config) if own else None) as (a, b):  # a bad revision, folder or entry: InputError
        models.log(f"specdec ab: A = {a.name}, B = {b.name}; {args.pairs} worker pairs on CPU {cpu}, "
                   f"budget {args.budget:g} s; work rows: {ab_work.work.NAMES[kind] if kind else why_not}; "
                   f"kept in {out}")
        try:
            run = ab.measure(a, b, config, args.budget, args.pairs, cpu, progress=models.log)
        except ab.WorkerError as exc:
            print(f"specdec ab: a worker failed before anything was measured: {exc}", file=sys.stderr)
            return 1
        pending = ab_work.unavailable("not counted: the run was interrupted before the count" if run.interrupted
                                      else "being counted" if kind else why_not, failed=run.interrupted)
        doc = _keep(out, ab_render.document(run, a, b, cpu, work=pending), missing=bool(kind) or run.interrupted)
        if not run.interrupted and kind:
            doc = _keep(out, ab_render.document(run, a, b, cpu, work=_count(a, b, config, kind, run, args)))
    print(json.dumps(doc, indent=2) if args.json else ab_render.text(doc))
    if doc.get("missing"):
        print(f"specdec ab: INCOMPLETE: {'; '.join(doc['missing'])}; what was measured is in {out}", file=sys.stderr)
        return INCOMPLETE
    return 1 if doc["worse"] or doc["work"]["worse"] or doc["work"].get("failed") or not doc["complete"] else 0


def _out_path(text: str):
    """--out: a file whose folder exists (or can be made); refused in one line before any work."""
    from pathlib import Path

    path = Path(text).absolute()
    if path.is_dir():
        raise UsageError(f"--out {text}: a folder; give a file name (default specdec-ab.json)")
    return path


def _count(a, b, config: dict, kind: str, run, args) -> dict:
    """The work rows, or why there are none: an interrupt or any failure of the count leaves the timing standing
    (a failure that is a bug is said with its traceback on stderr, not dressed as bad input)."""
    from specdec.measure.ab import ab, ab_work

    try:
        return ab_work.count(a, b, config, kind, list(run.logs), progress=models.log,
                             batched=args.count_batched, all_ks=args.count_all_ks)
    except ab.WorkerError as exc:  # the timing rows stand; the run is incomplete without its work rows
        return ab_work.unavailable(f"the counting worker failed: {exc}", failed=True)
    except KeyboardInterrupt:
        return {**ab_work.unavailable("interrupted during the count", failed=True), "interrupted": True}
    except Exception as exc:  # noqa: BLE001 -- a bug in the count: its traceback on stderr, the timing kept
        import traceback

        traceback.print_exc(file=sys.stderr)
        return ab_work.unavailable(f"the count failed ({type(exc).__name__}: {exc})", failed=True)


def _keep(out, doc: dict, missing: bool = False) -> dict:
    """The document with what it lacks named ("missing"), written to `out` atomically (never half a file)."""
    from specdec.util.files import write_atomic

    gaps = []
    if not doc["complete"] and doc.get("error", "").startswith("interrupted"):  # a failed worker is exit 1
        gaps.append(f"timing: {doc['error'].splitlines()[0]}")
    work = doc["work"]
    if missing and not work["rows"]:
        gaps.append(f"work rows: {work['reason']}")
    elif work.get("failed") and "interrupted" in work.get("reason", ""):
        gaps.append("work rows: interrupted during the count")
    doc = {**doc, "missing": gaps}
    write_atomic(out, json.dumps(doc, indent=2) + "\n")
    return doc


def cmd_calibrate_work(args) -> int:
    """`specdec calibrate-work`: the running specdec's A/A, deep and null trees counted and fitted
    (`ab_work.calibrate`), kept for this machine and configuration; each row's fit and the threshold a
    default `specdec ab` run would then have, on stdout."""
    from pathlib import Path

    from specdec.cli.parser import build_parser
    from specdec.measure.ab import ab_work
    from specdec.measure.work import work_calibration

    at_least("--aa", args.aa, 1)
    at_least("--null", args.null, 1)
    for name, value in vars(build_parser().parse_args(["ab"])).items():  # ab's defaults for the rest
        if not hasattr(args, name):
            setattr(args, name, value)
    args.a_path = args.b_path = str(Path(work_calibration.__file__).resolve().parents[3])
    config, _ = _check(args)
    kind, why_not = work_plan(args, config)
    if kind is None:
        raise UsageError(f"no work counter to calibrate: {why_not}")
    models.log(f"specdec calibrate-work: {1 + args.aa + 1 + args.null} trees x {len(ab_work.LAYOUTS)} layouts "
               f"counted by {ab_work.work.NAMES[kind]} (about a minute and a half a tree under callgrind)")
    doc = ab_work.calibrate(config, kind, args.aa, args.null, progress=models.log)
    rows = ab_work.largest_k(ab_work.row_names(config))
    tests = len(ab_work.row_names(config)) + len(rows)  # a default ab run's family: its timed and work rows
    print(f"calibration {doc['id']} kept in {doc['path']}")
    print(f"{'row':24} {'layout sd':>10} {'build sd':>9} {'threshold':>9} {'detects':>8}")
    for row, fit in doc["rows"].items():
        n = len(ab_work.LAYOUTS)
        judged = ab_work.compare([1.0] * n, [1.0] * n, tests, cal=fit)
        print(f"{row:24} {fit['sigma_l']:>10.4%} {fit['sigma_b']:>9.4%} {judged['threshold']:>9.3%} "
              f"{judged['detects']:>8.3%}")
    return 0
