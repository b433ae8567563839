"""The `specdec` command: train, info, generate, verify, report, calibrate, compare, overhead, export-hf.

Every bad argument ends in one line on stderr and exit code 2 (argparse's convention), never a traceback,
and is found before any training or measuring starts: output locations are checked to be writable first, so
no result is lost to a bad `--out`.

The target is the shipped checkpoint, another checkpoint (--checkpoint, or --target PATH), or a Hugging Face
causal LM (--target hf:PATH); drafts are names, prompt-lookup or hf:PATH. A model that cannot load, or a draft
that does not fit the target (another vocabulary, a quantized copy of a model that is not the shipped GPT), is
one line and exit 2 before anything is measured or written.
"""

from __future__ import annotations

import os
import sys

from specdec.model import train as _train
from specdec.model.backends import BACKENDS
from specdec.cli.checks import (UsageError, at_least, device_arg, fraction_arg, hf_extra, temperature_arg,
                                writable_dir, writable_file)
from specdec.cli.parser import build_parser
from specdec.decoding.registry import HF_PREFIX
from specdec.util.files import write_atomic


def _cmd_train(args) -> int:
    from specdec.model.gpt import GPTConfig

    at_least("--steps", args.steps, 1)
    at_least("--batch", args.batch, 1)
    at_least("--threads", args.threads, 1)
    at_least("--seed", args.seed, 0)
    if args.teacher is not None and args.draft != "small":
        raise UsageError("--teacher needs --draft small (only the small draft is distilled from a teacher)")
    out = args.out or _train.shipped_path(args.draft or "target")
    writable_file("--out", out)
    tc = _train.TrainConfig(steps=args.steps, seed=args.seed, batch=args.batch, threads=args.threads)
    teacher = None
    if args.draft == "small":
        cfg = _train.SMALL_CONFIG
        teacher = _train.load_target(args.teacher)
    else:
        cfg = GPTConfig()
    model, meta = _train.train(cfg, tc, teacher=teacher, log=_log)
    sha = _train.save_checkpoint(model, meta, out)
    print(f"wrote {out} (sha256 {sha[:12]}, val loss {meta['val_loss']:.4f}, {meta['train_seconds']:.0f}s)")
    return 0


