"""The `specdec` command (`parser.SUBCOMMANDS` lists every subcommand): generate, verify,
compare, overhead here; train, train-draft, info, export-hf and export-gguf in `model_cmd`; report and calibrate
in `report_cmd`, ab in `ab_cmd`, batch in `batch_cmd`, build-server and load in `server_cmd`.

Every bad argument ends in one line on stderr and exit code 2 (argparse's convention), never a traceback,
and is found before any training or measuring starts: output locations are checked to be writable first, so
no result is lost to a bad `--out`. A step that fails on good input (a compile, a server's start: a
`util.errors.Failure`) is not bad input: its summary, its log's last lines and the log's path, and exit code 1.

The target is the shipped checkpoint, another checkpoint (--checkpoint, or --target PATH), or a Hugging Face
causal LM (--target hf:PATH); drafts are names, prompt-lookup or hf:PATH. A model that cannot load, or a draft
that does not fit the target (another vocabulary, a quantized copy of a model that is not the shipped GPT), is
one line and exit 2 before anything is measured or written.
"""

from __future__ import annotations

import contextlib
import signal
import sys
import threading

from specdec.cli.checks import (UsageError, at_least, device_arg, fraction_arg, temperature_arg,
                                writable_dir)
from specdec.cli import ab_cmd, asv_cmd, batch_cmd, bisect_cmd, model_cmd, models, report_cmd, server_cmd
from specdec.cli.parser import GENERATE_K, VERIFY_SAMPLES, build_parser
from specdec.util.errors import Failure, InputError
from specdec.util.files import write_atomic


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
        models.check_draft_names([args.draft], device)
    k = GENERATE_K if args.k is None else args.k
    at_least("-k", k, 1)
    torch.set_num_threads(args.threads)
    target = models.load_target(args).to(device)
    if args.tree is not None:
        models.check_trees("--tree", target)
        out = _tree_generate(args, target)
    elif args.draft is None:
        out = generate(target, args.prompt, args.chars, args.seed, args.temperature)
    else:
        draft = models.draft_for(args, args.draft, target)
        out = speculative_generate(target, draft, args.prompt, args.chars, k, args.seed, args.temperature,
                                   adaptive=args.adaptive)
    if args.json:
        print(json.dumps({"prompt": args.prompt, "text": out.text, "draft": args.draft, **out.stats.to_dict()}))
        return 0
    print(args.prompt + out.text)  # the text alone on stdout: `specdec generate > out.txt` keeps just that
    models.log(_generation_line(args, out.stats, "chars" if models.unit_words(target)[0] == "characters" else "tokens"))
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
                                                             args.tree is None else VERIFY_SAMPLES)
    at_least("--samples", samples, 100)
    at_least("--seed", args.seed, 0)
    temperature_arg(args.temperature)
    if args.adaptive and not args.joint:
        raise UsageError("--adaptive needs --joint (the first-character check runs one round, where k cannot adapt)")
    device = device_arg(args.device)
    models.check_draft_names(args.draft or [], device)
    target = models.load_target(args).to(device)
    if args.tree is not None:
        models.check_trees("--tree", target)
        return _tree_verify(args, target, samples)
    prompt = exactness.JOINT_PROMPT if args.joint else exactness.VERIFY_PROMPT
    # one round of k drafts (the joint check: its whole runs) must fit in the context
    check_request(target, prompt, exactness.joint_run(args.k) if args.joint else 1, args.k, args.temperature)
    drafts = models.build_drafts(args, target, args.draft)
    if args.joint:
        rows = exactness.verify_joint(target, drafts, k=args.k, samples=samples, seed=args.seed,
                                      temperature=args.temperature, adaptive=args.adaptive)
    else:
        rows = exactness.verify(target, drafts, k=args.k, samples=samples, seed=args.seed,
                                temperature=args.temperature)
    if args.json:
        print(json.dumps(rows))
        return 0
    plural, singular = models.unit_words(target)
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


# --- trees: --tree for generate and verify ---------------------------------------------------



def _check_tree_args(args) -> None:
    """Every --tree mistake is reported before the target and the drafts are loaded."""
    if args.tree is None:
        return
    from specdec.decoding.registry import TREE_DRAFTS
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
    from specdec.decoding import sequoia
    from specdec.measure.acceptance import measure_child_acceptance

    try:
        spec = trees.parse_tree(text)
    except ValueError as exc:
        raise UsageError(f"--tree: {exc}") from None
    if check_only or not isinstance(spec, int):
        return spec
    return sequoia.optimal_tree(measure_child_acceptance(target, draft, seed=seed), spec)[0]


def _tree_generate(args, target):
    from specdec.decoding.generate import speculative_generate

    draft = models.draft_for(args, args.draft, target)
    spec = _tree_spec(args.tree, target, draft, args.seed)
    return speculative_generate(target, draft, args.prompt, args.chars, 1, args.seed, args.temperature, tree=spec)


