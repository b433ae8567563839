"""Does a change to the asv suite move what it tracks? The same commits measured by two versions of the suite.

    python tools/suite_figures.py --suite REV --commits A B C [--bench REGEX] --out FILE.jsonl
    python tools/suite_figures.py --diff OLD.jsonl NEW.jsonl

The first form runs the suite of REV (its `benchmarks/` and the method files its harness loads from its own
checkout; "." for the working tree) against each commit's package, as `asv run` does -- every selected benchmark
at its full sample counts, each setup_cache once per commit -- and appends one JSON line per figure to FILE (a
commit already in FILE is skipped: an interrupted run resumes). The commit's `specdec/` is exported into a scratch
folder and put first on the path of a fresh interpreter (as tools/check_history.py does, whose runner this uses).

The second form sets the two files' figures side by side, per commit and benchmark: a sampled figure by its
median, as asv tracks it; the change against the threshold of the figure's family in asv.conf.json's
`regressions_thresholds` (exact figures 0, work 0.25 %, time 10 %). Exit 1 where any figure moves beyond it.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import check_history

ROOT = check_history.ROOT


def _suite(rev: str, dest: Path) -> Path:
    """The suite of `rev` (its benchmarks/ and specdec/, whose method files its harness loads) under dest."""
    if rev == ".":
        return ROOT
    check_history._export(rev, dest / "suite", ("benchmarks", "specdec"))
    return dest / "suite"


def _child(package: str, suite: str, pattern: str) -> list[dict]:
    """In this interpreter (the commit's package first on the path): each selected benchmark's result."""
    import specdec  # before the suite's root (and its own specdec) joins the path

    if not Path(specdec.__file__).resolve().is_relative_to(Path(package).resolve()):
        raise SystemExit(f"specdec imported from {specdec.__file__}, not from {package}")
    from asv_runner.discovery import disc_benchmarks, get_benchmark_from_name

    sys.path.append(suite)
    root = str(Path(suite) / "benchmarks")
    caches: dict[str, object] = {}
    out = []
    for found in sorted(disc_benchmarks(root), key=lambda b: b.name):
        if found.type != "track" or not re.search(pattern, found.name):
            continue
        print(f"  {found.name}", file=sys.stderr, flush=True)
        for idx in range(max(1, len(list(check_history._combinations(found))))):
            bench = get_benchmark_from_name(root, f"{found.name}-{idx}" if found.params else found.name, {})
            result = check_history.run_one(bench, caches)
            if result is check_history.SKIPPED:
                continue  # asv's skip: this commit lacks what the benchmark measures
            out.append({"benchmark": f"{found.name}{check_history._label(bench)}", "result": result})
    return out


def _measure(args) -> int:
    done = set()
    if Path(args.out).exists():
        done = {json.loads(line)["commit"] for line in Path(args.out).read_text().splitlines() if line.strip()}
    with tempfile.TemporaryDirectory(prefix="specdec-suite-") as tmp:
        suite = _suite(args.suite, Path(tmp))
        for rev in args.commits:
            sha = check_history._git("rev-parse", rev).strip()
            if sha in done:
                print(f"{sha[:7]}: in {args.out} already", file=sys.stderr)
                continue
            package = Path(tmp) / f"pkg-{sha[:7]}"
            check_history._export(sha, package)
            env = dict(os.environ, PYTHONPATH=str(package))
            print(f"{sha[:7]}: the suite of {args.suite} ...", file=sys.stderr, flush=True)
            proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", str(package), str(suite),
                                   args.bench], cwd=package, env=env, text=True, stdout=subprocess.PIPE)
            if proc.returncode != 0:
                sys.exit(f"suite_figures: the suite failed at {sha[:7]} (exit {proc.returncode})")
            rows = json.loads(proc.stdout.strip().splitlines()[-1])
            with open(args.out, "a") as f:  # one line per figure, the commit's lines together
                f.writelines(json.dumps({"suite": args.suite, "commit": sha, **row}) + "\n" for row in rows)
            print(f"{sha[:7]}: {len(rows)} figures", file=sys.stderr, flush=True)
    return 0


def figure(result) -> float:
    """A tracked result as asv tracks it: a sampled one by its samples' median, else its value."""
    if isinstance(result, dict):
        return float(statistics.median(result["samples"]))
    return float(result)


def threshold(name: str, families: dict[str, float]) -> float:
    """The threshold `asv publish` applies to the benchmark's graph: asv's own choice (the largest of the
    asv.conf.json families whose pattern matches the name from its start), asked of asv itself."""
    from types import SimpleNamespace

    from asv.plugins.regressions import _GraphDataFilter

    me = SimpleNamespace(conf=SimpleNamespace(regressions_thresholds=families))
    return _GraphDataFilter._get_threshold(me, SimpleNamespace(params={}), None, name.split("(", 1)[0])


def _diff(old_path: str, new_path: str) -> int:
    from asv import util

    families = util.load_json(str(ROOT / "asv.conf.json"), js_comments=True)["regressions_thresholds"]
    read = lambda p: {(r["commit"], r["benchmark"]): r["result"] for r in map(json.loads, Path(p).read_text().splitlines())}
    old, new = read(old_path), read(new_path)
    beyond = 0
    print(f"{'benchmark':72} {'commit':7} {'old':>12} {'new':>12} {'change':>8} {'threshold':>9}")
    for key in sorted(old.keys() & new.keys(), key=lambda k: (k[1], k[0])):
        a, b = figure(old[key]), figure(new[key])
        change = (b - a) / abs(a) if a else (0.0 if b == a else float("inf"))
        limit = threshold(key[1], families)
        flag = "" if abs(change) <= limit else "  BEYOND"
        beyond += bool(flag)
        print(f"{key[1]:72} {key[0][:7]} {a:12.6g} {b:12.6g} {change:+8.2%} {limit:9.2%}{flag}")
    only = (old.keys() ^ new.keys())
    print(f"{len(old.keys() & new.keys())} figures in both, {beyond} beyond their threshold; {len(only)} in one file only")
    return 1 if beyond else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default=".", help="the suite's revision (default: the working tree)")
    ap.add_argument("--commits", nargs="+", help="the commits measured")
    ap.add_argument("--bench", default=".", help="a regex over benchmark names (default: every track_ benchmark)")
    ap.add_argument("--out", help="the JSON-lines file appended to")
    ap.add_argument("--diff", nargs=2, metavar=("OLD", "NEW"), help="compare two files' figures")
    ap.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        with contextlib.redirect_stdout(sys.stderr):  # asv_runner prints; stdout carries the JSON
            rows = _child(*args.child)
        print(json.dumps(rows))
        return 0
    if args.diff:
        return _diff(*args.diff)
    if not args.commits or not args.out:
        ap.error("--commits and --out are needed to measure (or --diff OLD NEW)")
    return _measure(args)


if __name__ == "__main__":
    sys.exit(main())
