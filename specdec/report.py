"""`specdec report`: measure everything on this machine, then print and write the tables and the figure.

Measurement (`measure`, here) and presentation (`render`) are separate: the JSON document is the result and
every table, finding and the figure are rendered from it, so a `report.json` from another machine or commit
renders the same way and `specdec compare` reads the same keys. `write` puts the files in place atomically.
"""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

from . import exactness, render, stats, timing
from .decode import generate, speculative_generate
from .drafts import DRAFTS, available_on, make_draft
from .model import GPT

REPORT_PROMPT = "ROMEO:"
DEFAULT_KS = (1, 2, 4, 8)
ADAPTIVE = {"start_k": 4, "k_max": 16}  # the adaptive-k rows: the +2 / -1 schedule from k = 4, at most 16
# cost_calls: calls per cost sample; term_calls: rounds per sample of each refined-model term (see
# timing.loop_sampler); triples: rotated runs per adaptive-k row
# retake_ci: a speedup row whose measured or predicted 95 % CI is wider than this fraction of its median gets
# as many pairs again, pooled with the first
FULL = {"pairs": 15, "samples": 20_000, "cost_samples": 15, "cost_calls": 20, "term_calls": 10, "triples": 15,
        "retake_ci": 0.05}
QUICK = {"pairs": 4, "samples": 5_000, "cost_samples": 5, "cost_calls": 10, "term_calls": 4, "triples": 3,
         "retake_ci": 0.0}


def machine_info(threads: int, device: str) -> dict:
    """Where and on what the numbers were measured: enough to line reports up with asv's history."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    if torch.device(device).type == "cuda":
        cpu += f" + {torch.cuda.get_device_name()}"
    return {
        "cpu": cpu,
        "cores": os.cpu_count(),
        "threads": threads,
        "device": device,
        "torch_version": torch.__version__,
        "numpy_version": np.__version__,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "commit": git_commit(),
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
    }


def git_commit() -> str | None:
    """The project's git commit when running from a checkout (with '-dirty' if it has changes)."""
    here = Path(__file__).resolve().parent
    try:
        sha = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True, text=True,
                             timeout=5).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True, timeout=5).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return (sha + ("-dirty" if dirty else "")) if sha else None


