"""Show that the asv workflow flags a draft that got ~20 % more expensive, and not a change that did nothing.

    python tools/regression_demo.py [--keep]

In a scratch clone of this repository it makes two commits on top of HEAD:
  1. "no-op": a comment added to specdec/drafts.py (the code path is unchanged);
  2. "slower bigram": a busy-wait in the bigram draft's lookup worth 20 % of its measured per-character cost.
Then it runs `asv continuous` (per-commit virtualenvs, torch pinned as in asv.conf.json) on the draft-cost
benchmarks for HEAD -> no-op and for no-op -> slower, prints both outputs, and exits 0 only when the slower
commit is flagged and the no-op one is not. Timing needs a quiet machine: run nothing else meanwhile.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The benchmarks of the draft the commit touches (asv matches `-b` against "name(param, ...)"): the bigram's
# character time and its c. Targeting them is how a draft's cost change is checked; the transformer drafts'
# per-character times wander by 10-25 % between runs on this shared machine and would only add noise.
BENCH = r"(DraftCharacter\.time_draft_character|DraftCost\.track_c)\(\d+, 'bigram'\)"
ROOT = Path(__file__).resolve().parent.parent


def sh(cmd: list[str], cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True)
    if check and proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    return proc


def bigram_char_us() -> float:
    """The bigram's per-character cost here, measured the way the loop pays it."""
    import specdec
    from specdec import timing

    target = specdec.load_target()
    with timing.threads(1):
        costs = timing.measure_costs(target, {"bigram": specdec.make_draft("bigram", target)}, [1], samples=9)
    return costs.draft_char_us["bigram"]


def commit(repo: Path, message: str) -> str:
    sh(["git", "-c", "user.name=demo", "-c", "user.email=demo@example.invalid", "commit", "-qam", message], repo)
    return sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()


def continuous(repo: Path, base: str, head: str) -> subprocess.CompletedProcess:
    # Rounds alternate between the two commits (A B A B A B), each in fresh processes, so that load on a
    # shared machine lands on both sides alike -- the same principle as the report's alternated pairs.
    return sh(["asv", "continuous", "--factor", "1.1", "--split", "--interleave-rounds", "-a", "rounds=3",
               "-a", "repeat=(5, 30, 20.0)", "-b", BENCH, base, head], repo, check=False)


def worse(output: str, needle: str) -> list[str]:
    """asv continuous's rows marked '+' (got worse beyond the factor and, for timings, significantly)."""
    return [line for line in output.splitlines() if line.startswith("| +") and needle in line]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--keep", action="store_true", help="keep the scratch clone")
    args = ap.parse_args()
    us = bigram_char_us()
    spin = 0.2 * us * 1e-6
    print(f"bigram character: {us:.2f} us here; the slower commit adds a {spin * 1e6:.2f} us busy-wait (20 %)")
    scratch = Path(tempfile.mkdtemp(prefix="specdec-regression-"))
    repo = scratch / "repo"
    try:
        sh(["git", "clone", "-q", str(ROOT), str(repo)], scratch)
        sh(["asv", "machine", "--yes", "--machine", "regression-demo"], repo)
        base = sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()
        drafts = repo / "specdec" / "drafts.py"
        src = drafts.read_text()
        drafts.write_text(src.replace('"""The `Draft` interface', '"""(no-op edit) The `Draft` interface', 1))
        noop = commit(repo, "no-op: comment only")
        lookup = "        return self.table[tokens[-1]]\n"
        assert lookup in src, "bigram lookup line moved; update the demo"
        slower = src.replace(lookup, (
            "        import time\n\n"
            f"        end = time.perf_counter() + {spin!r}  # regression demo: +20 % per character\n"
            "        while time.perf_counter() < end:\n"
            "            pass\n" + lookup))
        drafts.write_text(slower)
        slow = commit(repo, "slower bigram draft (+20 % per character)")
        results = {}
        for label, (a, b) in {"no-op change": (base, noop), "20 % slower bigram": (noop, slow)}.items():
            proc = continuous(repo, a, b)
            print(f"\n===== {label}: asv continuous {a[:8]} {b[:8]} (exit {proc.returncode}) =====")
            print(proc.stdout[-6000:])
            results[label] = proc
        flagged_slow = worse(results["20 % slower bigram"].stdout, "'bigram'")
        flagged_noop = worse(results["no-op change"].stdout, "")
        print(f"\nslower commit flagged: {bool(flagged_slow)}; no-op commit flagged: {bool(flagged_noop)}")
        for line in flagged_slow + flagged_noop:
            print(line)
        return 0 if flagged_slow and not flagged_noop else 1
    finally:
        if args.keep:
            print(f"scratch clone kept at {repo}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
