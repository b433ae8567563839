"""Is every asv benchmark callable at every commit? ok / skipped / failed per commit, without timing anything.

    python tools/check_history.py [--since 7118b1c] [--until HEAD] [--verbose]

asv runs this checkout's suite (benchmarks/) against each commit's package. For each commit from --since (the
first trained target) to --until, this exports that commit's `specdec/` into a temporary folder, and in a fresh
interpreter with it first on the path and SPECDEC_BENCH_SMOKE=1 (every sample count one, generations 20
characters) runs the suite the way `asv run --quick` does -- asv_runner's own discovery, setup_cache once per
cache, then per parameter set `setup` and one call -- and counts each parameter set as ok, skipped
(NotImplementedError: the commit lacks what it measures) or failed (any other error, or parameter lists that
differ from those discovered with the working tree's package: asv discovers once and indexes every commit's
runs into those lists). Exit 1 if anything
failed. No figure is meaningful here; the timed history run is `asv run --quick 7118b1c^..main` (README).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIRST_TRAINED_TARGET = "7118b1c"
QUICK = {"number": 1, "repeat": 1, "warmup_time": 0, "rounds": 1}  # what `asv run --quick` passes


def _git(*args: str) -> str:
    return subprocess.run(["git", *args], cwd=ROOT, text=True, capture_output=True, check=True).stdout


def _export(sha: str, dest: Path, paths: tuple[str, ...] = ("specdec",)) -> None:
    """The commit's `paths` (default its `specdec/` package, with its shipped data) under dest."""
    archive = dest / "src.tar"
    dest.mkdir(parents=True, exist_ok=True)
    with archive.open("wb") as out:
        subprocess.run(["git", "archive", sha, *paths], cwd=ROOT, stdout=out, check=True)
    with tarfile.open(archive) as tar:
        tar.extractall(dest, filter="data")
    archive.unlink()


SKIPPED = object()  # what `run_one` returns where the benchmark's `setup` skipped it (asv's NotImplementedError)


def run_one(bench, caches: dict) -> object:
    """One benchmark as asv runs it: its setup_cache once per key (kept in `caches`; a failed one fails every
    benchmark that shares it), then `setup`, one call and `teardown`. Its result, or SKIPPED."""
    key = bench.setup_cache_key
    if key is not None and key not in caches:
        try:
            caches[key] = bench.do_setup_cache()
        except Exception as exc:
            caches[key] = exc
    cache = caches.get(key) if key is not None else None
    if isinstance(cache, Exception):
        raise cache
    bench.set_cache(cache)
    if bench.do_setup():
        return SKIPPED
    try:
        return bench.do_run()
    finally:
        bench.do_teardown()


def _valid_track(result) -> bool:
    """A finite number, or asv's sampled form (harness.sampled): {"samples": finite numbers, "number": 1}."""
    import math

    if isinstance(result, dict) and set(result) == {"samples", "number"}:
        values = result["samples"]
        return bool(values) and all(isinstance(v, (int, float)) and math.isfinite(v) for v in values)
    return isinstance(result, (int, float)) and math.isfinite(result)


def _param_lists(bench) -> list[list[str]]:
    """A discovered benchmark's parameter lists (asv_runner keeps the values as reprs)."""
    return [list(values) for values in bench.params]


def _discovered(root: str) -> dict:
    """Each benchmark's parameter lists as asv_runner discovers them in this interpreter."""
    from asv_runner.discovery import disc_benchmarks

    return {b.name: _param_lists(b) for b in disc_benchmarks(root)}


