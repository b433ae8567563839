"""`specdec report`: measure everything on this machine within a time budget, then write tables and figure.

The report is a list of sections (`schedule.Section`), each a function returning its part of the JSON
document, run by one scheduler against a budget in seconds: fixed work first (building the drafts, the
exactness draws, the deterministic acceptance counts), then the timed sections, each given its share of the
time left -- the cost table, the paired speedups (with the A/A noise floor among them), adaptive k, greedy.
Measurement and presentation (`render`) are separate: every table, finding and the figure are rendered from
the document, so a `report.json` from another machine or commit renders the same way and `specdec compare`
reads the same keys. `write` puts the files in place atomically.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import signal
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from . import exactness, hygiene, render, stats, timing
from .decode import generate, speculative_generate
from .drafts import DRAFTS, make_draft
from .model import GPT
from .schedule import Budget, Runs, Section, interleave, run_sections

REPORT_PROMPT = "ROMEO:"
DEFAULT_KS = (1, 2, 4, 8)
ADAPTIVE = {"start_k": 4, "k_max": 16}  # the adaptive-k rows: the +2 / -1 schedule from k = 4, at most 16
# budget: seconds for the whole report. min_pairs: alternated pairs every speedup row gets before the rest of
# the time goes to the widest rows; precision: a row stops once its re-run interval is narrower than this
# fraction of its median. samples: exactness draws per draft. cost_samples: most round-robin cost samples
# (fewer when the costs' share of the budget runs out), cost_calls: calls per sample; term_calls: rounds per
# sample of each refined-model term (see timing.loop_sampler); min_triples: rotated runs per adaptive row.
FULL = {"budget": 300.0, "min_pairs": 5, "precision": 0.03, "samples": 20_000, "cost_samples": 40,
        "cost_calls": 20, "term_calls": 10, "min_triples": 3}
QUICK = {"budget": 60.0, "min_pairs": 3, "precision": 0.08, "samples": 5_000, "cost_samples": 12,
         "cost_calls": 10, "term_calls": 4, "min_triples": 2}
SHARES = {"costs": 0.12, "speedup": 0.70, "adaptive": 0.13, "greedy": 0.05}  # of the time the fixed work leaves
NOISY_FACTOR = 2.0  # a row whose interval is this many times wider than the noise floor's is noisy
WARM_CHARS = 40  # characters of the short generation that warms both models before each visit


@dataclass
class _Report:
    """What the sections share while a report is measured."""

    target: GPT
    drafts: list[str]
    ks: list[int]
    knobs: dict
    device: str
    chars: int
    seed: int
    prompt: str
    temperature: float
    log: object
    objs: dict = field(default_factory=dict)
    gens: dict = field(default_factory=dict)
    samplers: dict = field(default_factory=dict)
    costs: timing.Costs | None = None
    rows: list = field(default_factory=list)

    def spec(self, name: str, k: int, chars: int | None = None, temperature: float | None = None, **kw):
        t = self.temperature if temperature is None else temperature
        return lambda: speculative_generate(self.target, self.objs[name], self.prompt, chars or self.chars, k,
                                            self.seed, t, **kw)

    def plain(self, chars: int | None = None, temperature: float | None = None):
        t = self.temperature if temperature is None else temperature
        return lambda: generate(self.target, self.prompt, chars or self.chars, self.seed, t)


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
    budget: float | None = None,
    cpus: list[int] | None = None,
    log=print,
) -> dict:
    """Run every section within `budget` seconds and return the report document (schema in README.md).

    pairs: the minimum of alternated pairs per speedup row (default 5, quick 3). cpus: pin the process to
    these CPUs first. Torch's threads are set to `threads` (inter-op too where torch allows) and recorded.
    """
    knobs = dict(QUICK if quick else FULL)
    if budget is not None:
        knobs["budget"] = float(budget)
    if pairs is not None:
        knobs["min_pairs"] = pairs
    clock = Budget(knobs["budget"], reserve=2.0 + 0.02 * knobs["budget"])
    affinity = hygiene.pin(cpus)
    threads_before = torch.get_num_threads()
    thread_info = hygiene.set_threads(threads)
    machine = hygiene.machine_info(thread_info, device, affinity)
    run = _Report(target.to(device), list(drafts or DRAFTS), sorted(set(ks or DEFAULT_KS)), knobs, device, chars,
                  seed, prompt, temperature, log)
    sections = [
        Section("drafts", lambda s: _setup(run)),
        Section(f"exactness: {knobs['samples']} draws per draft", lambda s: _exactness(run)),
        Section("acceptance (deterministic given the seed)", lambda s: _acceptance(run)),
        Section("costs: round-robin samples", lambda s: _costs(run, s), SHARES["costs"]),
        Section("speedup: alternated pairs, rows interleaved", lambda s: _speedup(run, s), SHARES["speedup"]),
        Section("adaptive k: rotated triples", lambda s: _adaptive(run, s), SHARES["adaptive"]),
        Section("greedy (temperature 0)", lambda s: _greedy(run, s), SHARES["greedy"]),
    ]
    doc = {"machine": machine, "settings": {
        "prompt": prompt, "chars": chars, "seed": seed, "temperature": temperature, "ks": run.ks,
        "drafts": run.drafts, "quick": quick, **knobs}}
    try:
        parts, spent = run_sections(sections, clock, log)
    finally:
        torch.set_num_threads(threads_before)  # a library call leaves the caller's setting as it found it
    doc.update(parts)
    doc["machine"]["load_end"] = hygiene.load_average()
    doc["sections"] = spent
    doc["wall_seconds"] = clock.elapsed()
    doc["warnings"] = hygiene.warnings(doc["machine"], doc.get("noise_floor"))
    for w in doc["warnings"]:
        log(w)
    return doc


def _setup(run: _Report) -> dict:
    for name in run.drafts:
        run.log(f"    building draft {name}")
        run.objs[name] = make_draft(name, run.target)
    # The models and tables live until the end: the collector need never walk them again (the n-gram draft's
    # millions of entries make a full collection cost ~0.1 s, whenever it fires).
    gc.collect()
    gc.freeze()
    return {}


def _exactness(run: _Report) -> dict:
    n = run.knobs["samples"]
    return {"exactness": [exactness.target_row(run.target, n, run.seed)] + exactness.verify(
        run.target, run.objs, k=max(run.ks), samples=n, seed=run.seed)}


def _acceptance(run: _Report) -> dict:
    rows = []
    for name in run.drafts:
        for k in run.ks:
            st = run.spec(name, k)().stats
            run.gens[name, k] = st
            fit = stats.acceptance_alpha(st.accepted_per_position, k)
            rows.append({"draft": name, "k": k, "acceptance": st.acceptance, "chars_per_pass": st.chars_per_pass,
                         "target_passes": st.target_passes, "chars": run.chars, "drafted": st.drafted,
                         "alpha": fit.alpha, "expected_length": stats.expected_length(fit.alpha, k),
                         "geometric_p": fit.p_value, "bunched": bool(fit.bunched),
                         "accepted_per_position": st.accepted_per_position})
    return {"acceptance": rows}


def _costs(run: _Report, seconds: float) -> dict:
    """The cost table, and the refined model's terms per draft x k, measured before any speedup pair: from
    these and the deterministic counts comes the prediction made before the measurement it predicts."""
    kn = run.knobs
    position = len(run.prompt) + run.chars // 2  # the generation's mean position: attention grows with it
    for name in run.drafts:
        for k in sorted(set(run.ks) | {4}):
            st = run.gens.get((name, k))
            full = st.accepted_per_position[k] / st.draft_calls if st and st.draft_calls else 0.0
            run.samplers[name, k] = timing.loop_sampler(run.target, run.objs[name], k, run.temperature, run.device,
                                                        kn["term_calls"], all_accepted=full, position=position)
    c = timing.measure_costs(run.target, run.objs, run.ks, samples=kn["cost_samples"], number=kn["cost_calls"],
                             temperature=run.temperature, device=run.device, samplers=run.samplers,
                             seconds=seconds)
    run.costs = c
    return {"costs": {
        "samples": c.samples,
        "target_pass_us": c.target_pass_us,
        "verify_pass_us": {str(n): v for n, v in c.verify_pass_us.items()},
        "verify_ratio_samples": {str(n): v for n, v in c.verify_ratio_samples.items()},
        "step_us": c.step_us,
        "round_us": {str(k): v for k, v in c.round_us.items()},
        "drafts": {n: {"char_us": c.draft_char_us[n], "char_us_range": c.char_range[n], "c": c.c(n),
                       "c_range": c.c_range(n), "c_samples": c.c_samples[n],
                       "weight_bytes": run.objs[n].weight_bytes()} for n in run.drafts},
        "draft_k": c.draft_k,
        "loop": {n: {str(k): {"char_us": c.loop_char_us[n][k], "round_us": c.loop_round_us[n][k],
                              "step_us": float(np.median(c.loop_samples[n, k][:, 0]))}
                     for k in run.ks} for n in run.drafts},
    }}


def _summary_doc(s: stats.Summary, prefix: str = "measured") -> dict:
    return {f"{prefix}_median": s.median, f"{prefix}_min": s.min, f"{prefix}_max": s.max}


def _speedup(run: _Report, seconds: float) -> dict:
    """Every (draft, k) row and the A/A noise floor, their pairs interleaved over the whole section."""
    kn = run.knobs
    floor = Runs("noise floor (A/A)", {"a": run.plain(), "b": run.plain()}, ("a", "b"), warm=run.plain(WARM_CHARS))
    rows = [Runs((name, k), {"target": run.plain(), "spec": run.spec(name, k)}, ("target", "spec"),
                 warm=run.spec(name, k, WARM_CHARS), between=run.samplers[name, k])
            for name in run.drafts for k in run.ks]
    interleave([floor] + rows, seconds, kn["min_pairs"], kn["precision"], run.device, run.log, "speedup ")
    f = stats.summarize(floor.ratios())
    noise = {"median": f.median, "ci_low": f.ci_low, "ci_high": f.ci_high, "pairs": f.n, "min": f.min,
             "max": f.max, "width": f.width, "ratios": floor.ratios().tolist()}
    docs = [_speedup_row(run, r, f.width) for r in rows]
    run.rows = docs
    return {"noise_floor": noise, "speedup": docs, "recommendations": recommend(docs)}


def _predictions(st, terms: np.ndarray) -> stats.Summary:
    """The refined model per sample of its three terms (step, drafted character, round; µs), summarised."""
    return stats.summarize([stats.refined_speedup(st.chars, st.target_passes, st.drafted, step, rnd, char)
                            for step, char, rnd in terms])


def _speedup_row(run: _Report, r: Runs, floor_width: float) -> dict:
    """One row of tables 3 and 5: the measured ratio; the prediction made from the cost table before any pair
    (predicted_before); and the cost accounting from terms sampled after each pair (predicted_refined)."""
    name, k = r.key
    st, costs = run.gens[name, k], run.costs
    s = stats.summarize(r.ratios())
    before_terms = costs.loop_samples[name, k]
    after_terms = np.asarray(r.extra, dtype=float)
    before, after = _predictions(st, before_terms), _predictions(st, after_terms)
    step_us, char_us, round_us = (float(np.median(after_terms[:, i])) for i in range(3))
    terms = stats.refined_terms(st.chars, st.target_passes, st.drafted, step_us, round_us, char_us)
    # What the paired runs imply for each side, against what the cost accounting assumed: names the term off.
    implied_step = float(np.median(r.times["target"])) * 1e6 / st.chars
    implied_spec = float(np.median(r.times["spec"])) * 1e6
    return {
        "draft": name, "k": k, "chars_per_pass": st.chars_per_pass,
        "predicted": stats.predicted_speedup(st.chars_per_pass, k, costs.c(name)),
        "predicted_before": before.median, "predicted_before_ci_low": before.ci_low,
        "predicted_before_ci_high": before.ci_high,
        "predicted_refined": after.median, "predicted_refined_ci_low": after.ci_low,
        "predicted_refined_ci_high": after.ci_high,
        **_summary_doc(s), "ci_low": s.ci_low, "ci_high": s.ci_high, "pairs": s.n, "width": s.width,
        "noisy": bool(s.width > NOISY_FACTOR * floor_width and s.width > run.knobs["precision"]),
        "ratios": r.ratios().tolist(),
        "terms_us": {"step": step_us, "draft_char": char_us, "round": round_us},
        "before_terms_us": {key: float(np.median(before_terms[:, i]))
                            for i, key in enumerate(("step", "draft_char", "round"))},
        "target_only_error": implied_step / step_us - 1.0,
        "speculative_error": implied_spec / terms["speculative_us"] - 1.0,
        "draft_share": terms["draft_share"],
    }


def _adaptive(run: _Report, seconds: float) -> dict:
    """Adaptive k against each draft's best fixed k and target-only, in rotated triples (all three ratios
    come from the same moments), the drafts' triples interleaved."""
    kn = run.knobs
    rows, fixed = [], {}
    for name in run.drafts:
        fixed[name] = max((r for r in run.rows if r["draft"] == name), key=lambda r: r["measured_median"])["k"]
        adaptive = run.spec(name, ADAPTIVE["start_k"], adaptive=True, k_max=ADAPTIVE["k_max"])
        rows.append(Runs(name, {"target": run.plain(), "fixed": run.spec(name, fixed[name]), "adaptive": adaptive},
                         ("target", "adaptive"), warm=run.spec(name, ADAPTIVE["start_k"], WARM_CHARS)))
    interleave(rows, seconds, kn["min_triples"], kn["precision"], run.device, run.log, "adaptive ")
    out = []
    for r in rows:
        st = r.fns["adaptive"]().stats
        vs_target, vs_fixed = stats.summarize(r.ratios()), stats.summarize(r.ratios("fixed", "adaptive"))
        out.append({"draft": r.key, **ADAPTIVE, "mean_k": st.mean_k, "acceptance": st.acceptance,
                    "chars_per_pass": st.chars_per_pass, "target_passes": st.target_passes,
                    **_summary_doc(vs_target), "ci_low": vs_target.ci_low, "ci_high": vs_target.ci_high,
                    "best_fixed_k": fixed[r.key], "vs_fixed_median": vs_fixed.median, "vs_fixed_min": vs_fixed.min,
                    "vs_fixed_max": vs_fixed.max, "vs_fixed_ci_low": vs_fixed.ci_low,
                    "vs_fixed_ci_high": vs_fixed.ci_high, "pairs": vs_target.n})
    return {"adaptive": out}


