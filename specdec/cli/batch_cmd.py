"""`specdec batch`: the report's batch section alone -- the paired speedup at batch sizes B, the cost model at
B and the crossover per draft -- within --budget, written as batch.md, batch.json and batch.png."""

from __future__ import annotations

import math

from specdec.cli import models
from specdec.cli.checks import UsageError, at_least, device_arg, writable_dir

ALLOWED_BATCHES = range(1, 257)


def check_batch_args(args) -> list[int]:
    """Every value checked before anything loads; returns the batch sizes (increasing, no repeats)."""
    if not (math.isfinite(args.budget) and args.budget > 0):
        raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
    at_least("-k", args.k, 1)
    at_least("--chars", args.chars, 2)
    at_least("--threads", args.threads, 1)
    if args.pairs is not None:
        at_least("--pairs", args.pairs, 1)
    bad = [b for b in args.batches if b not in ALLOWED_BATCHES]
    if bad:
        raise UsageError(f"--batches: {bad[0]} is not a batch size (allowed: 1 to {ALLOWED_BATCHES[-1]})")
    device_arg(args.device)
    models.check_draft_names(args.drafts or [], args.device)
    draft_ks(args)
    writable_dir("--out", args.out)
    return sorted(set(args.batches))


def draft_ks(args) -> dict[str, int]:
    """--draft-k NAME=K ... as a dict; each NAME must be among --drafts (when given) and K at least 1."""
    out = {}
    for item in args.draft_k:
        name, sep, k = item.partition("=")
        if not sep or not k.strip().isdigit():
            raise UsageError(f"--draft-k: {item!r} is not NAME=K (e.g. ngram=4)")
        at_least(f"--draft-k {name}", int(k), 1)
        if args.drafts and name not in args.drafts:
            raise UsageError(f"--draft-k: {name!r} is not among --drafts (given: {', '.join(args.drafts)})")
        out[name] = int(k)
    return out


def cmd_batch(args) -> int:
    from specdec.decoding import batch as bt
    from specdec.decoding.generate import check_request
    from specdec.measure import workload
    from specdec.report.batch import batch_build, batch_render

    batches = check_batch_args(args)
    target = models.load_target(args)
    why = bt.target_support(target)
    if why:
        raise UsageError(f"--target: {why}")
    ks = draft_ks(args)
    top = max([args.k, *ks.values()])
    check_request(target, "ROMEO:", args.chars, k=top)
    workload.load_workload(args.workload or workload.DEFAULT_WORKLOAD, chars=args.chars, max_k=top)
    drafts = models.drafts_arg(args.drafts, args.device)
    doc = batch_build.measure_batch(target, drafts, args.k, batches, args.chars, args.budget, args.quick, args.pairs,
                                  args.threads, args.device, args.workload, started=args.started, log=models.log,
                                  draft_ks=ks)
    print("\n".join(batch_render.batch_lines(doc)))
    for path in batch_build.write_batch(doc, args.out):
        models.log(f"wrote {path}")
    return 0
