"""`specdec report --engine NAME ...`: target-only against speculative generation run *by an engine*, in the
report's alternated pairs, workload, A/A floor and budget.

An engine is a black box behind `engines.base.Engine`: the report gives it a prompt, a seed, a length and a
configuration, and reads back the text, the token ids and whatever counts it exposes. So the sections are the
ones that need nothing more:

- counts (fixed work): every configuration over the workload runs once, at the report's temperature: drafted,
  accepted, target passes and tokens per pass where the engine reports them ("not reported by this engine"
  otherwise). The same calls time one generation per side, which sizes what follows.
- greedy (fixed work): at temperature 0, speculative output equals target-only output token for token (every
  engine, counts or not: an exact engine must reproduce the target's argmax).
- fit: the pairs the rest of the budget buys at the measured cost per pair. Rows that do not fit are dropped,
  each draft keeping its configuration with the best single-run ratio, and the report says so; where not even
  that fits, one line says how long a budget the model needs, before anything is timed.
- speedup (timed): per engine an A/A row and one row per configuration, all interleaved (`schedule.interleave`),
  figures and intervals as the main report's (`paired_sections.paired_figures`, the engine's own floor).

What needs specdec's own loop (exactness through the pipeline's p and q, the cost table and prediction, the
attribution, trees, adaptive k) is listed under "unavailable" with the reason.
"""

from __future__ import annotations

import math
import os
from typing import Callable

import numpy as np

from specdec.engines.base import Engine, EngineError, EngineResult, Spec
from specdec.measure import hygiene, schedule
from specdec.measure.clock import using
from specdec.measure.schedule import Budget, Runs, Section, interleave, run_sections
from specdec.report.engines import engine_render
from specdec.report import headline
from specdec.report.settings import WRITE_RESERVE, knobs_for, workload_runs
from specdec.report.paired_sections import paired_figures

WARM_TOKENS = 8  # the short generation that warms both sides before each visit
MIN_VERDICT_PAIRS = 3  # a row needs this many pairs for an interval the headline can judge
FIXED_SHARE = 0.35  # at most this share of the budget goes to the counts section's runs
UNAVAILABLE = {
    "exactness": "needs specdec's own loop: the chi-square check reads the draft's q and the target's p inside "
                 "the rule; an engine exposes only its output (greedy equality is checked instead)",
    "costs and prediction": "c and the model's terms are timed inside specdec's loop (a draft call, a verify "
                            "pass, a round); an engine's loop cannot be cut there",
    "attribution": "where a round spends its time needs specdec's own loop and its hooks",
    "trees and adaptive k": "token trees and the +2/-1 schedule are specdec's own loop's configurations",
}


def measure(engines: list[Engine], ks: list[int], quick: bool = False, pairs: int | None = None, threads: int = 1,
            device: str = "cpu", chars: int = 200, seed: int | None = None, prompt: str | None = None,
            temperature: float = 1.0, budget: float | None = None, cpus: list[int] | None = None,
            workload: str | os.PathLike | None = None, started: float | None = None, log=print,
            clock: Callable[[], float] | None = None) -> dict:
    """The engine report's document (keys: docs/engines.md), measured within `budget` seconds. clock: the
    decision clock its budget, fit and warm-ups read (default: the real one, `measure.clock.now`); with a fake
    one the plan (which rows fit, how many pairs) is fixed whatever the machine."""
    with using(clock):
        return _measure(engines, ks, quick, pairs, threads, device, chars, seed, prompt, temperature, budget, cpus,
                        workload, started, log)


