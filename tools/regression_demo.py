"""Show that `asv continuous` catches a regression of each kind, each by the benchmarks meant to, and a no-op by none.

    python tools/regression_demo.py [--cases abcd] [--rounds 3] [--scale 2] [--size F] [--factor X] [--keep]

In a scratch clone of this repository it commits four changes, each on top of HEAD (--size F makes every
slowdown F, e.g. 0.05, and --factor X sets asv's threshold, which must then lie below 1 + F):
  (a) the bigram draft's proposal 20 % slower per character (it busy-waits a fifth of its own measured time);
  (b) speculative generation 15 % slower with no draft touched: every round of `speculative_generate`'s loop
      busy-waits 15 % of that round's measured time (extra work in the loop, the rule's side of a round);
  (c) the target's forward 20 % slower (a busy-wait of a fifth of each forward's own time; the model drafts
      run the same forward, so they slow down too);
  (d) a no-op: a comment.
Each slowdown is a share of the time it extends, measured as it runs (the thread's CPU time, as the suite
measures with one torch thread; on an idle machine the same as wall time), so it is the stated size on any
machine and under any load. Then `asv continuous HEAD <commit>` runs with per-commit virtualenvs, its rounds
interleaved between the two commits (A B B A A B: load lands on both sides; every timed figure carries its
samples, which asv pools over the rounds and tests for significance), and the verdicts are:
  (a) the bigram's draft-cost rows flagged (DraftCost, DraftCharacter), no other draft's;
  (b) at least half of the speedup-family rows (Speedup.track_time_ratio) flagged, target-only generation not;
  (c) target-pass time (TargetPass.track_relative_time) flagged, the verify ratio T(k+1)/T(1) not;
  (d) nothing in the WHOLE suite flagged -- no `+`, no `-`, no new failure.
(a)-(c) run only the benchmarks that should move plus their controls; (d) runs every benchmark, because a
no-op that moves any figure is a false alarm wherever it lands. In every case any other flag -- a `+`, or a
`-` (an improvement nobody made) -- fails the verdict. It prints the four outputs and exits 0 only
when all four verdicts hold. About 40 minutes on this machine; run nothing else meanwhile.

The tracked ratios come from the suite's harness (alternated pairs, round-robin samples, per-sample medians);
--scale multiplies its sample and pair counts (SPECDEC_BENCH_SCALE) so that each commit's figure is steadier.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parent.parent
FACTOR = "1.1"  # asv continuous flags a change beyond 10 % (timings: also a significant Mann-Whitney test)
SIZES = {"a": 0.20, "b": 0.15, "c": 0.20}  # each slowdown's share of the time it extends (--size overrides)
SPIN = '''
def _demo_spin(share: float, since: float) -> float:  # regression demo: spin `share` of the CPU time since `since`
    import time

    now = time.thread_time()
    stop = now + share * (now - since)
    while time.thread_time() < stop:
        pass
    return time.thread_time()
'''


@dataclass
class Case:
    label: str
    path: str  # the file the commit edits
    # (scope, anchor, replacement): the anchor must occur exactly once in the scope -- the function whose
    # definition starts with `scope` (up to the next top-level definition), or the whole file when None
    edits: list[tuple[str | None, str, str]]
    bench: str | None  # asv -b regex; None: the whole suite
    expected: Callable[[str], bool]  # a flagged row that should be flagged
    enough: Callable[[list[str]], bool]  # given the expected rows flagged, does the verdict hold?


_LOOP = "def chain_rows("  # speculative_generate's loop (one sequence or a batch)


def cases(sizes: dict[str, float]) -> dict[str, Case]:
    """The four cases, each slowdown the share `sizes[key]` of the time it extends."""
    a, b, c = (sizes[k] for k in "abc")
    return {
        "a": Case(
            f"+{a:.0%} bigram cost per character", "specdec/decoding/drafts.py",
            [(None, "    def _row(self, key):\n        return self.table[key]\n",
              "    def _row(self, key):\n        return self.table[key]\n\n"
              "    def propose(self, tokens, k, rng, temperature):\n"
              "        import time\n\n"
              "        t0 = time.thread_time()\n"
              "        out = super().propose(tokens, k, rng, temperature)\n"
              f"        _demo_spin({a}, t0)  # regression demo: +{a:.0%} per drafted character\n"
              "        return out\n"),
             (None, "\n\n@functools.lru_cache(maxsize=1)\ndef _bigram_table",
              SPIN + "\n\n@functools.lru_cache(maxsize=1)\ndef _bigram_table")],
            r"DraftCharacter|DraftCost",
            lambda row: "'bigram'" in row,
            lambda rows: bool(rows)),
        "b": Case(
            f"speculative generation {b:.0%} slower (the loop; no draft touched)", "specdec/decoding/generate.py",
            [(_LOOP, "    while active:\n",
              "    demo_since = time.thread_time()\n"
              "    while active:\n"
              f"        demo_since = _demo_spin({b}, demo_since)  # regression demo: the previous round +{b:.0%}\n"),
             (_LOOP, "        active = bt.leave(target, draft, active)\n    return passes",  # the loop's last line
              "        active = bt.leave(target, draft, active)\n"
              f"    _demo_spin({b}, demo_since)  # regression demo: the last round +{b:.0%}\n    return passes"),
             (None, "import numpy as np\n", "import time\n\nimport numpy as np\n"),
             (None, "from specdec.model.protocol import Target, feature_request, feature_support, tree_support\n",
              "from specdec.model.protocol import Target, feature_request, feature_support, tree_support\n" + SPIN)],
            r"Speedup|TargetOnlyGeneration",
            lambda row: "Speedup.track_time_ratio" in row,
            # half of the 18 eager draft x k rows (every backend's rows slow down alike; eager is the one every commit has)
            lambda rows: sum("track_time_ratio" in r and "'eager'" in r for r in rows) >= 9),
        "c": Case(
            f"the target's forward {c:.0%} slower", "specdec/model/gpt.py",
            [(None, "    def forward(self, idx",  # the GPT's (its blocks' forwards take x)
              "    def forward(self, *args, **kwargs):\n"
              "        import time\n\n"
              "        t0 = time.thread_time()\n"
              "        out = self._demo_forward(*args, **kwargs)\n"
              f"        _demo_spin({c}, t0)  # regression demo: every forward +{c:.0%}\n"
              "        return out\n\n"
              "    def _demo_forward(self, idx"),
             (None, "\n\nclass Attention(nn.Module):", SPIN + "\n\nclass Attention(nn.Module):")],
            r"TargetPass|VerifyGrowth|TargetOnlyGeneration",
            lambda row: "TargetPass.track_relative_time" in row or "TargetOnlyGeneration.track_relative_time" in row,
            lambda rows: any("TargetPass.track_relative_time(1, 'eager', 1)" in r for r in rows)),
        "d": Case(
            "a no-op (a comment)", "specdec/decoding/drafts.py",
            [(None, '"""The `Draft` interface', '"""(no-op edit) The `Draft` interface')],
            None,
            lambda row: False,
            lambda rows: True),
    }


CASES = cases(SIZES)


def sh(cmd: list[str], cwd: Path, check: bool = True, env: dict | None = None) -> subprocess.CompletedProcess:
    print("$", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, cwd=cwd, text=True, capture_output=True, env=env)
    if check and proc.returncode != 0:
        sys.exit(f"command failed ({proc.returncode}): {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    return proc


def _apply(src: str, edits: list[tuple[str | None, str, str]]) -> str:
    for scope, anchor, new in edits:
        start, end = 0, len(src)
        if scope is not None:
            assert src.count(scope) == 1, f"{scope!r} moved, update the demo"
            start = src.index(scope)
            nxt = re.search(r"\n\n\n(?=\S)", src[start:])  # the next top-level definition
            end = start + nxt.start() if nxt else len(src)
        part = src[start:end]
        assert part.count(anchor) == 1, f"anchor moved, update the demo: {anchor[:60]!r}"
        src = src[:start] + part.replace(anchor, new) + src[end:]
    return src


def commit(repo: Path, base: str, case: Case) -> str:
    sh(["git", "checkout", "-q", base], repo)
    path = repo / case.path
    path.write_text(_apply(path.read_text(), case.edits))
    sh(["git", "-c", "user.name=demo", "-c", "user.email=demo@example.invalid", "commit", "-qam",
        f"regression demo: {case.label}"], repo)
    sha = sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()
    sh(["git", "checkout", "-q", base], repo)  # the suite asv runs is the working tree's: HEAD's, unchanged
    return sha


def continuous(repo: Path, base: str, head: str, bench: str | None, rounds: int, env: dict, factor: str = FACTOR):
    # Rounds alternate between the two commits (A B B A ...), each in fresh processes, so load that comes and
    # goes lands on both sides -- the principle of the harness's alternated pairs, one level up.
    cmd = [sys.executable, "-m", "asv", "continuous", "--machine", "regression-demo", "--factor", factor, "--interleave-rounds",
           "-a", f"rounds={rounds}", "--show-stderr"]
    return sh(cmd + (["-b", bench] if bench else []) + [base, head], repo, check=False, env=env)


def flagged(output: str, marks: str = "+!") -> list[str]:
    """asv's table rows marked `+` (worse beyond the factor and, for timings, significant) or `!` (failed)."""
    return [line for line in output.splitlines() if re.match(rf"\|\s*[{re.escape(marks)}]\s*\|", line)]


