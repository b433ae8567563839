"""`specdec build-server`: build llama.cpp's `llama-server` once per version, or say where the cached one is.

The binary's path goes to stdout (so `$(specdec build-server)` is the binary), progress to stderr; a build that
cannot start (no cmake, no compiler) is bad input, one line and exit 2; a build that fails (an sdist that cannot
be had, a failing compile) is exit 1 with its log's last lines and path; the cache is left as it was either way.
"""

from __future__ import annotations

import os
import shutil

from specdec.cli import models
from specdec.cli.checks import UsageError
from specdec.measure.clock import measured

WORKLOAD = "shakespeare24"  # the prompts every load window cycles through (the report's workload)


def cmd_build_server(args) -> int:
    from specdec.engines import server_build

    if args.jobs < 1:
        raise UsageError(f"--jobs must be at least 1, got {args.jobs}")
    started = measured()
    path, built = server_build.build(args.version, jobs=args.jobs, log=models.log)
    if not built:
        models.log(f"build-server: cached ({measured() - started:.1f} s); remove "
                   f"{path.parent} to build again")
    print(path)
    return 0


# --- specdec load ----------------------------------------------------------------------------------------


def _slos(items: list[str] | None) -> dict[str, float]:
    """--slo ttft=500 tpot=50 (milliseconds) -> seconds by kind; UsageError naming the bad item."""
    from specdec.measure.load.load_stats import SLO_KEYS

    out = {}
    for item in items or []:
        key, _, value = item.partition("=")
        try:
            ms = float(value)
        except ValueError:
            ms = float("nan")
        if key not in SLO_KEYS or not (ms > 0 and ms < float("inf")):
            raise UsageError(f"--slo {item!r} is not allowed (allowed: {', '.join(SLO_KEYS)}=MILLISECONDS, a "
                             "positive number, e.g. --slo ttft=500 tpot=50)")
        out[key] = ms / 1000.0
    return out


def _check_load(args):
    """Every option of `specdec load`, before anything starts or is exported: (levels, slos, prompts)."""
    import math

    from specdec.cli.checks import at_least, temperature_arg, writable_dir
    from specdec.measure.load.load_schedule import Level, doubling, parse_levels
    from specdec.measure.workload import load_workload

    for option, minimum in (("--slots", 1), ("--visits", 2), ("--requests", 2), ("--warmup", 0),
                            ("--max-tokens", 2), ("--n-max", 1)):
        at_least(option, getattr(args, option[2:].replace("-", "_")), minimum)
    temperature_arg(args.temperature)
    if not (args.burstiness > 0 and math.isfinite(args.burstiness)):
        raise UsageError(f"--burstiness must be a positive number (1 is Poisson), got {args.burstiness}")
    if args.budget is not None and not (args.budget > 0 and math.isfinite(args.budget)):
        raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
    if args.concurrency == "none":  # open-loop rates only
        levels = []
    elif args.concurrency is None:
        levels = [Level("concurrency", c) for c in doubling(args.slots)]
    else:
        levels = parse_levels("--concurrency", args.concurrency, "concurrency")
    levels += parse_levels("--rates", args.rates, "rate") if args.rates else []
    if not levels:
        raise UsageError("no load level: give --concurrency 1,2,4 and/or --rates 0.5,1")
    too_many = [lv.name for lv in levels if lv.kind == "concurrency" and lv.value > args.slots and args.url is None]
    if too_many:
        raise UsageError(f"--concurrency {too_many[0]} is more clients than --slots {args.slots} (allowed: at most "
                         "the server's slots, or more --slots)")
    slos = _slos(args.slo)
    prompts = [item.prompt for item in load_workload(WORKLOAD, chars=args.max_tokens, max_k=args.n_max).items]
    writable_dir("--out", args.out)
    _check_servers(args)
    return levels, slos, prompts


def _check_servers(args) -> None:
    """The servers' options: URLs given (both or none), or what starting two servers needs (a binary, the
    GGUF files given, free ports)."""
    from pathlib import Path

    from specdec.engines import llama_server as ls
    from specdec.engines import server_build
    from specdec.engines.openai_api import check_url

    if args.spec_type not in ls.SPEC_TYPES:
        raise UsageError(f"--spec-type {args.spec_type!r} is not one of the server's kinds (allowed: "
                         f"{', '.join(ls.SPEC_TYPES)})")
    if (args.url is None) != (args.baseline_url is None):
        raise UsageError("give both --url (the server with speculation) and --baseline-url (the same model without),"
                         " or neither (specdec starts both)")
    if args.url is not None:
        check_url("--url", args.url)
        check_url("--baseline-url", args.baseline_url)
        return
    for option, path in (("--model", args.model), ("--draft-model", args.draft_model)):
        if path is not None and not Path(path).is_file():
            raise UsageError(f"{option} {path} does not exist (allowed: a GGUF file; default: the shipped pair, "
                             "exported as by export-gguf)")
    if args.port is not None:  # a port in use: one line before anything starts
        for port in range(args.port, args.port + 3):
            ls.check_port(port)
    args.server = args.server or server_build.find_binary()
    if args.server is None:
        raise UsageError("no llama-server: build it with `specdec build-server` (about 15 minutes on 2 cores, once) "
                         "or give --server PATH")
    if not (Path(args.server).is_file() and os.access(args.server, os.X_OK)):
        raise UsageError(f"--server {args.server} is not an executable file (allowed: a llama-server binary)")


