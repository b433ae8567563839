"""Eager against fused on this machine, 1 thread: single and 5-position target passes (round-robin samples),
then 200-character target-only and ngram k=8 speculative generation in 10 alternated pairs (issue 12).

    python tools/backend_race.py      # about a minute; run nothing else meanwhile
"""
import time, numpy as np, torch
from specdec import load_target, generate, speculative_generate, make_draft, hygiene, timing, corpus
hygiene.set_threads(1)
eager, fused = load_target(), load_target(backend="fused")
ctx = corpus.encode(timing.COST_PROMPT)
pos = len(ctx) - 1
fns = {}
for name, m in (("eager", eager), ("fused", fused)):
    m.setup_cache(1)
    with torch.inference_mode():
        m(m.ids(ctx[:-1]), 0)
    one, five = m.ids(ctx[-1:]), m.ids(ctx[-1:] + ctx[:4])
    fns[f"{name} T=1"] = (lambda m=m, x=one: m(x, pos))
    fns[f"{name} T=5"] = (lambda m=m, x=five: m(x, pos))
with torch.inference_mode():
    raw = timing.round_robin(fns, samples=30, number=50, rotate=True)
for k, v in raw.items():
    print(f"{k}: median {np.median(v)*1e6:.1f} us  (min {v.min()*1e6:.1f})")
print("fused/eager T=1 per-sample median ratio %.3f" % np.median(raw["fused T=1"] / raw["eager T=1"]))
print("fused/eager T=5 per-sample median ratio %.3f" % np.median(raw["fused T=5"] / raw["eager T=5"]))
prompt = "ROMEO:\nWhat light"
def t(fn):
    with hygiene.no_gc():
        t0 = time.perf_counter(); fn(); return time.perf_counter() - t0
for label, fe, ff in (("target-only 200 chars", lambda: generate(eager, prompt, 200, 0), lambda: generate(fused, prompt, 200, 0)),
                      ("ngram k=8 200 chars", None, None)):
    if fe is None:
        de, df = make_draft("ngram", eager), make_draft("ngram", fused)
        fe = lambda: speculative_generate(eager, de, prompt, 200, 8, 0)
        ff = lambda: speculative_generate(fused, df, prompt, 200, 8, 0)
    fe(); ff()
    r = []
    for i in range(10):
        if i % 2 == 0:
            a = t(fe); b = t(ff)
        else:
            b = t(ff); a = t(fe)
        r.append(a / b)
    print(f"{label}: eager/fused time ratio median {np.median(r):.3f} (range {min(r):.3f}-{max(r):.3f}, 10 alternated pairs)")
print("greedy text identical:", generate(eager, prompt, 200, 0, 0.0).text == generate(fused, prompt, 200, 0, 0.0).text)
