"""T(1) and T(5)/T(1) of the shipped target: native eager, native onnx, and the exported GPT-2 through the HF
adapter, in one alternated run (round robin, rotated: every sample of every path from the same moments).

    specdec export-hf OUT && python tools/adapter_cost.py OUT/target [--rounds 60] [--calls 20]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch

import specdec
from specdec.measure import timing

COST_TEXT = "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", type=Path, help="the exported target (specdec export-hf OUT writes OUT/target)")
    ap.add_argument("--rounds", type=int, default=60, help="samples per path (default 60)")
    ap.add_argument("--calls", type=int, default=20, help="calls per sample (default 20)")
    args = ap.parse_args()
    if not (args.folder / "config.json").is_file():
        ap.error(f"{args.folder}: not a model folder (no config.json); run specdec export-hf OUT first")
    if args.rounds < 1 or args.calls < 1:
        ap.error(f"--rounds and --calls must be at least 1, got {args.rounds} and {args.calls}")
    torch.set_num_threads(1)
    ctx = specdec.encode(COST_TEXT)
    pos = len(ctx) - 1
    models = {"eager": specdec.load_target(backend="eager"), "onnx": specdec.load_target(backend="onnx"),
              "hf adapter": specdec.load_target(f"hf:{args.folder}")}
    fns = {}
    with torch.inference_mode():
        for name, m in models.items():
            m.setup_cache(1)
            m(m.ids(ctx), 0)
            for n in (1, 5):
                x = m.ids(ctx[-1:] + ctx[: n - 1])
                fns[f"{name} T({n})"] = (lambda m=m, x=x: m(x, pos))
        times = timing.round_robin(fns, samples=args.rounds, number=args.calls, rotate=True)
    print(f"threads {torch.get_num_threads()}, {args.rounds} rounds x {args.calls} calls, rotated")
    for name in models:
        t1, r = times[f"{name} T(1)"], times[f"{name} T(5)"] / times[f"{name} T(1)"]
        print(f"{name:11} T(1) {np.median(t1) * 1e6:7.1f} us   T(5)/T(1) {np.median(r):.3f} "
              f"(IQR {np.percentile(r, 25):.3f}-{np.percentile(r, 75):.3f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
