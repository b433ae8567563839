"""The pytest-benchmark suite with every benchmark's work counted: instructions per call in its extra_info.

    python tools/count_benchmarks.py [-k onnx] [pytest options ...]      # e.g. -k "onnx and bigram"

Runs `pytest tests/benchmarks --benchmark-autosave --benchmark-storage .benchmarks/work` as a counted process
(`specdec.measure.work`: under callgrind where the machine has no hardware counter), so that
tests/benchmarks/conftest.py's `benchmark` fixture counts each benchmarked call after pytest-benchmark has
run it, as pytest-codspeed does for CodSpeed: the saved run's extra_info holds `instructions` (the fewest of
three warm counted calls), `instructions_spread` and `counter`. Compare two such runs by those keys (for example
`--benchmark-compare --benchmark-columns=min` shows the times; the instructions are in each run's JSON). The
times of a counted run are taken under valgrind and are not this machine's: keep the storage apart (the default
here) from timed runs'. Each benchmark runs a single round.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec.measure import work  # noqa: E402


def main(argv: list[str]) -> int:
    avail = work.probe()
    if avail.kind is None:
        print(f"count_benchmarks: no work counter here: {avail.reason}", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory(prefix="specdec-work-") as tmp:
        cmd = [sys.executable, "-m", "pytest", "tests/benchmarks", "-p", "no:cacheprovider", "--benchmark-autosave",
               "--benchmark-storage", ".benchmarks/work", "--benchmark-min-rounds=1", "--benchmark-max-time=0",
               "--benchmark-warmup=off", *argv]
        print(f"counting with {avail.name}: {' '.join(cmd)}", file=sys.stderr)
        proc = work.popen(cmd, avail.kind, str(Path(tmp) / "cg.%p"), {"PYTHONPATH": str(ROOT)}, cwd=str(ROOT))
        return proc.wait()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
