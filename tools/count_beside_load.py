"""Does a row's count move with the machine's load? A count must not: it is the rows' own instructions.

    python tools/count_beside_load.py [--rows target-only "pass 1"] [--busy 3] [--telemetry off|on]

Counts `rows` of this checkout exactly as `specdec ab` counts a revision (`ab_work.count_sources`: its plan, its
layouts, one counting process), twice: on the machine as it is, then beside `--busy` processes spinning
`while True: pass`. Prints, per row, each layout's figure in both and the change of the means (JSON on stdout,
progress on stderr). `--telemetry on` counts with ONNX Runtime's telemetry thread left running (the counted
environment turns it off: `work.ORT_TELEMETRY`), which is what made `target-only` move with the load
(docs/work.md). Run it on an otherwise idle machine: the busy processes are the only load it should see.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from specdec.measure.ab import ab_work  # noqa: E402
from specdec.measure.ab.ab_sources import Source  # noqa: E402
from specdec.measure.work import work, work_pool  # noqa: E402
from work_study import CONFIG  # noqa: E402  (`specdec ab`'s defaults, as the study counts them; tools/ is on the path)


def count(kind: str, rows: list[str]) -> dict[str, list[float]]:
    src = Source("base", "this checkout", str(ROOT), None)
    got = ab_work.count_sources([src], ab_work.counting_config(CONFIG), kind, rows,
                                lambda s: print(s, file=sys.stderr, flush=True))
    return {row: work_pool.figure(per[0]) for row, per in got.items()}


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rows", nargs="+", default=["target-only", "pass 1"])
    p.add_argument("--busy", type=int, default=3, help="busy processes beside the second count (default 3)")
    p.add_argument("--telemetry", choices=["off", "on"], default="off",
                   help="ONNX Runtime's telemetry in the counted processes (default off, as ab counts)")
    args = p.parse_args(argv)
    avail = work.probe()
    if avail.kind is None:
        print(f"count_beside_load: no counter here: {avail.reason}", file=sys.stderr)
        return 2
    if args.telemetry == "on":  # the counted environment's module, as the counting pool loads it
        work_pool._work().ORT_TELEMETRY = {"ORT_DISABLE_TELEMETRY": "0"}
    quiet = count(avail.kind, args.rows)
    busy = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)]
    try:
        loaded = count(avail.kind, args.rows)
    finally:
        for b in busy:
            b.kill()
    out = {"telemetry": args.telemetry, "busy": args.busy, "counter": avail.name, "rows": {
        row: {"quiet": quiet[row], "loaded": loaded[row],
              "change": sum(loaded[row]) / sum(quiet[row]) - 1} for row in args.rows}}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
