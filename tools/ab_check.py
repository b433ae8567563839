"""Check `specdec ab` on this machine: its A/A runs, and what it finds on commits made slower by a known amount.

    python tools/ab_check.py --aa 10                       # ten runs of HEAD against HEAD
    python tools/ab_check.py --aa 0 --inject draft round pass --size 0.03

Each run is `specdec ab ... --json` with the options after `--` (default: --drafts bigram ngram --ks 2 4), one
at a time and nothing else: run it on a quiet machine. An injected case first makes its scratch commit with
`tools/ab_inject.py` (which measures the injected size per row in one process), then runs `specdec ab HEAD
BRANCH`. Prints, per A/A run, the rows flagged and the widest 95 % interval; over the A/A runs each row's
largest `detects`; per injected case each row's estimate, interval, verdict and the separately measured size,
and whether the interval covers it. --out keeps every JSON document.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT = ["--drafts", "bigram", "ngram", "--ks", "2", "4"]


def ab(a: str, b: str, extra: list[str]) -> tuple[dict, float]:
    t0 = time.monotonic()
    out = subprocess.run([sys.executable, "-m", "specdec.cli", "ab", a, b, "--json", *extra], capture_output=True,
                         text=True)
    if out.returncode not in (0, 1):
        sys.exit(f"specdec ab {a} {b} failed ({out.returncode}):\n{out.stderr[-3000:]}")
    return json.loads(out.stdout), time.monotonic() - t0


def aa_lines(docs: list[dict]) -> list[str]:
    lines = []
    for i, doc in enumerate(docs, 1):
        flagged = [n for n, r in doc["rows"].items() if r["verdict"] != "same"]
        widest = max(doc["rows"].items(), key=lambda kv: kv[1]["ci95"][1] - kv[1]["ci95"][0])
        lines.append(f"A/A {i}: flagged {flagged or 'none'}; widest 95% interval {widest[0]} "
                     f"{widest[1]['ci95'][0]:+.2%}..{widest[1]['ci95'][1]:+.2%}; {doc['seconds']:.0f} s")
    if docs:
        lines.append("detects per row (median and largest over the A/A runs); within- and between-pair sd:")
        for name in docs[0]["rows"]:
            det = sorted(d["rows"][name]["detectable"] for d in docs)
            w = [d["rows"][name]["within_sd"] or 0 for d in docs]
            bt = [d["rows"][name]["between_sd"] or 0 for d in docs]
            lines.append(f"  {name:20} {det[len(det) // 2]:.2%} {det[-1]:.2%}   within {sorted(w)[len(w) // 2]:.2%}"
                         f"  between {sorted(bt)[len(bt) // 2]:.2%}")
    return lines


def inject_lines(case: str, made: dict, doc: dict) -> list[str]:
    lines = [f"injected {case} (+{made['size']:.0%} of its own time, busy wait {made['busy_us']:.3f} us): "
             f"flagged {doc['worse'] or 'none'}; {doc['seconds']:.0f} s"]
    for name, r in doc["rows"].items():
        size = made["measured"].get(name)
        lo, hi = r["ci95"]
        cover = "" if size is None else ("covers" if lo <= size <= hi else "MISSES") + f" the measured {size:+.2%}"
        lines.append(f"  {name:20} {r['change']:+.2%} ({lo:+.2%}..{hi:+.2%}) {r['verdict']:6} {cover}")
    return lines


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--aa", type=int, default=10, help="A/A runs (HEAD against HEAD)")
    p.add_argument("--inject", nargs="*", default=[], choices=["draft", "round", "pass"])
    p.add_argument("--size", type=float, default=0.03)
    p.add_argument("--out", default=None, help="folder to keep each run's JSON in")
    p.add_argument("extra", nargs="*", help="options for specdec ab (after --)")
    args = p.parse_args()
    extra = args.extra or DEFAULT
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    docs = []
    for i in range(args.aa):
        doc, _ = ab("HEAD", "HEAD", extra)
        docs.append(doc)
        if out:
            (out / f"aa-{i + 1}.json").write_text(json.dumps(doc, indent=1))
        print(aa_lines([doc])[0].replace("A/A 1", f"A/A {i + 1}"), flush=True)
    print("\n".join(aa_lines(docs)[len(docs):]), flush=True)
    for case in args.inject:
        made = json.loads(subprocess.run([sys.executable, str(HERE / "ab_inject.py"), case, "--size", str(args.size)],
                                         capture_output=True, text=True, check=True).stdout)
        doc, _ = ab("HEAD", made["branch"], extra)
        if out:
            (out / f"inject-{case}.json").write_text(json.dumps({"made": made, "ab": doc}, indent=1))
        print("\n".join(inject_lines(case, made, doc)), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
