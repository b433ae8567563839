"""The work counter's determinism study: what moves an instruction count of the same code, and by how much.

Each variant starts one counting worker (specdec/measure/ab_worker.py under the counter, as `specdec ab`'s work
rows do) on a source tree, counts the given rows, and prints per row the settled count, the per-call counts
and the difference from the first variant. Variants change one source of variation at a time from `work.popen`'s
settings:

    base          the settings specdec ab uses (layout fixed, hash seed 0, fixed environment, link path)
    again         the same, a fresh process (process-to-process repeatability)
    longpath      the same code through a path 40 characters longer (no fixed-length link)
    aslr          address-space randomisation left on
    hashseed      PYTHONHASHSEED=1 instead of 0
    env           4 KiB more environment
    malloc        PYTHONMALLOC=malloc (glibc's allocator for every object)
    nowarmup      no uncounted warm-up calls

    python tools/work_study.py --rows "pass 1" "draft bigram" "spec bigram k=4" --variants base again longpath
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec.measure import work  # noqa: E402
from specdec.measure.ab import WORKER  # noqa: E402

VARIANTS = ("base", "again", "longpath", "aslr", "hashseed", "env", "malloc", "nowarmup")


def _ask(proc, req: dict) -> dict:
    proc.stdin.write(json.dumps(req) + "\n")
    proc.stdin.flush()
    answer = json.loads(proc.stdout.readline())
    if "error" in answer:
        raise RuntimeError(answer["error"])
    return answer


def run_variant(variant: str, source: str, rows: list[str], config: dict, kind: str) -> dict:
    with tempfile.TemporaryDirectory(prefix="specdec-work-") as tmp:
        link = Path(tmp) / "A"
        if variant == "longpath":
            link = Path(tmp) / ("x" * 40) / "A"
            link.parent.mkdir()
        link.symlink_to(source, target_is_directory=True)
        out = str(Path(tmp) / "callgrind-A.%p")
        env = work.counted_env(kind, out, {"PYTHONPATH": str(link)})
        if variant == "hashseed":
            env["PYTHONHASHSEED"] = "1"
        if variant == "env":
            env["SPECDEC_STUDY_PADDING"] = "p" * 4096
        if variant == "malloc":
            env["PYTHONMALLOC"] = "malloc"
        if variant == "nowarmup":
            env["SPECDEC_WORK_WARMUP"] = "0"
        proc = subprocess.Popen(work.command([sys.executable, str(WORKER)], kind, out), env=env, cwd=tmp,
                                preexec_fn=None if variant == "aslr" else work.no_aslr, stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        try:
            t0 = time.monotonic()
            _ask(proc, {"op": "setup", "config": {**config, "source": str(link)}})
            print(f"[{variant}] setup {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
            out = {}
            for r in rows:
                t0 = time.monotonic()
                out[r] = _ask(proc, {"op": "count", "row": r})["count"]
                print(f"[{variant}] {r}: {time.monotonic() - t0:.0f} s", file=sys.stderr, flush=True)
            return out
        finally:
            proc.stdin.close()
            proc.wait(timeout=60)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=str(ROOT), help="the source tree counted (default: this checkout)")
    ap.add_argument("--rows", nargs="+", default=["pass 1", "draft bigram", "spec bigram k=4", "target-only"])
    ap.add_argument("--variants", nargs="+", choices=VARIANTS, default=list(VARIANTS))
    ap.add_argument("--chars", type=int, default=200)
    ap.add_argument("--backend", default="onnx")
    ap.add_argument("--json", help="write every count here too")
    args = ap.parse_args()
    avail = work.probe()
    if avail.kind is None:
        print(f"work_study: no counter: {avail.reason}", file=sys.stderr)
        return 2
    if shutil.which("valgrind") is None and avail.kind == "callgrind":
        return 2
    drafts = sorted({r.split()[1] for r in args.rows if r.split()[0] in ("draft", "spec", "round")})
    ks = sorted({int(r.split("k=")[1]) for r in args.rows if "k=" in r}) or [4]
    kinds = {r.split()[0] for r in args.rows}
    only = sorted({"pass" if k == "pass" else k for k in kinds} | ({"spec", "round"} & kinds))
    config = {"target": None, "backend": args.backend, "dtype": None, "drafts": drafts, "ks": ks,
              "chars": args.chars, "prompt": "ROMEO:", "seed": 0, "temperature": 1.0, "threads": 1, "only": only}
    results, base = {}, None
    print(f"counter: {avail.name}")
    for v in args.variants:
        results[v] = run_variant(v, os.path.abspath(args.source), args.rows, config, avail.kind)
        base = base or results[v]
        for r in args.rows:
            c = results[v][r]
            diff = c["per_call"] / base[r]["per_call"] - 1
            print(f"{v:9} {r:18} {c['per_call']:>14,} {diff:+.5%}  settled={c['settled']} calls={c['counts']}",
                  flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