def _run_suite(checkout: str, expected: dict | None = None) -> dict:
    """In this interpreter: the suite against the package in `checkout` (already first on sys.path).

    expected: the parameter lists discovered with the newest package (asv discovers once and indexes every
    commit's runs into those lists): a benchmark whose lists differ here fails, as it would under asv."""
    import specdec  # before the suite's discovery puts this checkout's root (and its specdec) on sys.path

    if not Path(specdec.__file__).resolve().is_relative_to(Path(checkout).resolve()):
        raise SystemExit(f"specdec imported from {specdec.__file__}, not from {checkout}")
    from asv_runner.discovery import disc_benchmarks, get_benchmark_from_name

    sys.path.append(str(ROOT))  # the suite's package, after the checkout's specdec

    root = str(ROOT / "benchmarks")
    caches: dict[str, object] = {}
    counts = {"ok": 0, "skipped": 0, "failed": 0}
    failures = []
    for found in sorted(disc_benchmarks(root), key=lambda b: b.name):
        n_params = max(1, len(list(_combinations(found))))
        here = _param_lists(found)
        if expected is not None and expected.get(found.name, here) != here:
            counts["failed"] += n_params
            failures.append(f"{found.name}: parameters {here} at this commit, {expected[found.name]} as discovered "
                            "at the newest commit (asv would index past them)")
            continue
        for idx in range(n_params):
            bench = get_benchmark_from_name(root, f"{found.name}-{idx}" if found.params else found.name, QUICK)
            label = f"{found.name}{_label(bench)}"
            try:
                result = run_one(bench, caches)
                if result is SKIPPED:
                    counts["skipped"] += 1
                    continue
                if bench.type == "track" and not _valid_track(result):
                    raise ValueError(f"tracked {result!r}: neither a finite number nor finite samples")
                counts["ok"] += 1
            except Exception as exc:  # NotImplementedError too: asv skips only when `setup` raises it
                counts["failed"] += 1
                failures.append(f"{label}: {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}")
    return {"counts": counts, "failures": failures}


def _combinations(bench):
    import itertools

    return itertools.product(*bench.params) if bench.params else [()]


def _label(bench) -> str:
    params = getattr(bench, "_current_params", ())
    return f"({', '.join(map(repr, params))})" if params else ""


def _newest_params() -> str:
    """The parameter lists discovered with the working tree's package (what asv's discovery sees), as JSON."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), SPECDEC_BENCH_SMOKE="1")
    proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--discover"], cwd=ROOT, env=env,
                          text=True, capture_output=True, check=True)
    return proc.stdout.strip().splitlines()[-1]


def _check(sha: str, expected: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="specdec-history-") as tmp:
        _export(sha, Path(tmp))
        (Path(tmp) / "expected-params.json").write_text(expected)
        env = dict(os.environ, PYTHONPATH=tmp, SPECDEC_BENCH_SMOKE="1")
        proc = subprocess.run([sys.executable, str(Path(__file__).resolve()), "--child", tmp], cwd=tmp, env=env, text=True,
                              capture_output=True)
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"counts": {"ok": 0, "skipped": 0, "failed": 1}, "failures": [f"the suite did not run: {tail}"]}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--since", default=FIRST_TRAINED_TARGET, help="first commit checked (default: %(default)s)")
    ap.add_argument("--until", default="HEAD", help="last commit checked (default: %(default)s)")
    ap.add_argument("--verbose", action="store_true", help="name every failure")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    ap.add_argument("--discover", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.discover:
        sys.path.append(str(ROOT))
        with contextlib.redirect_stdout(sys.stderr):
            found = _discovered(str(ROOT / "benchmarks"))
        print(json.dumps(found))
        return 0
    if args.child:
        expected = json.loads((Path(args.child) / "expected-params.json").read_text())
        with contextlib.redirect_stdout(sys.stderr):  # asv_runner prints its skips; stdout carries the JSON
            res = _run_suite(args.child, expected)
        print(json.dumps(res))
        return 0
    try:
        shas = _git("rev-list", "--reverse", "--first-parent", f"{args.since}^..{args.until}").split()
    except subprocess.CalledProcessError as exc:
        sys.exit(f"check_history: error: {exc.stderr.strip().splitlines()[-1]}")
    total = {"ok": 0, "skipped": 0, "failed": 0}
    expected = _newest_params()
    for sha in shas:
        res = _check(sha, expected)
        c = res["counts"]
        for key in total:
            total[key] += c[key]
        subject = _git("log", "-1", "--format=%s", sha).strip()[:60]
        print(f"{sha[:7]}  ok {c['ok']:3}  skipped {c['skipped']:3}  failed {c['failed']:3}  {subject}", flush=True)
        for line in res["failures"] if args.verbose or c["failed"] else []:
            print(f"         {line}")
    print(f"{len(shas)} commits: ok {total['ok']}, skipped {total['skipped']}, failed {total['failed']}")
    return 1 if total["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
