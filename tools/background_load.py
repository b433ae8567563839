"""Load that comes and goes, for testing a measurement against it: a numpy matmul and memory-streaming loop
pinned to one CPU, on for --on seconds, then idle for --off seconds, until interrupted (or for --duration
seconds in all: a test that starts it cannot leave it running).

    python tools/background_load.py --cpu 1 --on 60 --off 60 &
    python tools/regression_demo.py --cases d      # the no-op must stay unflagged under it
    kill %1

It competes for the shared caches and memory bandwidth (the 64 MB stream) and, where the benchmark runs on
the same CPU, for the CPU itself: what a shared host's neighbours do, switched on and off mid-run.
"""

from __future__ import annotations

import argparse
import math
import os
import time

import numpy as np


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", type=int, default=1, help="the CPU to pin the load to (default: 1)")
    ap.add_argument("--on", type=float, default=60.0, help="seconds of load per cycle (default: 60)")
    ap.add_argument("--off", type=float, default=60.0, help="seconds of rest per cycle (default: 60)")
    ap.add_argument("--duration", type=float, default=None, help="stop after this many seconds (default: never)")
    args = ap.parse_args()
    cpus = sorted(os.sched_getaffinity(0))
    if args.cpu not in cpus:
        ap.error(f"--cpu {args.cpu} is not available (allowed: {', '.join(map(str, cpus))})")
    if not args.on > 0 or not args.off >= 0 or not (args.duration is None or args.duration > 0):
        ap.error(f"--on must be above 0 (got {args.on}), --off at least 0 (got {args.off}), --duration above 0 "
                 f"(got {args.duration})")
    os.sched_setaffinity(0, {args.cpu})
    a = np.random.rand(1024, 1024).astype(np.float32)
    stream = np.random.rand(16 * 1024 * 1024).astype(np.float32)  # 64 MB: past any cache
    t0 = time.time()
    end = math.inf if args.duration is None else t0 + args.duration
    try:
        while time.time() < end:
            print(f"{time.time() - t0:7.0f} s: on", flush=True)
            stop = min(time.time() + args.on, end)
            while time.time() < stop:
                a @ a
                stream.sum()
            print(f"{time.time() - t0:7.0f} s: off", flush=True)
            time.sleep(max(0.0, min(args.off, end - time.time())))
    except KeyboardInterrupt:
        pass


if __name__ == "__main__":
    main()