def _measure(engines, ks, quick, pairs, threads, device, chars, seed, prompt, temperature, budget, cpus, workload,
             started, log) -> dict:
    knobs = knobs_for(quick, budget, pairs, [])  # no trees: an engine runs its own loop's chains
    work, runs = workload_runs(workload, prompt, seed, chars, ks, knobs["every"])
    clock = Budget(knobs["budget"], reserve=WRITE_RESERVE + 0.02 * knobs["budget"], start=started)
    startup = clock.elapsed() if started is not None else None
    affinity = hygiene.pin(cpus)
    with hygiene.threads_for_measuring(threads) as thread_info:
        machine = {**hygiene.machine_info(thread_info, device, affinity), "pinned": cpus is not None,
                   "backend": "+".join(e.name for e in engines)}
        state = _State(engines, [Spec(d, k) for d in _drafts(engines) for k in ks], ks, knobs, chars, temperature,
                       runs, log)
        doc = {"machine": machine, "settings": {
            "engines": [e.name for e in engines], "workload": {"name": work.name, "items": len(runs),
                                                              "seeds": sorted({s for _, s in runs}),
                                                              "runs": [[item.id, s] for item, s in runs]},
            "prompt": prompt, "chars": chars, "seed": seed, "temperature": temperature, "ks": ks,
            "drafts": _drafts(engines), "quick": quick, **knobs, "units": engines[0].units},
            "engines": {e.name: e.describe() for e in engines}, "unavailable": dict(UNAVAILABLE), "exactness": []}
        parts, spent = run_sections([Section("counts: every configuration once over the workload", state.counts),
                                     Section("greedy: speculative output against target-only, temperature 0",
                                             state.greedy),
                                     Section("fit: the pairs this budget buys", state.fit),
                                     Section("speedup: alternated pairs per engine, A/A floor among them",
                                             state.speedup, share=1.0)], clock, log)
    doc.update(parts)
    if startup is not None:
        spent.insert(0, {"section": "start-up: import, open the engines, check the inputs",
                         "seconds": round(startup, 2), "allotted": None})
    return _conclude(doc, spent, clock.elapsed(), log)


def _drafts(engines: list[Engine]) -> list[str]:
    return list(dict.fromkeys(d for e in engines for d in e.drafts()))