def measure(
    target: GPT,
    drafts: list[str] | None = None,
    ks: list[int] | None = None,
    quick: bool = False,
    pairs: int | None = None,
    threads: int = 1,
    device: str = "cpu",
    chars: int = 200,
    seed: int = 0,
    prompt: str = REPORT_PROMPT,
    temperature: float = 1.0,
    log=print,
) -> dict:
    """Run every measurement and return the report document (the schema is in README.md)."""
    drafts = list(drafts or DRAFTS)
    skipped = [n for n in drafts if n not in available_on(device)]
    for name in skipped:
        log(f"[setup] skipping draft {name}: it runs on the CPU only, not on {device}")
    drafts = [n for n in drafts if n not in skipped]
    if not drafts:
        raise ValueError(f"no draft to measure on {device} (CPU only: {', '.join(skipped)})")
    ks = sorted(set(ks or DEFAULT_KS))
    budget = dict(QUICK if quick else FULL)
    if pairs is not None:
        budget["pairs"] = budget["triples"] = pairs
    t_start = time.perf_counter()
    target = target.to(device)
    objs = {}
    for name in drafts:
        log(f"[setup] building draft {name}")
        objs[name] = make_draft(name, target)
    doc = {"machine": machine_info(threads, device), "settings": {
        "prompt": prompt, "chars": chars, "seed": seed, "temperature": temperature, "ks": ks,
        "drafts": drafts, "quick": quick, **budget}}
    if skipped:
        doc["skipped"] = {name: f"runs on the CPU only, not on {device}" for name in skipped}

    log(f"[1/4] exactness: {budget['samples']} draws per draft")
    doc["exactness"] = [exactness.target_row(target, budget["samples"], seed)] + exactness.verify(
        target, objs, k=max(ks), samples=budget["samples"], seed=seed)

    log("[2/4] acceptance (deterministic given the seed)")
    acc = []
    gens = {}
    for name in drafts:
        for k in ks:
            st = speculative_generate(target, objs[name], prompt, chars, k, seed, temperature).stats
            gens[name, k] = st
            acc.append({"draft": name, "k": k, "acceptance": st.acceptance, "chars_per_pass": st.chars_per_pass,
                        "target_passes": st.target_passes, "chars": chars, "drafted": st.drafted,
                        "expected_length": stats.expected_length(st.acceptance, k),
                        "accepted_per_position": st.accepted_per_position})
    doc["acceptance"] = acc

    with timing.threads(threads):
        log(f"[3/4] costs: {budget['cost_samples']} round-robin samples, {threads} thread(s)")
        costs = timing.measure_costs(target, objs, ks, samples=budget["cost_samples"], number=budget["cost_calls"],
                                     device=device,
                                     temperature=temperature, threads_used=threads)
        doc["costs"] = {
            "target_pass_us": costs.target_pass_us,
            "verify_pass_us": {str(n): v for n, v in costs.verify_pass_us.items()},
            "step_us": costs.step_us,
            "round_us": {str(k): v for k, v in costs.round_us.items()},
            "drafts": {n: {"char_us": costs.draft_char_us[n], "char_us_range": costs.char_range[n],
                           "c": costs.c(n), "c_range": costs.c_range[n],
                           "weight_bytes": objs[n].weight_bytes()} for n in drafts},
            "draft_k": costs.draft_k,
            "loop": {n: {str(k): {"char_us": costs.loop_char_us[n][k], "round_us": costs.loop_round_us[n][k]}
                         for k in ks} for n in drafts},
        }
        def pairs_of(name: str, k: int) -> timing.Paired:
            st = gens[name, k]
            full = st.accepted_per_position[k] / st.draft_calls if st.draft_calls else 0.0
            local = timing.loop_sampler(target, objs[name], k, temperature, device, budget["term_calls"],
                                        all_accepted=full, position=len(prompt) + chars // 2)
            return timing.paired_speedup(target, objs[name], k, prompt, chars, seed, temperature,
                                         budget["pairs"], device, between=local)

        rows, measured = [], {}
        for i, name in enumerate(drafts):
            for k in ks:
                log(f"[4/4] speedup {name} k={k}: {budget['pairs']} alternated pairs "
                    f"({i * len(ks) + ks.index(k) + 1}/{len(drafts) * len(ks)})")
                measured[name, k] = pairs_of(name, k)
                rows.append(_speedup_row(name, k, gens[name, k], costs, measured[name, k]))
        # A row whose measured or predicted median is this uncertain was measured through a burst of load from
        # elsewhere: it gets as many pairs again, later, and the row is made from all of them. (Pooling, not
        # choosing between the runs, so nothing is selected; the trigger never looks at how prediction and
        # measurement agree.)
        uncertain = [i for i, r in enumerate(rows) if budget["retake_ci"] and _ci_width(r) > budget["retake_ci"]]
        # the most uncertain first, at most half the rows: the full report stays within its time on a loaded machine
        for i in sorted(uncertain, key=lambda i: -_ci_width(rows[i]))[: max(1, len(rows) // 2)]:
            r, (name, k) = rows[i], (rows[i]["draft"], rows[i]["k"])
            log(f"[4/4] more pairs for {name} k={k}: a 95 % CI spans {_ci_width(r):.0%} of its median")
            more, first = pairs_of(name, k), measured[name, k]
            pooled = timing.Paired(first.a + more.a, first.b + more.b, first.between + more.between)
            rows[i] = _speedup_row(name, k, gens[name, k], costs, pooled)
            rows[i].update(retaken=True, ci_widths=[_ci_width(r), _ci_width(rows[i])])
        adaptive = []
        for i, name in enumerate(drafts):
            fixed = max((r for r in rows if r["draft"] == name), key=lambda r: r["measured_median"])["k"]
            log(f"[4/4] adaptive k {name} against fixed k={fixed}: {budget['triples']} rotated triples "
                f"({i + 1}/{len(drafts)})")
            adaptive.append(_adaptive_row(target, objs[name], name, fixed, prompt, chars, seed, temperature,
                                          budget["triples"], device))
        doc["adaptive"] = adaptive
        best = max(rows, key=lambda r: r["measured_median"])
        log(f"[4/4] greedy (temperature 0): {best['draft']} k={best['k']}, {budget['pairs']} pairs")
        doc["greedy"] = _greedy_row(target, objs[best["draft"]], best["draft"], best["k"], prompt, chars, seed,
                                    budget["pairs"], device)
    doc["speedup"] = rows
    doc["recommendations"] = recommend(rows)
    doc["wall_seconds"] = time.perf_counter() - t_start
    return doc


def _ci_width(row: dict) -> float:
    """The wider of the two 95 % intervals (measured median, refined prediction), relative to its median."""
    return max((row["ci_high"] - row["ci_low"]) / row["measured_median"],
               (row["predicted_refined_ci_high"] - row["predicted_refined_ci_low"]) / row["predicted_refined"])


def _speedup_row(name: str, k: int, st, costs: timing.Costs, pr: timing.Paired) -> dict:
    """One row of tables 3 and 5. The refined prediction is made per pair from costs sampled right after
    that pair (step, drafted character, round), so it shares the pair's moment; its median is reported."""
    s = stats.summarize(pr.ratios)
    c = costs.c(name)
    refined = [stats.refined_speedup(st.chars, st.target_passes, st.drafted, step, rnd, char)
               for step, char, rnd in pr.between]
    ps = stats.summarize(refined)
    step_us, char_us, round_us = (float(np.median([t[i] for t in pr.between])) for i in range(3))
    terms = stats.refined_terms(st.chars, st.target_passes, st.drafted, step_us, round_us, char_us)
    # What the paired runs imply for each side, against what the cost model assumed: names the term off.
    implied_step = float(np.median(pr.a)) * 1e6 / st.chars
    implied_spec = float(np.median(pr.b)) * 1e6
    return {
        "draft": name, "k": k, "chars_per_pass": st.chars_per_pass,
        "predicted": stats.predicted_speedup(st.chars_per_pass, k, c),
        "predicted_refined": ps.median,
        "predicted_refined_ci_low": ps.ci_low, "predicted_refined_ci_high": ps.ci_high,
        "predicted_refined_min": float(np.min(refined)), "predicted_refined_max": float(np.max(refined)),
        "measured_median": s.median, "measured_min": s.min, "measured_max": s.max,
        "ci_low": s.ci_low, "ci_high": s.ci_high, "pairs": s.n, "noisy": s.noisy, "retaken": False,
        "ratios": pr.ratios,
        "terms_us": {"step": step_us, "draft_char": char_us, "round": round_us},
        "target_only_error": implied_step / step_us - 1.0,
        "speculative_error": implied_spec / terms["speculative_us"] - 1.0,
        "draft_share": terms["draft_share"],
    }


def _greedy_row(target, draft, name, k, prompt, chars, seed, pairs, device) -> dict:
    """The best sampled configuration again at temperature 0, where acceptance is argmax agreement."""
    st = speculative_generate(target, draft, prompt, chars, k, seed, 0.0).stats
    s = stats.summarize(timing.paired_speedup(target, draft, k, prompt, chars, seed, 0.0, pairs, device).ratios)
    return {"draft": name, "k": k, "acceptance": st.acceptance, "chars_per_pass": st.chars_per_pass,
            "target_passes": st.target_passes, "measured_median": s.median, "measured_min": s.min,
            "measured_max": s.max, "pairs": s.n}


def _adaptive_row(target, draft, name, fixed_k, prompt, chars, seed, temperature, samples, device) -> dict:
    """Adaptive k against the draft's best fixed k and target-only, timed in rotated turns of all three, so
    both ratios come from the same moments."""
    def adaptive():
        return speculative_generate(target, draft, prompt, chars, ADAPTIVE["start_k"], seed, temperature,
                                    adaptive=True, k_max=ADAPTIVE["k_max"])

    st = adaptive().stats
    t = timing.round_robin({
        "target": lambda: generate(target, prompt, chars, seed, temperature),
        "fixed": lambda: speculative_generate(target, draft, prompt, chars, fixed_k, seed, temperature),
        "adaptive": adaptive,
    }, samples, number=1, device=device, rotate=True)
    vs_target = stats.summarize(t["target"] / t["adaptive"])
    vs_fixed = stats.summarize(t["fixed"] / t["adaptive"])
    return {"draft": name, **ADAPTIVE, "mean_k": st.mean_k, "acceptance": st.acceptance,
            "chars_per_pass": st.chars_per_pass, "target_passes": st.target_passes,
            "measured_median": vs_target.median, "measured_min": vs_target.min, "measured_max": vs_target.max,
            "best_fixed_k": fixed_k, "vs_fixed_median": vs_fixed.median, "vs_fixed_min": vs_fixed.min,
            "vs_fixed_max": vs_fixed.max, "vs_fixed_ci_low": vs_fixed.ci_low, "vs_fixed_ci_high": vs_fixed.ci_high,
            "pairs": vs_target.n}


def recommend(rows: list[dict]) -> dict:
    """Per draft: the k with the best predicted (refined) and the best measured speedup."""
    out = {}
    for name in dict.fromkeys(r["draft"] for r in rows):
        mine = [r for r in rows if r["draft"] == name]
        bp = max(mine, key=lambda r: r["predicted_refined"])
        bm = max(mine, key=lambda r: r["measured_median"])
        out[name] = {"best_k_predicted": bp["k"], "predicted": bp["predicted_refined"],
                     "best_k_measured": bm["k"], "measured": bm["measured_median"]}
    return out


def write(doc: dict, out_dir: str | os.PathLike, markdown: str) -> list[Path]:
    """Write report.md, speedup.png and report.json into out_dir, each all-or-nothing.

    Everything is rendered into a temporary folder first, then renamed into place with SIGINT held off, so an
    interrupt leaves either the earlier report or the new one, never a half-written file.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(dir=out, prefix=".report-"))
    try:
        (tmp / "report.md").write_text(markdown)
        names = ["report.md"]
        if render.plot(doc, tmp / "speedup.png"):
            names.append("speedup.png")
        (tmp / "report.json").write_text(json.dumps(doc, indent=2) + "\n")
        names.append("report.json")
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        try:
            for n in names:
                os.replace(tmp / n, out / n)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return [out / n for n in names]
