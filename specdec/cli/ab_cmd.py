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


def cmd_ab(args) -> int:
    from specdec.measure import ab, ab_work
    from specdec.measure.ab_sources import sources
    from specdec.report import ab_render

    config, cpu = _check(args)
    kind, why_not = work_plan(args, config)  # an engine in a server has none
    own = entries(config)
    with sources(args.a, args.b, args.a_path, args.b_path, cwd=args.repo, entries=own,
                 probe=probe(config) if own else None) as (a, b):  # a bad revision, folder or entry: InputError
        models.log(f"specdec ab: A = {a.name}, B = {b.name}; {args.pairs} worker pairs on CPU {cpu}, "
                   f"budget {args.budget:g} s; work rows: {ab_work.work.NAMES[kind] if kind else why_not}")
        try:
            run = ab.measure(a, b, config, args.budget, args.pairs, cpu, progress=models.log)
        except ab.WorkerError as exc:
            print(f"specdec ab: a worker failed before anything was measured: {exc}", file=sys.stderr)
            return 1
        try:
            counted = (ab_work.count(a, b, config, kind, list(run.logs), progress=models.log,
                                     batched=args.count_batched, all_ks=args.count_all_ks) if kind
                       else ab_work.unavailable(why_not))
        except ab.WorkerError as exc:  # the timing rows stand; the run is incomplete without its work rows
            counted = ab_work.unavailable(f"the counting worker failed: {exc}", failed=True)
        doc = ab_render.document(run, a, b, cpu, work=counted)
    print(json.dumps(doc, indent=2) if args.json else ab_render.text(doc))
    return 1 if doc["worse"] or doc["work"]["worse"] or doc["work"].get("failed") or not doc["complete"] else 0
