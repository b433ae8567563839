"""Every backend against eager on this machine, 1 thread -- the figures issue 12's targets are stated in.

1. The machine's roofline floor for a single-position pass at context position 100 (`roofline.measure_machine`).
2. Single and 5-position passes of every backend at position 100, round-robin samples (every backend's call
   takes its turn in each sample, so a slow moment lands on all): median µs, and the ratio to eager and to the
   floor from per-sample ratios.
3. A target-only step (input ids, pass, logits to a sample) against the pass at the same position: step - pass.
4. 200-character target-only and ngram k=8 speculative generation, each backend against eager in alternated
   pairs (eager first, then backend first, ...): eager ÷ backend time, median and range.

    python tools/backend_race.py      # about two minutes; run nothing else meanwhile
"""
import time

import numpy as np
import torch

from specdec import BACKENDS, generate, load_target, make_draft
from specdec.model import corpus
from specdec.decoding import rounds
from specdec.measure import hygiene
from specdec.measure.anatomy import roofline
from specdec import speculative_generate
from specdec.measure import timing

POS = 100
PAIRS = 10
hygiene.set_threads(1)
models = {b: load_target(backend=b) for b in BACKENDS}
cfg = models["eager"].config
machine = roofline.measure_machine(2.0, 1)
floor = roofline.floor_us(roofline.pass_flops(cfg, 1, POS), roofline.pass_bytes(cfg, 1, POS), machine)
print(f"machine: GEMM {machine.matmul_gflops:.0f} GFLOP/s, cache reads {machine.cache_gbps:.1f} GB/s; "
      f"floor of a single-position pass at position {POS}: {floor:.1f} us")

ctx = corpus.split_ids("val")[: POS + 5].tolist()
rng = np.random.default_rng(0)
fns = {}
for name, m in models.items():
    m.setup_cache(1)
    with torch.inference_mode():
        m(m.ids(ctx[:POS]), 0)
    one, five = m.ids(ctx[POS : POS + 1]), m.ids(ctx[POS : POS + 5])
    fns[f"{name} T=1"] = lambda m=m, x=one: m(x, POS)
    fns[f"{name} T=5"] = lambda m=m, x=five: m(x, POS)

    def step(m=m):  # what `generate` does per character, at the same position
        return rounds.step(m, ctx[POS : POS + 1], POS, 1.0, rng)

    fns[f"{name} step"] = step
with torch.inference_mode(), hygiene.no_gc():
    raw = timing.round_robin(fns, samples=30, number=50, rotate=True)
for name in BACKENDS:
    one, five, step = (raw[f"{name} {w}"] * 1e6 for w in ("T=1", "T=5", "step"))
    vs = {w: np.median(raw[f"{name} {w}"] / raw[f"eager {w}"]) for w in ("T=1", "T=5")}
    print(f"{name:6s} pass T=1 {np.median(one):6.1f} us ({np.median(one) / floor:.2f}x floor, "
          f"{vs['T=1']:.3f}x eager)  T=5 {np.median(five):6.1f} us ({vs['T=5']:.3f}x eager)  "
          f"step - pass {np.median(step - one):5.1f} us ({np.median((step - one) / one):.1%} of the pass)")


def seconds(fn) -> float:
    with hygiene.no_gc():
        t0 = time.perf_counter()
        fn()
        return time.perf_counter() - t0


prompt = "ROMEO:\nWhat light"
for name in BACKENDS[1:]:
    e, o = models["eager"], models[name]
    de, do = make_draft("ngram", e), make_draft("ngram", o)
    cases = (("target-only 200 chars", lambda: generate(e, prompt, 200, 0), lambda: generate(o, prompt, 200, 0)),
             ("ngram k=8 200 chars", lambda: speculative_generate(e, de, prompt, 200, 8, 0),
              lambda: speculative_generate(o, do, prompt, 200, 8, 0)))
    for label, fe, fo in cases:
        fe(), fo()
        r = [seconds(fe) / seconds(fo) if i % 2 == 0 else 1 / (seconds(fo) / seconds(fe)) for i in range(PAIRS)]
        print(f"{name:6s} {label}: eager/{name} time {np.median(r):.2f}x (range {min(r):.2f}-{max(r):.2f}, "
              f"{PAIRS} alternated pairs)")
    same = generate(e, prompt, 200, 0, 0.0).text == generate(o, prompt, 200, 0, 0.0).text
    print(f"{name:6s} greedy text identical to eager: {same}")