def verdict(key: str, case: Case, output: str) -> tuple[bool, str]:
    # Every case counts every flag: a `-` (a significant improvement nobody made) on any row is a false alarm
    # as much as a `+` where nothing slowed down; only `+` on the rows meant to move is a hit.
    hit = [r for r in flagged(output, "+!") if case.expected(r)]
    other = [r for r in flagged(output, "+-!") if r not in hit]
    ok = case.enough(hit) and (bool(hit) or key == "d") and not other
    return ok, f"expected rows flagged: {len(hit)}; other rows flagged: {len(other)}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="abcd", help="which of a b c d to run (default: all four)")
    ap.add_argument("--rounds", type=int, default=3, help="asv rounds, interleaved between the commits")
    ap.add_argument("--scale", type=float, default=2.0, help="SPECDEC_BENCH_SCALE: the harness's samples x this")
    ap.add_argument("--size", type=float, help="every slowdown this share (default: a 0.20, b 0.15, c 0.20)")
    ap.add_argument("--factor", default=FACTOR, help=f"asv continuous --factor (default {FACTOR})")
    ap.add_argument("--keep", action="store_true", help="keep the scratch clone")
    args = ap.parse_args()
    chosen = cases({k: args.size for k in SIZES} if args.size is not None else SIZES)
    if not set(args.cases) <= set(chosen) or args.rounds < 2 or args.scale <= 0:
        ap.error("--cases takes letters from abcd; --rounds must be at least 2; --scale above 0")
    if args.size is not None and not (0 < args.size and 1 < float(args.factor) < 1 + args.size):
        ap.error(f"--size must be above 0 and --factor between 1 and 1 + size; got {args.size}, {args.factor}")
    env = dict(os.environ, SPECDEC_BENCH_SCALE=str(args.scale))
    scratch = Path(tempfile.mkdtemp(prefix="specdec-regression-"))
    repo = scratch / "repo"
    results = {}
    try:
        sh(["git", "clone", "-q", str(ROOT), str(repo)], scratch)
        sh([sys.executable, "-m", "asv", "machine", "--yes", "--machine", "regression-demo"], repo)
        base = sh(["git", "rev-parse", "HEAD"], repo).stdout.strip()
        shas = {key: commit(repo, base, chosen[key]) for key in args.cases}
        for key in args.cases:
            case = chosen[key]
            proc = continuous(repo, base, shas[key], case.bench, args.rounds, env, args.factor)
            ok, why = verdict(key, case, proc.stdout)
            results[key] = (ok, why)
            print(f"\n===== ({key}) {case.label}: asv continuous {base[:8]} {shas[key][:8]} "
                  f"{'-b ' + repr(case.bench) if case.bench else '(whole suite)'} (exit {proc.returncode}) =====")
            print("\n".join(line for line in proc.stdout.splitlines() if line.startswith("|") or "CHANGED" in line
                            or "PERFORMANCE" in line))
            print(f"----- ({key}) {'holds' if ok else 'DOES NOT HOLD'}: {why}", flush=True)
    finally:
        if args.keep:
            print(f"scratch clone kept at {repo}")
        else:
            shutil.rmtree(scratch, ignore_errors=True)
    print()
    for key, (ok, why) in results.items():
        print(f"({key}) {chosen[key].label}: {'holds' if ok else 'DOES NOT HOLD'} ({why})")
    held = all(ok for ok, _ in results.values())
    print("all verdicts hold" if held else "SOME VERDICTS DO NOT HOLD")
    return 0 if held else 1


if __name__ == "__main__":
    sys.exit(main())
