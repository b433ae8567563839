"""Run the test suite as if this machine were N times slower or faster, and say which outcomes moved.

Every budget, deadline and warm-up in specdec reads one clock (`specdec.measure.clock.now`); the environment
variable SPECDEC_TIME_SCALE=N multiplies every duration it returns by N, in pytest and in every process the tests
start. A test whose outcome changes between scales depended on the machine's speed, not on the code.

Usage: python tools/time_scale.py [--scales 1 3 0.33] [-- PYTEST ARGS...]
  (default scales 1, 3, 0.33; default pytest arguments: README's `--benchmark-disable -n 2 --dist loadfile`, the whole suite)
Prints per scale the counts and wall time, then every test whose outcome differs from the first scale's.
Exits 1 when any test failed at any scale or any outcome differs, 2 on a bad scale.
"""

from __future__ import annotations

import argparse
import math
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ENV = "SPECDEC_TIME_SCALE"


def outcomes(junit: Path) -> dict[str, str]:
    """test id -> passed / failed / error / skipped, from pytest's junit XML."""
    out = {}
    for case in ET.parse(junit).iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        kinds = [child.tag for child in case if child.tag in ("failure", "error", "skipped")]
        out[name] = {"failure": "failed", "error": "error", "skipped": "skipped"}.get(kinds[0] if kinds else "",
                                                                                     "passed")
    return out


def run(scale: float, pytest_args: list[str], folder: Path) -> tuple[dict[str, str], float]:
    """The suite at one scale: (outcomes, wall seconds)."""
    junit = folder / f"scale-{scale:g}.xml"
    env = dict(os.environ, **{ENV: repr(scale)})
    t0 = time.monotonic()  # this tool's own wall clock, for its summary (not a decision of specdec's)
    subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", f"--junitxml={junit}",
                    *pytest_args], cwd=ROOT, env=env)
    return (outcomes(junit) if junit.exists() else {}), time.monotonic() - t0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--scales", type=float, nargs="+", default=[1.0, 3.0, 1 / 3])
    p.add_argument("pytest_args", nargs="*", default=["--benchmark-disable", "-n", "2", "--dist", "loadfile"])
    args = p.parse_args(argv)
    bad = [s for s in args.scales if not (s > 0 and math.isfinite(s))]
    if bad:
        p.exit(2, f"time_scale.py: error: --scales must be positive numbers (3: 3x slower, 0.33: 3x faster), "
                  f"got {bad[0]}\n")
    results = {}
    with tempfile.TemporaryDirectory(prefix="specdec-time-scale-") as tmp:
        for scale in args.scales:
            results[scale] = run(scale, args.pytest_args, Path(tmp))
    first = args.scales[0]
    status = 0
    for scale, (got, wall) in results.items():
        counts = {k: sum(v == k for v in got.values()) for k in ("passed", "failed", "error", "skipped")}
        print(f"{ENV}={scale:g}: " + ", ".join(f"{n} {k}" for k, n in counts.items()) + f" in {wall:.0f} s")
        status |= bool(counts["failed"] or counts["error"] or not got)
        moved = sorted(t for t in set(got) | set(results[first][0]) if got.get(t) != results[first][0].get(t))
        for t in moved:
            print(f"    {t}: {results[first][0].get(t, 'absent')} at {first:g}, {got.get(t, 'absent')} at {scale:g}")
        status |= bool(moved)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
