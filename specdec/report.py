"""`specdec report`: measure everything on this machine, then print and write the tables and the figure.

Measurement (`measure`) and presentation (`tables`, `to_markdown`, `write`, `plot`) are separate: the JSON
document is the result, and every table is rendered from it, so `report.json` from another machine or commit
renders the same way and `specdec compare` reads the same keys.
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

from . import exactness, stats, timing
from .decode import speculative_generate
from .drafts import DRAFTS, make_draft
from .model import GPT

REPORT_PROMPT = "ROMEO:"
DEFAULT_KS = (1, 2, 4, 8)
FULL = {"pairs": 15, "samples": 20_000, "cost_samples": 15}
QUICK = {"pairs": 5, "samples": 5_000, "cost_samples": 5}
EXACT_P = 1e-3  # a verify row passes when its chi-square p-value is above this ...
REFINED_TOLERANCE = 0.05  # ... and the refined model is held to within 5 % of the measured median


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
    ks = sorted(set(ks or DEFAULT_KS))
    budget = dict(QUICK if quick else FULL)
    if pairs is not None:
        budget["pairs"] = pairs
    t_start = time.perf_counter()
    target = target.to(device)
    objs = {}
    for name in drafts:
        log(f"[setup] building draft {name}")
        objs[name] = make_draft(name, target)
    doc = {"machine": machine_info(threads, device), "settings": {
        "prompt": prompt, "chars": chars, "seed": seed, "temperature": temperature, "ks": ks,
        "drafts": drafts, "quick": quick, **budget}}

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
        costs = timing.measure_costs(target, objs, ks, samples=budget["cost_samples"], device=device,
                                     temperature=temperature, threads_used=threads)
        doc["costs"] = {
            "target_pass_us": costs.target_pass_us,
            "verify_pass_us": {str(n): v for n, v in costs.verify_pass_us.items()},
            "step_us": costs.step_us,
            "round_us": {str(k): v for k, v in costs.round_us.items()},
            "drafts": {n: {"char_us": costs.draft_char_us[n], "char_us_range": costs.char_range[n],
                           "c": costs.c(n), "c_range": costs.c_range[n],
                           "weight_bytes": objs[n].weight_bytes()} for n in drafts},
        }
        rows = []
        for i, name in enumerate(drafts):
            for k in ks:
                log(f"[4/4] speedup {name} k={k}: {budget['pairs']} alternated pairs "
                    f"({i * len(ks) + ks.index(k) + 1}/{len(drafts) * len(ks)})")
                pr = timing.paired_speedup(target, objs[name], k, prompt, chars, seed, temperature,
                                           budget["pairs"], device)
                rows.append(_speedup_row(name, k, gens[name, k], costs, pr))
        best = max(rows, key=lambda r: r["measured_median"])
        log(f"[4/4] greedy (temperature 0): {best['draft']} k={best['k']}, {budget['pairs']} pairs")
        doc["greedy"] = _greedy_row(target, objs[best["draft"]], best["draft"], best["k"], prompt, chars, seed,
                                    budget["pairs"], device)
    doc["speedup"] = rows
    doc["recommendations"] = recommend(rows)
    doc["wall_seconds"] = time.perf_counter() - t_start
    return doc


def _speedup_row(name: str, k: int, st, costs: timing.Costs, pr: timing.Paired) -> dict:
    s = stats.summarize(pr.ratios)
    c = costs.c(name)
    refined = stats.refined_speedup(st.chars, st.target_passes, st.drafted, costs.step_us,
                                    costs.round_us[k], costs.draft_char_us[name])
    # What the paired runs imply for each side, against what the cost model assumed: names the term off.
    implied_step = float(np.median(pr.a)) * 1e6 / st.chars
    terms = stats.refined_terms(st.chars, st.target_passes, st.drafted, costs.step_us, costs.round_us[k],
                                costs.draft_char_us[name])
    implied_spec = float(np.median(pr.b)) * 1e6
    return {
        "draft": name, "k": k, "chars_per_pass": st.chars_per_pass,
        "predicted": stats.predicted_speedup(st.chars_per_pass, k, c),
        "predicted_refined": refined,
        "measured_median": s.median, "measured_min": s.min, "measured_max": s.max,
        "ci_low": s.ci_low, "ci_high": s.ci_high, "pairs": s.n, "noisy": s.noisy,
        "ratios": pr.ratios,
        "target_only_error": implied_step / costs.step_us - 1.0,
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
        if plot(doc, tmp / "speedup.png"):
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


def plot(doc: dict, path: Path) -> bool:
    """Measured speedup against k per draft, min-max band, predicted dashed, a line at 1.0."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7.5, 4.8), dpi=120)
    rows = doc["speedup"]
    for i, name in enumerate(dict.fromkeys(r["draft"] for r in rows)):
        mine = sorted((r for r in rows if r["draft"] == name), key=lambda r: r["k"])
        ks = [r["k"] for r in mine]
        color = f"C{i}"
        ax.plot(ks, [r["measured_median"] for r in mine], "o-", color=color, label=f"{name} measured")
        ax.fill_between(ks, [r["measured_min"] for r in mine], [r["measured_max"] for r in mine],
                        color=color, alpha=0.15)
        ax.plot(ks, [r["predicted"] for r in mine], "--", color=color, alpha=0.8, label=f"{name} predicted")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_xticks(sorted({r["k"] for r in rows}), [str(k) for k in sorted({r["k"] for r in rows})])
    ax.set_xlabel("k (characters drafted per round)")
    ax.set_ylabel("speedup over target-only (x)")
    m = doc["machine"]
    ax.set_title(f"speculative decoding, {m['threads']} thread(s), {m['device']}", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
    return True


def _table(headers: list[str], rows: list[list]) -> str:
    """A Markdown pipe table padded to column width, so it reads as well in a terminal as rendered."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, width))) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(width)) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def tables(doc: dict) -> str:
    """Every table of the report as Markdown (also what the terminal shows)."""
    m, s = doc["machine"], doc["settings"]
    out = [f"# specdec report\n\n{m['cpu']}, {m['threads']} thread(s), {m['device']}, torch {m['torch_version']}, "
           f"commit {m.get('commit') or 'n/a'}, {m['date']}. Prompt {s['prompt']!r}, {s['chars']} characters, "
           f"seed {s['seed']}, temperature {s['temperature']}, {s['pairs']} pairs per row."]
    ex = doc["exactness"]
    out.append("## 1. Exactness (first generated character, %d draws, k = %d)\n" % (ex[0]["samples"], ex[-1]["k"]))
    out.append(_table(["draft", "total variation", "baseline TV (median, range)", "chi-square p", "verdict"], [
        [r["draft"], f"{r['tv']:.4f}",
         f"{r['baseline_tv']:.4f} ({r['baseline_tv_min']:.4f}-{r['baseline_tv_max']:.4f})" if "baseline_tv" in r
         else "(this row is the baseline)", f"{r['p_value']:.3f}", _verdict(r)] for r in ex]))
    out.append(f"\n## 2. Acceptance ({s['chars']} characters, seed {s['seed']})\n")
    out.append(_table(["draft", "k", "acceptance", "chars per target pass", "E(α,k)", "target passes"], [
        [r["draft"], r["k"], f"{r['acceptance']:.3f}", f"{r['chars_per_pass']:.2f}", f"{r['expected_length']:.2f}",
         r["target_passes"]] for r in doc["acceptance"]]))
    out.append(f"\n## 3. Measured speedup (target-only / speculative, {s['pairs']} alternated pairs)\n")
    out.append(_table(["draft", "k", "chars per pass", "median", "range", "95% CI", "note"], [
        [r["draft"], r["k"], f"{r['chars_per_pass']:.2f}", f"{r['measured_median']:.2f}",
         f"{r['measured_min']:.2f}-{r['measured_max']:.2f}", f"{r['ci_low']:.2f}-{r['ci_high']:.2f}",
         _noise_note(r)] for r in doc["speedup"]]))
    c = doc["costs"]
    out.append(f"\n## 4. Costs ({m['threads']} thread(s); medians of round-robin samples)\n")
    t1 = c["target_pass_us"]
    rows = [["one target pass (1 position)", f"{t1:.0f}", "1.000", "", ""]]
    rows += [[f"one verify pass ({n} positions)", f"{v:.0f}", f"{v / t1:.3f}", "", ""]
             for n, v in c["verify_pass_us"].items() if n != "1"]
    rows += [["target-only step (pass + sampling)", f"{c['step_us']:.0f}", f"{c['step_us'] / t1:.3f}", "", ""]]
    rows += [[f"speculative round k={k} (pass + rule)", f"{v:.0f}", f"{v / t1:.3f}", "", ""]
             for k, v in c["round_us"].items()]
    rows += [[f"one {n} character", f"{d['char_us']:.1f}", f"{d['c']:.3f}", f"{d['weight_bytes']:,}", f"c = {d['c']:.3f}"]
             for n, d in c["drafts"].items()]
    out.append(_table(["what", "µs", "÷ target pass", "weight bytes", ""], rows))
    out.append("\n## 5. Predicted against measured\n")
    out.append(_table(["draft", "k", "predicted (cpp/(1+k·c))", "predicted (refined)", "measured median",
                       "refined error", "note"], [
        [r["draft"], r["k"], f"{r['predicted']:.2f}", f"{r['predicted_refined']:.2f}", f"{r['measured_median']:.2f}",
         f"{r['predicted_refined'] / r['measured_median'] - 1:+.1%}", _miss_note(r)] for r in doc["speedup"]]))
    out.append("\n## Recommended k\n")
    out.append(_table(["draft", "best k (predicted)", "predicted", "best k (measured)", "measured"], [
        [n, v["best_k_predicted"], f"{v['predicted']:.2f}", v["best_k_measured"], f"{v['measured']:.2f}"]
        for n, v in doc["recommendations"].items()]))
    if "greedy" in doc:
        g = doc["greedy"]
        out.append("\n## Greedy decoding (temperature 0), the best sampled configuration\n")
        out.append(_table(["draft", "k", "acceptance", "chars per pass", "target passes", "median", "range"], [[
            g["draft"], g["k"], f"{g['acceptance']:.3f}", f"{g['chars_per_pass']:.2f}", g["target_passes"],
            f"{g['measured_median']:.2f}", f"{g['measured_min']:.2f}-{g['measured_max']:.2f}"]]))
    out.append(f"\nMeasured in {doc['wall_seconds']:.0f} s.")
    return "\n".join(out) + "\n"


def _verdict(r: dict) -> str:
    if "baseline_tv" not in r:
        return ""
    ok = r["p_value"] > EXACT_P and r["tv"] <= r["baseline_tv_max"]
    return "exact" if ok else "CHECK"


def _noise_note(r: dict) -> str:
    if not r["noisy"]:
        return ""
    spread = (r["measured_max"] - r["measured_min"]) / r["measured_median"]
    return f"noisy: range {spread:.0%} of median; rerun with --pairs {max(2 * r['pairs'], 15)}"


def _miss_note(r: dict) -> str:
    err = r["predicted_refined"] / r["measured_median"] - 1
    if abs(err) <= REFINED_TOLERANCE:
        return ""
    side = ("target-only step", r["target_only_error"])
    spec = ("speculative round/draft costs", r["speculative_error"])
    term, off = max([side, spec], key=lambda t: abs(t[1]))
    if term.startswith("speculative"):
        term = "draft character cost" if r["draft_share"] > 0.5 else "verify round cost"
    return f"{term} off by {off:+.0%} in the paired runs"