def _tree_verify(args, target, samples: int) -> int:
    import json

    from specdec.decoding.registry import TREE_DRAFTS
    from specdec.measure import exactness, tree_exactness

    rows = []
    for name in args.draft or TREE_DRAFTS:
        draft = models.draft_for(args, name, target)
        spec = _tree_spec(args.tree, target, draft, args.seed)
        rows += tree_exactness.verify_tree(target, {name: draft}, spec, samples, args.seed,
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


def _cmd_compare(args) -> int:
    if args.min_effect is not None:  # checked before scipy loads with compare
        fraction_arg("--min-effect", args.min_effect)
    from specdec.report.compare import compare

    min_effect = compare.MIN_EFFECT if args.min_effect is None else args.min_effect
    try:  # a file that cannot be read is bad input; what compare raises beyond InputError is a bug
        a, b = compare.load(args.a), compare.load(args.b)
    except OSError as exc:
        raise UsageError(f"{exc.filename}: {exc.strerror}") from None
    text, worse = compare.compare(a, b, min_effect=min_effect)
    print(text)
    return 1 if worse else 0


def _cmd_overhead(args) -> int:
    import json
    import math
    from pathlib import Path

    from specdec.measure.anatomy import attribution as attribution_mod
    from specdec.measure import hygiene
    from specdec.measure.anatomy import roofline
    from specdec.model.backends import BACKENDS
    from specdec.report.anatomy import overhead_text
    from specdec.report import figures as overhead_plot
    from specdec.report.anatomy.overhead_section import DRAFT as OVERHEAD_DRAFT
    from specdec.report.anatomy.overhead_section import K as OVERHEAD_K

    at_least("--threads", args.threads, 1)
    if not (math.isfinite(args.seconds) and 0 < args.seconds <= 600):
        raise UsageError(f"--seconds must be a number of seconds in (0, 600], got {args.seconds}")
    if args.out is not None:
        writable_dir("--out", args.out)  # before measuring: nothing measured is lost to a bad folder
    threads = hygiene.set_threads(args.threads)
    names = BACKENDS if args.backend == "all" else (models.backend_name(args),)
    targets = {name: models.load_target(args, name) for name in names}  # a bad checkpoint fails before anything is timed
    machine = roofline.measure_machine(args.seconds, args.threads)
    rows, attr = [], {}
    for name, target in targets.items():
        rows_b = roofline.overhead_table(target, machine, seconds=args.seconds)
        attr[name] = attribution_mod.attribution(target, models.draft_for(args, OVERHEAD_DRAFT, target), OVERHEAD_K)
        print(overhead_text.render(machine, rows_b, attr[name]) + "\n")
        rows += rows_b
    if args.out is not None:
        doc = {"machine": machine.to_dict(), "threads": threads, "draft": OVERHEAD_DRAFT, "k": OVERHEAD_K,
               "seconds": args.seconds, "floor": rows, "attribution": attr}
        out = Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        write_atomic(out / "overhead.json", json.dumps(doc, indent=2) + "\n")
        models.log(f"wrote {out / 'overhead.json'}")
        cats = {b: {scope: a[scope]["categories"] for scope in a} for b, a in attr.items()}
        if overhead_plot.write_attribution(cats, out / "attribution.png"):
            models.log(f"wrote {out / 'attribution.png'}")
    return 0


COMMANDS = {"train": model_cmd.cmd_train, "info": model_cmd.cmd_info, "generate": _cmd_generate, "verify": _cmd_verify,
            "report": report_cmd.cmd_report, "calibrate": report_cmd.cmd_calibrate, "compare": _cmd_compare,
            "ab": ab_cmd.cmd_ab, "bisect": bisect_cmd.cmd_bisect, "asv-init": asv_cmd.cmd_asv_init, "batch": batch_cmd.cmd_batch,
            "overhead": _cmd_overhead, "export-hf": model_cmd.cmd_export_hf, "export-gguf": model_cmd.cmd_export_gguf,
            "build-server": server_cmd.cmd_build_server, "calibrate-work": ab_cmd.cmd_calibrate_work, "load": server_cmd.cmd_load}
COMMANDS["train-draft"] = model_cmd.cmd_train_draft


def main(argv: list[str] | None = None) -> int:
    """The `specdec` command. argv None: the process's own arguments, and a budget counts from the package's
    import (start-up inside `--budget`); argv given (a caller in a running process, a test): from this call,
    so that no budget depends on how long the process ran before."""
    from specdec import _IMPORTED
    from specdec.measure import clock

    parser = build_parser()
    try:  # the guard's factor is read at import, where an error would be a traceback: checked here instead
        clock.check_scale()
    except InputError as exc:
        parser.exit(2, f"specdec: error: {exc}\n")
    started = _IMPORTED if argv is None else clock.now()
    args = parser.parse_args(argv)
    args.started = started
    with _terminate_as_interrupt():
        return _run(parser, args)


@contextlib.contextmanager
def _terminate_as_interrupt():
    """SIGTERM raised as KeyboardInterrupt for the block (the main thread only: signals are delivered there), so
    that a terminated command cleans up as an interrupted one does: its workers, servers and worktrees ended, what
    it measured kept."""
    def raise_interrupt(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = signal.signal(signal.SIGTERM, raise_interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, old)


def _run(parser, args) -> int:
    try:
        if hasattr(args, "target"):  # the commands that load a target: its options agree before anything runs
            models.check_model_args(args)
        return COMMANDS[args.command](args)
    except InputError as exc:  # bad input only (UsageError among them): a bug is a traceback and exit 1
        parser.exit(2, f"specdec {args.command}: error: {exc}\n")
    except Failure as exc:  # good input, a step that failed: what failed, what its log last said, where it is
        said = "".join(f"  | {line}\n" for line in exc.tail)
        where = f"  full log: {exc.log}\n" if exc.log else ""
        parser.exit(1, f"specdec {args.command}: failed: {exc}\n{said}{where}")
    except KeyboardInterrupt:
        parser.exit(130, "specdec: interrupted; results already written are intact\n")


if __name__ == "__main__":
    sys.exit(main())