class _State:
    """What the sections share: the engines, the configurations, the workload runs and what was measured."""

    def __init__(self, engines, specs, ks, knobs, chars, temperature, runs, log):
        self.engines, self.specs, self.ks, self.knobs = engines, specs, ks, knobs
        self.chars, self.temperature, self.runs, self.log = chars, temperature, runs, log
        self.once: dict[tuple, list[float]] = {}  # (engine, draft, k) or (engine,) -> seconds of one run each
        self.keep: list[tuple[Engine, Spec]] = [(e, s) for e in engines for s in specs if s.draft in e.drafts()]
        self.results: dict[tuple, list[EngineResult]] = {}  # the same keys -> what each run returned
        self.calls: dict[str, int] = {}  # engine -> generations asked of it (requests, for a served engine)

    def gen(self, engine: Engine, spec: Spec | None, chars: int | None = None, temperature: float | None = None):
        t = self.temperature if temperature is None else temperature

        def call(run):
            self.calls[engine.name] = self.calls.get(engine.name, 0) + 1  # a served engine's request count
            return engine.generate(run[0].prompt, chars or self.chars, run[1], t, spec)

        return call

    def counts(self, seconds: float) -> dict:
        """Every configuration over the workload runs (as many runs as FIXED_SHARE of the budget affords after
        the first), each timed once; the counts summed over the runs."""
        rows, n_runs = [], len(self.runs)
        t0 = schedule.now()
        for i, run in enumerate(self.runs):
            for e in self.engines:
                self._once(e, None, run)
                for s in [s for e2, s in self.keep if e2 is e]:
                    self._once(e, s, run)
            per_run = (schedule.now() - t0) / (i + 1)
            if (i + 2) * per_run > FIXED_SHARE * self.knobs["budget"] and i + 1 < len(self.runs):
                n_runs = i + 1
                self.log(f"    counts over {n_runs} of {len(self.runs)} runs: one run of every configuration "
                         f"takes {per_run:.1f} s here")
                break
        for e, s in self.keep:
            rows.append({"engine": e.name, "draft": s.draft, "k": s.k, **_totals(self.results[e.name, s.draft, s.k])})
        return {"acceptance": rows, "counts_runs": n_runs}

    def _once(self, engine: Engine, spec: Spec | None, run) -> EngineResult:
        key = (engine.name,) if spec is None else (engine.name, spec.draft, spec.k)
        t0 = schedule.now()
        out = self.gen(engine, spec)(run)
        self.once.setdefault(key, []).append(schedule.now() - t0)
        self.results.setdefault(key, []).append(out)
        return out

    def greedy(self, seconds: float) -> dict:
        """Per configuration, the first run at temperature 0: speculative ids against target-only ids."""
        run = self.runs[0]
        rows = []
        for e in self.engines:
            plain = self.gen(e, None, temperature=0.0)(run)
            for e2, s in self.keep:
                if e2 is e:
                    spec = self.gen(e, s, temperature=0.0)(run)
                    rows.append({"engine": e.name, "draft": s.draft, "k": s.k, **_equality(plain, spec)})
        return {"greedy_equality": rows}

    def fit(self, seconds: float) -> dict:
        """Drop rows until every row left gets MIN_VERDICT_PAIRS pairs in the time left (the fixed work done),
        each (engine, draft) keeping its best single-run configuration; say what the model needs otherwise."""
        pairs = max(MIN_VERDICT_PAIRS, 1)
        floor = {e.name: 2 * float(np.mean(self.once[e.name,])) for e in self.engines}
        cost = {(e.name, s.draft, s.k): float(np.mean(self.once[e.name,])) + float(np.mean(self.once[e.name, s.draft, s.k]))
                for e, s in self.keep}
        def need(keep):
            return pairs * (sum(floor[e.name] for e in self.engines) + sum(cost[e.name, s.draft, s.k] for e, s in keep))
        dropped = []
        if need(self.keep) > seconds:
            best = {}
            for e, s in self.keep:
                ratio = float(np.mean(self.once[e.name,])) / float(np.mean(self.once[e.name, s.draft, s.k]))
                if (e.name, s.draft) not in best or ratio > best[e.name, s.draft][0]:
                    best[e.name, s.draft] = (ratio, (e, s))
            kept = [es for _, es in best.values()]
            dropped = [f"{e.name} {s.draft} k={s.k}" for e, s in self.keep if (e, s) not in kept]
            self.keep = kept
        needed = need(self.keep)
        out = {"fit": {"pairs_per_row": pairs, "seconds_left": round(seconds, 1), "seconds_needed": round(needed, 1),
                       "dropped": dropped}}
        if dropped:
            self.log(f"    this budget cannot time every configuration {pairs} times: kept each draft's best "
                     f"single-run k, dropped {', '.join(dropped)}")
        if needed > seconds:
            total = self.knobs["budget"] - seconds + needed
            out["fit"]["budget_needed"] = math.ceil(total)
            self.log(f"WARNING: this budget gives no verdict for this model: {pairs} pairs of every row need about "
                     f"{needed:.0f} s and {seconds:.0f} s are left; give --budget {math.ceil(total)} or more")
        return out

    def speedup(self, seconds: float) -> dict:
        kn = self.knobs
        warm = min(WARM_TOKENS, self.chars)
        floors = {e.name: Runs((e.name, "A/A"), {"a": self.gen(e, None), "b": self.gen(e, None)}, ("a", "b"),
                               warm=self.gen(e, None, warm), items=self.runs) for e in self.engines}
        rows = [Runs((e.name, s.draft, s.k), {"target": self.gen(e, None), "spec": self.gen(e, s)}, ("target", "spec"),
                     warm=self.gen(e, s, warm), items=self.runs) for e, s in self.keep]
        incomplete = None
        try:
            interleave(list(floors.values()) + rows, seconds, kn["min_pairs"], kn["precision"], "cpu", self.log,
                       "speedup ")
        except EngineError as exc:  # what was timed before it stays, marked incomplete; the report says so
            incomplete = f"{type(exc).__name__}: {exc}"
            self.log(f"the run stopped: {incomplete}")
            rows = [r for r in rows if _trim(r)]
            floors = {n: f for n, f in floors.items() if _trim(f)}
        noise = {}
        for name, f in floors.items():
            fig = paired_figures(f, "a", "b")
            noise[name] = {**fig, "median": fig["measured_median"], "min": fig["measured_min"],
                           "max": fig["measured_max"], "drift": 0.0, "between_run": None}
        docs = []
        for r in rows:
            name, draft, k = r.key
            if name not in noise:
                continue
            docs.append({"engine": name, "draft": draft, "k": k, "tree": None,
                         **paired_figures(r, "target", "spec", noise[name])})
        first = next(iter(noise), None)
        out = {"noise_floor": noise.get(first), "noise_floors": noise, "speedup": docs, "calls": dict(self.calls)}
        return out if incomplete is None else {**out, "incomplete": incomplete}


