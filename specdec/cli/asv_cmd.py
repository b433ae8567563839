"""`specdec asv-init`: an asv suite for a user's own repository, its draft or target by entry point, with the
installed specdec as the fixed harness (`measure.user_bench`, run by `measure.asv_env`). Every input is checked
before anything is written (one line, exit 2): the repository, the entry points (at HEAD, as `ab` checks them),
the k values, and files already there (kept unless --force)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from specdec.cli import models
from specdec.cli.checks import UsageError, at_least
from specdec.measure import entry
from specdec.measure.ab.ab_sources import repo_root, resolve
from specdec.util.files import write_atomic

MODULE = "bench_specdec.py"  # the benchmarks module written into benchmarks/
DEFAULT_KS = (4,)
WORK_THRESHOLD = 0.002  # asv publish's regressions threshold of the counted rows (docs/asv.md: twice ab's floor)

SHIM = '''"""asv benchmarks of this repository's pair, written by `specdec asv-init` (edit the constants, or run it again
with --force). A thin shim: the harness is the installed specdec (specdec.measure.yours.user_bench), fixed while asv
checks out each commit of this repository; the entry points are imported from that commit's tree."""

from specdec.measure.yours.user_bench import asv_classes

TARGET = {target!r}  # MODULE:CALLABLE returning a specdec Target; None: specdec's shipped target
DRAFTS = {drafts!r}  # MODULE:CALLABLE taking the target, returning a Draft (or a shipped draft's name)
KS = {ks!r}
CHARS = {chars!r}  # characters (tokens) per generation of the speedup rows

globals().update(asv_classes(TARGET, DRAFTS, KS, CHARS, here=__file__))
'''


def _branch(root: Path) -> str:
    got = subprocess.run(["git", "symbolic-ref", "--short", "-q", "HEAD"], cwd=root, capture_output=True, text=True)
    return got.stdout.strip() or "HEAD"


def conf(root: Path) -> dict:
    """asv.conf.json: this repository's history, benchmarked in asv's own interpreter (`asv_env`)."""
    return {
        "version": 1,
        "project": root.name,
        "repo": ".",
        "branches": [_branch(root)],
        "dvcs": "git",
        "environment_type": "specdec",
        "plugins": [".specdec.measure.yours.asv_env"],
        "pythons": [f"{sys.version_info[0]}.{sys.version_info[1]}"],
        "benchmark_dir": "benchmarks",
        "env_dir": ".asv/env",
        "results_dir": ".asv/results",
        "html_dir": ".asv/html",
        "launch_method": "forkserver",
        "regressions_thresholds": {r"bench_specdec\.Work": WORK_THRESHOLD, r"(?!bench_specdec\.Work)": 0.1},
    }


def _check_specs(args) -> tuple[str | None, list[str]]:
    target = args.entry_target
    if target is not None and not entry.is_entry(target):
        raise UsageError(f"--target {target!r}: not MODULE:CALLABLE (a callable of no arguments returning a Target; "
                         "leave it out for specdec's shipped target)")
    drafts = list(args.drafts)
    models.check_draft_names([d for d in drafts if not entry.is_entry(d) and ":" not in d])
    for d in drafts:
        if ":" in d and not entry.is_entry(d):
            raise UsageError(f"--drafts {d!r}: not MODULE:CALLABLE (or a shipped draft's name)")
    return target, drafts


def cmd_asv_init(args) -> int:
    target, drafts = _check_specs(args)
    ks = models.ks_arg(args.ks, DEFAULT_KS)
    at_least("--chars", args.chars, 2)
    root = repo_root(args.repo, "asv-init")
    head = resolve(root, "HEAD")
    out = {root / "asv.conf.json": json.dumps(conf(root), indent=4) + "\n",
           root / "benchmarks" / MODULE: SHIM.format(target=target, drafts=drafts, ks=ks, chars=args.chars)}
    if not (root / "benchmarks" / "__init__.py").exists():
        out[root / "benchmarks" / "__init__.py"] = ""
    there = [str(p.relative_to(root)) for p in out if p.exists()]
    if there and not args.force:
        raise UsageError(f"{', '.join(there)} already in {root}: --force to overwrite")
    if (root / "benchmarks").exists() and not (root / "benchmarks").is_dir():
        raise UsageError(f"{root / 'benchmarks'} is a file: asv-init writes a benchmarks/ folder there")
    own = [s for s in [target, *drafts] if entry.is_entry(s)]
    for spec in own:
        entry.check_static(spec, f"HEAD ({head[:10]})", root, head)
    entry.probe_commit(root, head, f"HEAD ({head[:10]})", target, drafts)
    (root / "benchmarks").mkdir(exist_ok=True)
    for path, text in out.items():
        write_atomic(path, text)
        print(path)
    models.log(f"specdec asv-init: next, in {root}: asv machine --yes; asv run HEAD~3..HEAD (or NEW, ALL); "
               "asv continuous --factor 1.002 -b Work main HEAD (docs/your-own-code.md)")
    return 0