def _log(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


# --- the target and the drafts by spec (issue 26): a checkpoint, or hf:PATH --------------------------------


def _is_hf(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(HF_PREFIX)


def _target_spec(args) -> str | None:
    """--target or --checkpoint (None: the shipped checkpoint); both at once is an error."""
    spec, checkpoint = getattr(args, "target", None), getattr(args, "checkpoint", None)
    if spec is not None and checkpoint is not None:
        raise UsageError(f"give --target or --checkpoint, not both (got --target {spec} and --checkpoint "
                         f"{checkpoint}; --target is the general form)")
    return checkpoint if spec is None else spec


def _draft_specs(args) -> list[str]:
    """Every draft the command was given (generate's one --draft, verify's repeated --draft, report's --drafts)."""
    given = getattr(args, "drafts", None) or getattr(args, "draft", None) or []
    return [given] if isinstance(given, str) else list(given)


def _check_model_args(args) -> None:
    """--target, --backend, --dtype and --allow-download agree, before anything is loaded: an hf: target runs
    as transformers runs it (auto means eager), and the two loading options mean something only for hf: models."""
    spec, drafts = _target_spec(args), _draft_specs(args)
    for option, s in [("--target", spec)] + [("--draft", d) for d in drafts]:
        if _is_hf(s):
            if len(s) == len(HF_PREFIX):
                raise UsageError(f"{option} {s}: name the model after the prefix (hf:FOLDER or hf:MODEL-ID)")
            hf_extra(f"{option} {s}")
    backend = getattr(args, "backend", "auto")
    if _is_hf(spec) and backend not in ("auto", "eager"):
        raise UsageError(f"--backend {backend} is for the shipped model; a Hugging Face target runs as "
                         f"transformers runs it (allowed with --target {spec}: auto, eager)")
    if _is_hf(spec) or any(_is_hf(d) for d in drafts):
        return
    if args.dtype is not None:
        raise UsageError(f"--dtype {args.dtype} is for Hugging Face models (--target hf:PATH or --draft "
                         "hf:PATH); the shipped model computes in float32")
    if args.allow_download:
        raise UsageError("--allow-download is for Hugging Face model ids (--target hf:ID or --draft hf:ID); "
                         "nothing else is downloaded")


def _backend(args) -> str:
    """--backend as a name: auto is the fastest on the command's device (eager for a Hugging Face target)."""
    from specdec.model.backends import fastest

    if _is_hf(_target_spec(args)):
        return "eager"
    name = getattr(args, "backend", "eager")
    return fastest(getattr(args, "device", "cpu")) if name == "auto" else name


def _target(args, backend: str | None = None):
    """The target the command names. A Hugging Face model loads on --device in --dtype; every failure to load
    is a one-line HFModelError (a ValueError: exit 2 in `main`)."""
    spec = _target_spec(args)
    if _is_hf(spec):
        return _train.load_target(spec, device=getattr(args, "device", "cpu"), dtype=args.dtype,
                                  allow_download=args.allow_download)
    return _train.load_target(spec, backend=backend or _backend(args))


def _check_draft_names(names: list[str], device: str = "cpu") -> None:
    """Every name is a draft make_draft knows (or hf:PATH), and runs on `device`: checked before loading."""
    from specdec.decoding.registry import DRAFTS, available_on, draft_names

    here, known = available_on(device), draft_names()
    for n in names:
        if n not in known and not _is_hf(n):
            raise UsageError(f"unknown draft {n!r} (available: {', '.join(known)}, hf:PATH)")
        if n in DRAFTS and n not in here:
            raise UsageError(f"draft {n!r} runs on the CPU only, not on {device} (available there: "
                             f"{', '.join(here)})")


def _drafts_arg(names: list[str] | None, device: str = "cpu") -> list[str]:
    """The drafts asked for; by default every shipped one that runs on `device` (a one-line note names the rest)."""
    from specdec.decoding.registry import DRAFTS, available_on

    if names:
        _check_draft_names(names, device)
        return names
    here = available_on(device)
    for n in DRAFTS:
        if n not in here:
            _log(f"note: skipping draft {n!r}: it runs on the CPU only, not on {device}")
    return here


def _make_draft(args, name: str, target):
    """One draft for `target`; an hf: draft loads in --dtype (on the target's device) and must share the
    target's vocabulary. A draft the target cannot have is a one-line ValueError naming why."""
    from specdec.decoding.registry import make_draft

    options = {"dtype": args.dtype, "allow_download": args.allow_download} if _is_hf(name) else {}
    return make_draft(name, target, **options)


def _default_drafts(args, target) -> list[str]:
    """The drafts a command runs when none are named: for the shipped model's checkpoints every shipped draft
    that runs on the device; for a Hugging Face target those it can have, as a report chooses them."""
    from specdec.report.build import default_drafts

    if _is_hf(_target_spec(args)):
        return default_drafts(target)
    return _drafts_arg(None, getattr(args, "device", "cpu"))


def _drafts(args, target, names: list[str] | None) -> dict:
    """The drafts asked for (by default `_default_drafts`), built for `target`."""
    return {n: _make_draft(args, n, target) for n in names or _default_drafts(args, target)}


def _check_trees(option: str, target) -> None:
    from specdec.model.protocol import tree_support

    reason = tree_support(target)
    if reason:
        raise UsageError(f"{option}: {reason}")


def _units(target) -> tuple[str, str]:
    """The target's unit, plural and singular: characters for the shipped model, tokens otherwise."""
    from specdec.model.protocol import units

    plural = units(target)
    return plural, plural[:-1]


def _ks_arg(ks: list[int] | None, default) -> list[int]:
    ks = ks or list(default)
    for k in ks:
        if k < 1:
            raise UsageError(f"k must be at least 1, got {k}")
    return ks


def _cmd_info(args) -> int:
    import json

    import torch

    target = _target(args)
    if _is_hf(_target_spec(args)):
        info = _hf_info(target)
    else:
        info = _checkpoint_info(target)
    info.update({"torch_version": torch.__version__, "threads": torch.get_num_threads()})
    if args.json:
        print(json.dumps(info))
    else:
        for key, value in info.items():
            print(f"{key:22} {value}")
    return 0


def _checkpoint_info(target) -> dict:
    from specdec.model.quantize import float32_bytes

    meta = target.meta
    return {
        "params": target.num_params(),
        "weight_bytes_float32": float32_bytes(target),
        "vocab_size": target.config.vocab_size,
        "context": target.config.context,
        "config": target.config.to_dict(),
        "val_loss": meta.get("val_loss"),
        "train_steps": meta.get("steps"),
        "train_seconds": meta.get("train_seconds"),
        "checkpoint": meta["path"],
        "checkpoint_sha256": meta["sha256"],
    }


def _hf_info(target) -> dict:
    """A Hugging Face target: who it is (as report.json records it), its size, and how it was loaded."""
    from specdec.model.protocol import describe

    return {**describe(target), "params": sum(p.numel() for p in target.parameters()),
            "weight_bytes": target.weight_bytes(), "dtype": str(target.dtype).removeprefix("torch."),
            "device": str(target.device)}


def _cmd_generate(args) -> int:
    import json

    import torch

    from specdec.decoding.generate import generate, speculative_generate

    _check_tree_args(args)
    if args.draft is None and (args.k is not None or args.adaptive):
        raise UsageError(f"{'-k' if args.k is not None else '--adaptive'} needs --draft (the draft that proposes "
                         "the characters)")
    temperature_arg(args.temperature)
    at_least("--threads", args.threads, 1)
    at_least("--seed", args.seed, 0)
    device = device_arg(args.device)
    if args.draft is not None:
        _check_draft_names([args.draft], device)
    k = 4 if args.k is None else args.k
    at_least("-k", k, 1)
    torch.set_num_threads(args.threads)
    target = _target(args).to(device)
    if args.tree is not None:
        _check_trees("--tree", target)
        out = _tree_generate(args, target)
    elif args.draft is None:
        out = generate(target, args.prompt, args.chars, args.seed, args.temperature)
    else:
        draft = _make_draft(args, args.draft, target)
        out = speculative_generate(target, draft, args.prompt, args.chars, k, args.seed, args.temperature,
                                   adaptive=args.adaptive)
    if args.json:
        print(json.dumps({"prompt": args.prompt, "text": out.text, "draft": args.draft, **out.stats.to_dict()}))
        return 0
    print(args.prompt + out.text)  # the text alone on stdout: `specdec generate > out.txt` keeps just that
    _log(_generation_line(args, out.stats, "chars" if _units(target)[0] == "characters" else "tokens"))
    return 0


def _generation_line(args, st, unit: str = "chars") -> str:
    """One line of a generation's statistics (what --json gives as fields), counted in the target's `unit`."""
    line = f"{unit} {st.chars}  target passes {st.target_passes}  {unit} per pass {st.chars_per_pass:.2f}"
    if st.tree:
        line += (f"  draft {args.draft} tree {st.tree} ({st.drafted // max(st.draft_calls, 1)} nodes)"
                 f"  accepted {st.accepted}  acceptance per depth "
                 f"{[round(a, 3) for a in st.depth_acceptance]}")
    elif args.draft:
        line += (f"  draft {args.draft} k {st.k}" + (f" adaptive (mean {st.mean_k:.2f})" if st.adaptive else "")
                 + f"  acceptance {st.acceptance:.3f}  drafted {st.drafted}"
                 f"  accepted {st.accepted}  draft calls {st.draft_calls}"
                 f"  accepted per round (0..k) {st.accepted_per_position}")
    return line


def _cmd_verify(args) -> int:
    import json

    from specdec.measure import exactness
    from specdec.decoding.generate import check_request

    _check_tree_args(args)
    at_least("-k", args.k, 1)
    samples = args.samples if args.samples is not None else (exactness.JOINT_SAMPLES if args.joint and
                                                             args.tree is None else 20_000)
    at_least("--samples", samples, 100)
    at_least("--seed", args.seed, 0)
    temperature_arg(args.temperature)
    if args.adaptive and not args.joint:
        raise UsageError("--adaptive needs --joint (the first-character check runs one round, where k cannot adapt)")
    device = device_arg(args.device)
    _check_draft_names(args.draft or [], device)
    target = _target(args).to(device)
    if args.tree is not None:
        _check_trees("--tree", target)
        return _tree_verify(args, target, samples)
    prompt = exactness.JOINT_PROMPT if args.joint else exactness.VERIFY_PROMPT
    # one round of k drafts (the joint check: its whole runs) must fit in the context
    check_request(target, prompt, exactness.joint_run(args.k) if args.joint else 1, args.k, args.temperature)
    drafts = _drafts(args, target, args.draft)
    if args.joint:
        rows = exactness.verify_joint(target, drafts, k=args.k, samples=samples, seed=args.seed,
                                      temperature=args.temperature, adaptive=args.adaptive)
    else:
        rows = exactness.verify(target, drafts, k=args.k, samples=samples, seed=args.seed,
                                temperature=args.temperature)
    if args.json:
        print(json.dumps(rows))
        return 0
    plural, singular = _units(target)
    what = (f"the first {exactness.JOINT_CHARS} {plural} of whole generations against target-only "
            f"generation{', adaptive k' if args.adaptive else ''}" if args.joint else f"the first {singular}")
    print(f"exactness of {what}, temperature {args.temperature}; verdict CHECK when p <= {rows[0]['p_threshold']:.2g}")
    # joint rows: TV between the two samples and the distinct outcomes; first-character rows: TV against p and
    # the TV sampling error alone gives at that count
    key, label, fmt = ("outcomes", "outcomes", "d") if args.joint else ("baseline_tv", "baseline TV", ".4f")
    w = max([14] + [len(r["draft"]) for r in rows])  # an hf:PATH draft is as wide as its path
    print(f"{'draft':{w}} {'k':>2} {'samples':>8} {'TV':>8} {label:>12} {'p-value':>8} {'verdict':>8}")
    for r in rows:
        print(f"{r['draft']:{w}} {r['k']:>2} {r['samples']:>8} {r['tv']:>8.4f} {r[key]:>12{fmt}} "
              f"{r['p_value']:>8.3g} {r['verdict']:>8}")
    return 0


# --- trees (issue 13): --tree for generate and verify ---------------------------------------------------

TREE_DRAFTS = ("bigram", "ngram")


def _check_tree_args(args) -> None:
    """Every --tree mistake is reported before the target and the drafts are loaded."""
    if args.tree is None:
        return
    _tree_spec(args.tree, None, None, 0, check_only=True)
    names = [args.draft] if isinstance(args.draft, str) else (args.draft or [])
    for name in names:
        if name not in TREE_DRAFTS:
            raise UsageError(f"--tree needs a table draft ({', '.join(TREE_DRAFTS)}), got {name!r}")
    if args.command == "generate" and (args.draft is None or args.k is not None or args.adaptive):
        raise UsageError("--tree needs --draft (bigram or ngram) and takes no -k or --adaptive")


def _tree_spec(text: str, target, draft, seed: int, check_only: bool = False):
    """`trees.parse_tree`'s configuration as a TreeSpec: a node budget is shaped by Sequoia's dynamic program
    from this draft's child acceptance, measured on 200 target-generated characters after 'ROMEO:'."""
    from specdec.decoding import trees
    from specdec.measure.acceptance import measure_child_acceptance

    try:
        spec = trees.parse_tree(text)
    except ValueError as exc:
        raise UsageError(f"--tree: {exc}") from None
    if check_only or not isinstance(spec, int):
        return spec
    return trees.optimal_tree(measure_child_acceptance(target, draft, seed=seed), spec)[0]


def _tree_generate(args, target):
    from specdec.decoding.generate import speculative_generate

    draft = _make_draft(args, args.draft, target)
    spec = _tree_spec(args.tree, target, draft, args.seed)
    return speculative_generate(target, draft, args.prompt, args.chars, 1, args.seed, args.temperature, tree=spec)


def _tree_verify(args, target, samples: int) -> int:
    import json

    from specdec.measure import exactness

    rows = []
    for name in args.draft or TREE_DRAFTS:
        draft = _make_draft(args, name, target)
        spec = _tree_spec(args.tree, target, draft, args.seed)
        rows += exactness.verify_tree(target, {name: draft}, spec, samples, args.seed,
                                      joint_samples=exactness.JOINT_SAMPLES if args.joint else 0)
    if args.json:
        print(json.dumps(rows))
        return 0
    print(f"{'draft':8} {'tree':>12} {'samples':>8} {'TV':>8} {'baseline TV':>12} {'p-value':>8} {'joint p':>8}")
    for r in rows:
        joint = "" if r["joint_p_value"] is None else f"{r['joint_p_value']:.3f}"
        print(f"{r['draft']:8} {r['tree']:>12} {r['samples']:>8} {r['tv']:>8.4f} {r['baseline_tv']:>12.4f} "
              f"{r['p_value']:>8.3f} {joint:>8}")
    return 0


def _cmd_report(args) -> int:
    import math
    from pathlib import Path

    from specdec.measure import hygiene, machine_record
    from specdec.decoding.trees import parse_tree
    from specdec.report import render, build as report

    if args.threads < 1:
        raise UsageError(f"--threads must be at least 1, got {args.threads}")
    if args.pairs is not None and args.pairs < 1:
        raise UsageError(f"--pairs must be at least 1, got {args.pairs}")
    for text in args.trees or []:  # a bad tree configuration is found before anything is loaded
        try:
            parse_tree(text)
        except ValueError as exc:
            raise UsageError(f"--trees: {exc}") from None
    if args.budget is not None and not (math.isfinite(args.budget) and args.budget > 0):
        raise UsageError(f"--budget must be a positive number of seconds, got {args.budget}")
    if args.repeat < 1:
        raise UsageError(f"--repeat must be at least 1, got {args.repeat}")
    if args.seed is not None:
        at_least("--seed", args.seed, 0)
    device_arg(args.device)
    if args.prompt is not None and args.workload is not None:
        raise UsageError("give --prompt (one configuration) or --workload, not both")
    cpus = hygiene.parse_cpus(args.cpu) if args.cpu is not None else None
    _check_draft_names(args.drafts or [], args.device)
    ks = _ks_arg(args.ks, report.DEFAULT_KS)
    try:  # a corrupt record is found now, not after the first report
        machine_record.load({})
    except machine_record.RecordError as exc:
        raise UsageError(str(exc)) from None
    if args.backend == "all":
        if args.repeat > 1:
            raise UsageError("--backend all measures one report per backend; give --repeat with one backend")
        return _report_all(args, ks, cpus)
    # every place a result goes is checked before anything is measured: a report is minutes of work
    outs = [Path(args.out)] + [Path(args.out) / f"repeat-{i}" for i in range(2, args.repeat + 1)]
    for out in outs:
        writable_dir("--out", str(out))
    target = _target(args)
    drafts = _check_report_inputs(args, target, ks)
    docs = []
    for i, out in enumerate(outs, start=1):
        if args.repeat > 1:
            _log(f"== report {i} of {args.repeat} ==")
        doc = _measure_report(args, target, drafts, ks, cpus, after_own_run=i > 1)
        text = render.tables(doc)
        print(text)
        for path in report.write(doc, out, text):
            _log(f"wrote {path}")
        docs.append(doc)
    if len(docs) > 1:
        return _calibration(docs, outs[0], record=True)
    return 0


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
    beside an hf: target, and hf: drafts, are built here once (Draft objects, an hf: one in --dtype), so that
    one the target cannot have (another vocabulary, a quantized copy of a model that is not the shipped GPT)
    fails now, not minutes into the report. None for an hf: target's default set (the report's own choice)."""
    hf_target = _is_hf(_target_spec(args))
    if not args.drafts:
        return None if hf_target else _drafts_arg(None, args.device)
    if not hf_target and not any(_is_hf(n) for n in args.drafts):
        return args.drafts
    return list(_drafts(args, target, args.drafts).values())


def _measure_report(args, target, drafts: list | None, ks: list[int], cpus, after_own_run: bool) -> dict:
    """`report.measure` with the command's settings. The first report's budget counts from the package's
    import, so that `--budget` bounds the command's wall time (start-up included), not only its sections'."""
    from specdec import _IMPORTED
    from specdec.report import build as report

    return report.measure(target, drafts, ks, quick=args.quick, pairs=args.pairs, threads=args.threads,
                          device=args.device, chars=args.chars, seed=args.seed, budget=args.budget, cpus=cpus,
                          workload=args.workload, prompt=args.prompt, trees=args.trees, after_own_run=after_own_run,
                          between_run=args.between_run, started=None if after_own_run else _IMPORTED, log=_log)


def _report_all(args, ks: list[int], cpus) -> int:
    """One full report per backend (each `--budget`, in OUT/<backend>/), then every backend's speedup table and
    what moved (`backend_report`) in OUT/backends.md and OUT/backends.json."""
    import json
    from pathlib import Path

    from specdec.report import backend_report, figures as overhead_plot, render, build as report
    from specdec.model.backends import BACKENDS

    out = Path(args.out)
    for name in ("",) + BACKENDS:
        writable_dir("--out", str(out / name))
    drafts = _check_report_inputs(args, _target(args, "eager"), ks)
    docs = {}
    for i, name in enumerate(BACKENDS, start=1):
        _log(f"== backend {name} ({i} of {len(BACKENDS)}) ==")
        doc = _measure_report(args, _target(args, name), drafts, ks, cpus, after_own_run=i > 1)
        for path in report.write(doc, out / name, render.tables(doc)):
            _log(f"wrote {path}")
        docs[name] = doc
    found = backend_report.finding(docs)
    text = backend_report.render(docs, found)
    print(text)
    write_atomic(out / "backends.md", text)
    write_atomic(out / "backends.json", json.dumps(found, indent=2) + "\n")
    _log(f"wrote {out / 'backends.md'} and {out / 'backends.json'}")
    attribution = {b: a for doc in docs.values() for b, a in (doc.get("attribution") or {}).items()}
    if overhead_plot.write_attribution(attribution, out / "attribution.png", "where the time goes, by backend"):
        _log(f"wrote {out / 'attribution.png'}")
    return 0


def _calibration(docs: list[dict], out, record: bool) -> int:
    """Coverage of each consecutive pair of reports, written beside the first; each pair's needs appended to
    this machine's between-run record (after the reports: none of them used what their own pair says)."""
    import json

    from specdec.report import calibrate, build as report
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
        _log(f"wrote {out / name}")
    if record:
        machine = docs[0]["machine"]
        for (a, _), cov in zip(zip(docs, docs[1:]), covs):
            path = machine_record.append(machine, {
                "date": a["machine"].get("date"), "commit": a["machine"].get("commit"),
                "quick": a["settings"].get("quick"), **cov["between_run"]})
        entries = machine_record.load(machine)
        tau = machine_record.quantile(entries)
        _log(f"recorded {len(covs)} calibration(s) in {path}: this machine now has {len(entries)}; later reports "
             f"add {'nothing yet (too few)' if tau is None else f'τ = {tau:.1%}'} between runs")
    return 0 if all(c["passed"] for c in covs) else 1


def _cmd_calibrate(args) -> int:
    import json
    from pathlib import Path

    from specdec.measure import machine_record

    folder = Path(args.folder)
    paths = [folder / "report.json"] + sorted(folder.glob("repeat-*/report.json"),
                                              key=lambda p: int(p.parent.name.split("-")[1]))
    missing = [str(p) for p in paths if not p.is_file()]
    if missing or len(paths) < 2:
        raise UsageError(f"{folder}: needs report.json and repeat-2/report.json (from `specdec report --repeat 2 "
                         f"--out {folder}`); missing: {', '.join(missing) or 'repeat-2/report.json'}")
    try:
        docs = [json.loads(p.read_text()) for p in paths]
        keys = {machine_record.key(d["machine"]) for d in docs}
        if len(keys) > 1:
            raise UsageError(f"{folder}: the reports come from different machines or settings: {sorted(keys)}")
        return _calibration(docs, folder, record=not args.no_record)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        if isinstance(exc, UsageError):
            raise
        raise UsageError(f"{folder}: not reports this version reads ({type(exc).__name__}: {exc})") from None


def _cmd_compare(args) -> int:
    from specdec.report import compare

    fraction_arg("--min-effect", args.min_effect)
    try:
        a, b = compare.load(args.a), compare.load(args.b)
        text, worse = compare.compare(a, b, min_effect=args.min_effect)
    except (OSError, ValueError) as exc:
        raise UsageError(str(exc).splitlines()[0]) from None
    except (KeyError, TypeError, AttributeError) as exc:  # a hand-edited report.json, or one from another tool
        raise UsageError(f"{args.a} or {args.b}: not a report this version reads ({type(exc).__name__}: {exc})") from None
    print(text)
    return 1 if worse else 0


def _cmd_overhead(args) -> int:
    import json
    import math
    from pathlib import Path

    from specdec.measure import hygiene, overhead
    from specdec.report import figures as overhead_plot, build as report
    from specdec.report.overhead_section import DRAFT as OVERHEAD_DRAFT
    from specdec.report.overhead_section import K as OVERHEAD_K

    at_least("--threads", args.threads, 1)
    if not (math.isfinite(args.seconds) and 0 < args.seconds <= 600):
        raise UsageError(f"--seconds must be a number of seconds in (0, 600], got {args.seconds}")
    if args.out is not None:
        writable_dir("--out", args.out)  # before measuring: nothing measured is lost to a bad folder
    threads = hygiene.set_threads(args.threads)
    names = BACKENDS if args.backend == "all" else (_backend(args),)
    targets = {name: _target(args, name) for name in names}  # a bad checkpoint fails before anything is timed
    machine = overhead.measure_machine(args.seconds, args.threads)
    rows, attr = [], {}
    for name, target in targets.items():
        rows_b = overhead.overhead_table(target, machine, seconds=args.seconds)
        attr[name] = overhead.attribution(target, _make_draft(args, OVERHEAD_DRAFT, target), OVERHEAD_K)
        print(overhead.render(machine, rows_b, attr[name]) + "\n")
        rows += rows_b
    if args.out is not None:
        doc = {"machine": machine.to_dict(), "threads": threads, "draft": OVERHEAD_DRAFT, "k": OVERHEAD_K,
               "seconds": args.seconds, "floor": rows, "attribution": attr}
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "overhead.json", json.dumps(doc, indent=2) + "\n")
        _log(f"wrote {out / 'overhead.json'}")
        cats = {b: {scope: a[scope]["categories"] for scope in ("step", "round")} for b, a in attr.items()}
        if overhead_plot.write_attribution(cats, out / "attribution.png"):
            _log(f"wrote {out / 'attribution.png'}")
    return 0