def _trim(r: Runs) -> bool:
    """Keep only a row's whole visits (a visit the failure cut short timed one side only); False when none."""
    for name in r.times:
        del r.times[name][r.visits:]
    del r.visit_items[r.visits:]
    return r.visits > 0


def _totals(results: list[EngineResult]) -> dict:
    """Counts summed over runs; None for a count any run did not report."""
    out = {"runs": len(results), "tokens": sum(len(r.tokens) or 0 for r in results)}
    for key in ("drafted", "accepted", "target_passes"):
        vals = [getattr(r, key) for r in results]
        out[key] = None if any(v is None for v in vals) else int(sum(vals))
    out["acceptance"] = (out["accepted"] / out["drafted"] if out["accepted"] is not None and out["drafted"] else None)
    out["chars_per_pass"] = (out["tokens"] / out["target_passes"] if out["target_passes"] else None)
    per = [r.accepted_per_position for r in results]
    out["accepted_per_position"] = (None if any(p is None for p in per)
                                    else np.sum([np.pad(p, (0, max(map(len, per)) - len(p))) for p in per],
                                                axis=0).astype(int).tolist())
    return out


def _equality(plain: EngineResult, spec: EngineResult) -> dict:
    """Speculative against target-only output at temperature 0: on ids where both have them, else on text."""
    a, b = (plain.tokens, spec.tokens) if plain.tokens and spec.tokens else (plain.text, spec.text)
    first = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)
    if first is None and len(a) != len(b):
        first = min(len(a), len(b))
    return {"equal": first is None, "compared": "ids" if plain.tokens and spec.tokens else "text",
            "length": len(a), "first_difference": first}


def _conclude(doc: dict, spent: list[dict], wall: float, log) -> dict:
    doc["machine"]["load_end"] = hygiene.load_average()
    hygiene.end_of_run(doc["machine"])
    doc["sections"] = spent
    doc["wall_seconds"] = wall
    machine = hygiene.warnings(doc["machine"], doc.get("noise_floor"), False, None)
    if "openai" in doc["settings"]["engines"]:  # a server on this machine is the engine, not another process
        machine = [w for w in machine if not w.startswith(hygiene.BUSY_PREFIX)]
    doc["warnings"] = machine + _warnings(doc)
    for w in doc["warnings"]:
        log(w)
    doc["headline"] = engine_render.headline_facts(doc)
    return doc


def _warnings(doc: dict) -> list[str]:
    out = []
    fit = doc.get("fit") or {}
    if fit.get("budget_needed"):
        out.append(f"WARNING: this budget gives no verdict for this model; give --budget {fit['budget_needed']} "
                   "or more (the pairs every row needs, at the cost per pair measured here).")
    few = min([f["pairs"] for f in doc.get("noise_floors", {}).values()] + [r["pairs"] for r in doc["speedup"]],
              default=0)
    if few < headline.MIN_PAIRS:
        out.append(f"WARNING: only {few} timed pair(s) for some rows: no re-run interval, so no verdict for them.")
    for g in doc.get("greedy_equality", []):
        if not g["equal"]:
            out.append(f"WARNING: {g['engine']} {g['draft']} k={g['k']}: greedy speculative output differs from "
                       f"target-only at position {g['first_difference']}: the engine's speculation is not exact "
                       "here (or its two paths compute in different precision).")
    return out
