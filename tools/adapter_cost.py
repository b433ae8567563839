"""T(1) and T(5)/T(1) of the shipped target: native eager, native onnx, and the exported GPT-2 through the HF
adapter, in one alternated run (round robin, same moments). Usage: specdec export-hf OUT && python tools/adapter_cost.py OUT/target"""
import sys

import numpy as np
import torch

import specdec
from specdec.measure import timing

torch.set_num_threads(1)
ctx = specdec.encode("KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up")
pos = len(ctx) - 1
models = {"eager": specdec.load_target(backend="eager"), "onnx": specdec.load_target(backend="onnx"),
          "hf adapter": specdec.load_target(f"hf:{sys.argv[1]}")}
fns = {}
with torch.inference_mode():
    for name, m in models.items():
        m.setup_cache(1)
        m(m.ids(ctx), 0)
        for n in (1, 5):
            x = m.ids(ctx[-1:] + ctx[: n - 1])
            fns[f"{name} T({n})"] = (lambda m=m, x=x: m(x, pos))
    times = timing.round_robin(fns, samples=60, number=20, rotate=True)
print(f"threads {torch.get_num_threads()}, 60 rounds x 20 calls, rotated")
for name in models:
    t1, t5 = times[f"{name} T(1)"], times[f"{name} T(5)"]
    r = t5 / t1
    print(f"{name:11} T(1) {np.median(t1) * 1e6:7.1f} us   T(5)/T(1) {np.median(r):.3f} (IQR {np.percentile(r, 25):.3f}-{np.percentile(r, 75):.3f})")
