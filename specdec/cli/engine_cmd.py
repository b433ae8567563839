"""`specdec report --engine NAME ...`: the checks, the engines opened (every input checked before anything is
timed), the engine report measured and written."""

from __future__ import annotations

import math

from specdec.cli import models
from specdec.cli.checks import UsageError, at_least, device_arg, temperature_arg, writable_dir

# specdec's own report's options that mean nothing to an engine report, each with its default
OWN_ONLY = {"backend": "auto", "trees": None, "repeat": 1, "between_run": "auto", "checkpoint": None,
            "batched": False, "work": True, "counter": "auto"}


def cmd_engine_report(args) -> int:
    from pathlib import Path

    from specdec.engines.base import EngineError, EngineOptions
    from specdec.measure import hygiene

    _check(args)
    cpus = hygiene.parse_cpus(args.cpu) if args.cpu is not None else None
    ks = models.ks_arg(args.ks, (2, 4))
    writable_dir("--out", args.out)
    writable_dir("--out", str(Path(args.out).absolute().parent))
    options = EngineOptions(target=args.target, drafts=list(args.drafts or []), device=args.device, dtype=args.dtype,
                            threads=args.threads, url=args.url, baseline_url=args.baseline_url, log=models.log)
    engines = []
    try:  # an engine failing before the pairs (EngineError) leaves nothing to report: one line, exit 1
        return _measure(args, options, ks, cpus, engines)
    except EngineError as exc:
        models.log(f"specdec report: the engine failed before any pair was timed: {exc}")
        return 1
    finally:
        for e in engines:
            e.close()


def _measure(args, options, ks: list[int], cpus, engines: list) -> int:
    """Open every engine (each checks its inputs: InputError, exit 2, before anything is timed), measure, print
    and write. A run an engine stopped is written beside OUT, as OUT-incomplete, never over it; exit 1."""
    from pathlib import Path

    from specdec.engines.registry import open_engine
    from specdec.report import build
    from specdec.report.engines import engine_build, engine_render

    for name in dict.fromkeys(args.engine):
        models.log(f"opening engine {name}")
        engines.append(open_engine(name, options))
    doc = engine_build.measure(engines, ks, quick=args.quick, pairs=args.pairs, threads=args.threads,
                               device=args.device, chars=args.chars, seed=args.seed, prompt=args.prompt,
                               temperature=1.0 if args.temperature is None else args.temperature,
                               budget=args.budget, cpus=cpus, workload=args.workload, started=args.started,
                               log=models.log)
    text = engine_render.render(doc)
    print(text)
    out = args.out if not doc.get("incomplete") else f"{Path(args.out).absolute()}-incomplete"
    for path in build.write(doc, out, text):  # an incomplete run never replaces a complete report
        models.log(f"wrote {path}")
    return 1 if doc.get("incomplete") else 0


def _check(args) -> None:
    """Every option an engine report reads, and none of those only specdec's own report reads."""
    for option, default in OWN_ONLY.items():
        if getattr(args, option, default) != default:
            flag = "no-work" if option == "work" else option.replace("_", "-")
            raise UsageError(f"--{flag} is for specdec's own report, not for --engine "
                             f"{' '.join(args.engine)} (an engine runs its own loop)")
    if "openai" in args.engine:
        for option in ("url", "baseline_url"):
            if getattr(args, option) is None:
                raise UsageError(f"--engine openai needs --url (the server with speculation) and --baseline-url "
                                 f"(the same model without); missing --{option.replace('_', '-')}")
    elif args.url is not None or args.baseline_url is not None:
        raise UsageError("--url and --baseline-url are for --engine openai")
    if args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.pairs is not None and args.pairs < 1:
        raise UsageError(f"--pairs must be at least 1, got {args.pairs}")
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
    if args.seed is not None:
        at_least("--seed", args.seed, 0)
    at_least("--chars", args.chars, 1)
    if args.temperature is not None:
        temperature_arg(args.temperature)
    device_arg(args.device)
    if args.prompt is not None and args.workload is not None:
        raise UsageError("give --prompt (one configuration) or --workload, not both")
    if args.prompt == "":
        raise UsageError("--prompt is empty; give at least one character")