def _cmd_export_hf(args) -> int:
    """The shipped target and small draft as transformers folders OUT/target and OUT/small; their paths on
    stdout, one a line (`--target hf:OUT/target --draft hf:OUT/small` runs the pair through the adapter)."""
    from pathlib import Path

    from specdec.model.export_hf import EXPORTED, export_hf

    hf_extra("export-hf")
    out = Path(args.out)
    for path in [out] + [out / name for name in EXPORTED]:
        if path.exists() and not path.is_dir():
            raise UsageError(f"export-hf {args.out}: {path} is a file, not a folder (export-hf writes "
                             f"{', '.join(str(out / n) for n in EXPORTED)})")
    writable_dir("export-hf OUT", args.out)
    for path in export_hf(out).values():
        print(path)
    return 0


COMMANDS = {"train": _cmd_train, "info": _cmd_info, "generate": _cmd_generate, "verify": _cmd_verify,
            "report": _cmd_report, "calibrate": _cmd_calibrate, "compare": _cmd_compare, "overhead": _cmd_overhead,
            "export-hf": _cmd_export_hf}


def quiet_runtime_logs() -> None:
    """Keep the runtimes' own log lines off the terminal, unless the user set their own level.

    torch.profiler's kineto logs `USDT: ... profiler_start` and `profiler_stop` at its highest severity each
    time a profile starts and stops (the overhead attribution starts dozens): only a level above every
    severity (6) silences them. It reads KINETO_LOG_LEVEL when the first profile starts, so this must run
    before anything is measured. ONNX Runtime's sessions log at `backend_onnx`'s options (errors only)."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    quiet_runtime_logs()
    try:
        if hasattr(args, "target"):  # the commands that load a target: its options agree before anything runs
            _check_model_args(args)
        return COMMANDS[args.command](args)
    except (UsageError, ValueError, _train.CheckpointError) as exc:
        parser.exit(2, f"specdec {args.command}: error: {exc}\n")
    except KeyboardInterrupt:
        parser.exit(130, "specdec: interrupted; results already written are intact\n")


if __name__ == "__main__":
    sys.exit(main())