def _greedy(run: _Report, seconds: float) -> dict:
    """The best sampled configuration again at temperature 0, where acceptance is argmax agreement."""
    best = max(run.rows, key=lambda r: r["measured_median"])
    name, k = best["draft"], best["k"]
    st = run.spec(name, k, temperature=0.0)().stats
    r = Runs("greedy", {"target": run.plain(temperature=0.0), "spec": run.spec(name, k, temperature=0.0)},
             ("target", "spec"), warm=run.spec(name, k, WARM_CHARS, temperature=0.0))
    interleave([r], seconds, run.knobs["min_pairs"], run.knobs["precision"], run.device, run.log, "greedy ")
    s = stats.summarize(r.ratios())
    return {"greedy": {"draft": name, "k": k, "acceptance": st.acceptance, "chars_per_pass": st.chars_per_pass,
                       "target_passes": st.target_passes, **_summary_doc(s), "ci_low": s.ci_low,
                       "ci_high": s.ci_high, "pairs": s.n}}


def recommend(rows: list[dict]) -> dict:
    """Per draft: the k with the best prediction made before the run, and the k with the best measured
    speedup."""
    out = {}
    for name in dict.fromkeys(r["draft"] for r in rows):
        mine = [r for r in rows if r["draft"] == name]
        bp = max(mine, key=lambda r: r["predicted_before"])
        bm = max(mine, key=lambda r: r["measured_median"])
        out[name] = {"best_k_predicted": bp["k"], "predicted": bp["predicted_before"],
                     "best_k_measured": bm["k"], "measured": bm["measured_median"]}
    return out


def check_out_dir(out_dir: str | os.PathLike) -> Path:
    """The output folder, created if need be; a ValueError before anything is measured if it cannot be."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out {str(out)!r} is a file, not a folder (give a folder for report.md, report.json, "
                         f"speedup.png)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=out).close()
    except OSError as exc:
        raise ValueError(f"--out {str(out)!r} is not a writable folder ({exc.strerror})") from None
    return out


def write_atomic(path: Path, text: str) -> None:
    """Write one text file all-or-nothing: a temporary file beside it, then a rename."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}-")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write(doc: dict, out_dir: str | os.PathLike, markdown: str) -> list[Path]:
    """Write report.md, speedup.png and report.json into out_dir, each all-or-nothing.

    Everything is rendered into a temporary folder first, then renamed into place with SIGINT held off, so an
    interrupt leaves either the earlier report or the new one, never a half-written file.
    """
    out = check_out_dir(out_dir)
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