def cmd_load(args) -> int:
    """Check everything, start (or reach) both servers, sweep; write what was measured, then conclude, print
    and write the answer; exit 1 when a server died or the conclusion failed (what was measured stays on disk).
    """
    import contextlib
    import tempfile
    from pathlib import Path

    from specdec.measure.load import load, load_conclude
    from specdec.report.engines import load_render

    levels, slos, prompts = _check_load(args)
    with contextlib.ExitStack() as stack:
        servers = {}
        if args.url is None:
            folder = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="specdec-load-")))
            servers = _start_servers(args, folder, stack, prompts)
            urls = {arm: s.url for arm, s in servers.items()}
        else:
            from specdec.engines.openai_api import check_url, probe as answers

            urls = {"on": check_url("--url", args.url), "off": check_url("--baseline-url", args.baseline_url)}
            answers("--url", urls["on"]), answers("--baseline-url", urls["off"])  # one line, exit 2, if not
        probe = load.n_max_probe(urls["on"], prompts[0])
        models.log(f"load: per-request speculative.n_max honoured: {probe.get('honoured')} ({probe.get('drafted')})")
        sweep = load.Sweep(urls=urls, levels=levels, prompts=prompts, visits=args.visits, requests=args.requests,
                           warmup=args.warmup, max_tokens=args.max_tokens, temperature=args.temperature,
                           burstiness=args.burstiness, slos=slos, order=args.order,
                           budget=args.budget or float("inf"))
        lines = Path(f"{Path(args.out).absolute()}.windows.jsonl")  # each window as it ends: ^C loses none
        lines.parent.mkdir(parents=True, exist_ok=True)
        with open(lines, "w") as jsonl:
            models.log(f"load: each window appended to {lines} as it ends")
            swept = load.run(sweep, log=models.log, alive=lambda: _gone(servers), record=lambda w: _append(jsonl, w))
    described = {arm: s.describe() for arm, s in servers.items()} or {arm: {"url": u} for arm, u in urls.items()}
    # what was measured goes to disk before anything is concluded from it, so that a conclusion that fails
    # loses none of it; to OUT-incomplete, so that it never replaces an earlier whole result in OUT
    unconcluded = Path(f"{Path(args.out).absolute()}-incomplete")
    raw_path = load_render.write_raw({**load.raw(sweep, swept), "servers": described, "n_max_probe": probe},
                                     unconcluded)
    models.log(f"wrote {raw_path}")
    try:
        doc = {**load_conclude.concluded(sweep, swept), "servers": described, "n_max_probe": probe}
        text = load_render.render(doc)
        paths = load_render.write(doc, unconcluded if swept.incomplete else args.out, text)
    except Exception as exc:  # a bug in the conclusion: one line; what was measured is on disk
        import traceback

        trace = load_render.write_failure(unconcluded, traceback.format_exc())
        models.log(f"specdec load: drawing the conclusion failed ({type(exc).__name__}: {exc}); every window "
                   f"measured is in {raw_path} (the traceback in {trace})")
        return 1
    if not swept.incomplete:  # the whole result is in OUT: the unconcluded copy was this run's own
        shutil.rmtree(unconcluded, ignore_errors=True)
    print(text)
    for path in paths:
        models.log(f"wrote {path}")
    if swept.incomplete and swept.incomplete.startswith("interrupted"):
        models.log(f"specdec load: INCOMPLETE ({swept.incomplete}); what was measured is in {raw_path} and {lines}")
        return INCOMPLETE
    return 1 if swept.incomplete else 0


INCOMPLETE = 3  # the exit status of a sweep stopped by ^C or SIGTERM: what it measured is on disk


def _append(jsonl, window: dict) -> None:
    """One window as one JSON line, flushed to the OS before the next window starts."""
    import json

    jsonl.write(json.dumps(window) + "\n")
    jsonl.flush()


def _start_servers(args, folder, stack, prompts: list[str]) -> dict:
    """The three llama-servers on 127.0.0.1 (spec-on, spec-off, spec-off for the A/A), the GGUF pair exported
    when not given (options checked before), each slot's context sized to the longest prompt and
    --max-tokens."""
    from specdec.engines import llama_server as ls

    model, draft = args.model, args.draft_model
    if model is None or (draft is None and args.spec_type == "draft-simple"):
        from specdec.model.export_gguf import export_gguf

        paths = export_gguf(folder / "gguf")
        model, draft = model or str(paths["target"]), draft or str(paths["small"])
    ctx = ls.slot_context(prompts, args.max_tokens, args.n_max)
    # a second spec-off server for the A/A: two processes against each other, as spec-on against spec-off
    specs = {"on": ls.ServerSpec(model, args.slots, args.spec_type, draft, args.n_max, ctx=ctx),
             "off": ls.ServerSpec(model, args.slots, None, None, args.n_max, ctx=ctx),
             "off2": ls.ServerSpec(model, args.slots, None, None, args.n_max, ctx=ctx)}
    servers = {}
    for i, (arm, spec) in enumerate(specs.items()):
        server = ls.LlamaServer(args.server, spec, None if args.port is None else args.port + i)
        models.log(f"load: starting the spec-{arm} server: {' '.join(server.argv)}")
        servers[arm] = stack.enter_context(server)
    return servers


def _gone(servers: dict) -> str | None:
    for arm, s in servers.items():
        if not s.alive():
            return f"the spec-{arm} llama-server exited ({s.proc.returncode}): {s.last_line()}"
    return None
