"""Per-position acceptance of a chain draft (default: the shipped `eagle`) on 32-character prompts from the
validation split, with specdec's own loop and rule: deterministic given --seed.

    python tools/eagle_acceptance.py [--checkpoint PATH] [--draft eagle] [--k 4] [--temperature 1]
                                     [--prompts 40] [--chars 200] [--seed 0] [--json]

The prompts are --prompts windows of --prompt-chars characters at offsets drawn (seeded) from the validation
split; run i generates --chars characters with seed --seed + i. Printed: the rounds, the histogram (rounds by
accepted drafts, 0..k), and two per-position figures (docs/definitions.md):

- conditional: P(draft i accepted | drafts 1..i-1 accepted), from the round log (`acceptance_over`'s
  position_acceptance, which counts a final round cut short only as far as it drafted);
- unconditional: the share of rounds whose i-th draft was accepted (vLLM's num_accepted_tokens_per_pos / num_drafts,
  `acceptance_engines.figures`' per_position).
"""

from __future__ import annotations

import argparse
import json
import time

import numpy as np
import torch

import specdec
from specdec.measure import acceptance_engines
from specdec.measure.acceptance import acceptance_over
from specdec.measure.workload import WorkloadItem
from specdec.model import corpus
from specdec.model.train import load_target


def prompts(n: int, length: int, seed: int) -> list[str]:
    """n windows of `length` characters of the validation split at seeded random offsets."""
    text = corpus.split_text("val")
    rng = np.random.default_rng(seed)
    return [text[s:s + length] for s in rng.integers(0, len(text) - length, size=n)]


def measure(target, draft, k: int = 4, temperature: float = 1.0, n: int = 40, chars: int = 200,
            prompt_chars: int = 32, seed: int = 0) -> dict:
    runs = [(WorkloadItem(f"val{i}", "validation", p), seed + i)
            for i, p in enumerate(prompts(n, prompt_chars, seed))]
    res = acceptance_over(target, draft, k, None, chars=chars, temperature=temperature, runs=runs)
    fig = acceptance_engines.figures(res["accepted_per_position"], res["totals"]["drafted"])
    return {"k": k, "temperature": temperature, "prompts": n, "chars": chars, "seed": seed,
            "rounds": fig["rounds"], "histogram": fig["histogram"], "acceptance": fig["acceptance"],
            "acceptance_length": fig["acceptance_length"],
            "conditional": res["position_acceptance"], "conditional_reached": res["position_reached"],
            "conditional_from_histogram": fig["conditional"], "unconditional": fig["per_position"]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--draft", default="eagle")
    ap.add_argument("--checkpoint", default=None, help="the draft's weights (default: the shipped ones)")
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--temperature", type=float, default=1.0)
    ap.add_argument("--prompts", type=int, default=40)
    ap.add_argument("--chars", type=int, default=200)
    ap.add_argument("--prompt-chars", type=int, default=32)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    torch.set_num_threads(a.threads)
    target = load_target()
    kw = {"checkpoint": a.checkpoint} if a.checkpoint else {}
    draft = specdec.make_draft(a.draft, target, **kw)
    start = time.perf_counter()
    out = measure(target, draft, a.k, a.temperature, a.prompts, a.chars, a.prompt_chars, a.seed)
    out["seconds"] = round(time.perf_counter() - start, 1)
    if a.json:
        print(json.dumps(out))
        return 0

    def row(xs):
        return " ".join("  -  " if x is None else f"{x:.3f}" for x in xs)
    print(f"{a.draft} {a.checkpoint or '(shipped)'}: k={a.k} T={a.temperature} {a.prompts} prompts x {a.chars} "
          f"chars, seed {a.seed}: {out['rounds']} rounds, histogram {out['histogram']}, {out['seconds']} s")
    print(f"  conditional   (P(i | 1..i-1)) {row(out['conditional'])}   reached {out['conditional_reached']}")
    print(f"  unconditional (vLLM per pos)  {row(out['unconditional'])}")
    print(f"  acceptance {out['acceptance']:.3f}, acceptance length {out['acceptance_length']:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
