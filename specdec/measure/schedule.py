"""The report's clock: a time budget shared by sections, and alternated runs spent where they buy the most.

A report is a list of `Section`s that `run_sections` runs in order. A section with a `share` gets that share of
whatever budget is left when its turn comes (shares of the sections still to run are renormalised), so time a
section does not use, or fixed work that ran long, moves to the ones after it; a section without a share is
fixed work (building drafts, deterministic counts) and simply runs.

Timed comparisons are `Runs`: a row of callables (target-only and speculative generation, say) that a visit
warms up (by time) and then runs once each, the order rotating from visit to visit (A B, B A, ...).
`interleave` visits many rows in turn -- every row once per round, rows in a rotating order -- so that a row's
pairs are spread over the whole section instead of bunched into one stretch of the machine's load. Every row
gets `min_visits`; after that each round goes to the half of the rows whose re-run interval is widest
relative to its median, and a row stops once that width is below `precision`. Before each visit the clock is
checked against the row's typical visit time, so a section ends on time on a slow machine as on a fast one.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from specdec.measure import stats, timing
# Every decision of this module (budgets, deadlines, visit times, the warm-up; not the timed calls, which
# `timing` measures) reads the one decision clock: a test hands the report a fake one (`clock.using`), so that
# what a schedule decides is the same on a fast and on a loaded machine.
from specdec.measure.clock import now


@dataclass
class Section:
    name: str | Callable[[], str]  # a callable: the label read when the section starts (what earlier ones changed)
    run: Callable[[float], dict]  # seconds allotted -> its part of the report document
    share: float = 0.0  # share of the time left when its turn comes; 0 = fixed work, runs to completion


class Budget:
    """Seconds for a whole report, counted from construction; `reserve` is kept back for writing files."""

    def __init__(self, seconds: float, reserve: float = 0.0, start: float | None = None):
        """start: a `clock.now()` reading to count from (default: now) -- a command's own
        start, so that what it did before measuring (importing torch, loading the target) is inside its budget."""
        if not seconds > 0:
            raise ValueError(f"the budget must be a positive number of seconds, got {seconds}")
        self.seconds = seconds
        self.reserve = reserve
        self.start = now() if start is None else start

    def elapsed(self) -> float:
        return now() - self.start

    def left(self) -> float:
        return max(0.0, self.seconds - self.reserve - self.elapsed())


def run_sections(sections: list[Section], budget: Budget, log: Callable[[str], None] = print) -> tuple[dict, list]:
    """Run every section in order; returns (the merged document parts, time spent per section)."""
    doc: dict = {}
    spent = []
    for i, sec in enumerate(sections):
        shares = sum(s.share for s in sections[i:])
        allotted = budget.left() * sec.share / shares if sec.share else None
        note = f" ({allotted:.0f} s of the budget)" if allotted is not None else ""
        name = sec.name() if callable(sec.name) else sec.name
        log(f"[{i + 1}/{len(sections)}] {name}{note}")
        t0 = now()
        doc.update(sec.run(allotted if allotted is not None else budget.left()))
        spent.append({"section": name, "seconds": round(now() - t0, 2),
                      "allotted": None if allotted is None else round(allotted, 2)})
    return doc, spent


@dataclass
class Runs:
    """Alternated runs of one row of the report: `fns` run once each per visit, their order rotating.

    Visit i works on items[i % len(items)] (a workload's (prompt, seed) runs, say): every fn and the warm-up
    are called with it, so both sides of a pair always do the same work.
    """

    key: object  # what the row is, e.g. ("ngram", 8) or "noise floor"
    fns: dict[str, Callable[[object], object]]
    ratio: tuple[str, str]  # (numerator, denominator) of the row's figure: their times' per-visit ratio
    warm: Callable[[object], object] | None = None  # run before each visit for `warm_seconds` (not timed)
    between: Callable[[], object] | None = None  # run after each visit; its results kept in `extra`
    items: list = field(default_factory=lambda: [None])
    warm_seconds: float = 0.03
    times: dict[str, list[float]] = field(default_factory=dict)
    extra: list = field(default_factory=list)
    visit_seconds: list[float] = field(default_factory=list)
    visit_items: list[int] = field(default_factory=list)  # which item each visit worked on (its index)

    @property
    def visits(self) -> int:
        return len(self.visit_seconds)

    def ratios(self, num: str | None = None, den: str | None = None) -> np.ndarray:
        """Per-visit time ratios num/den (the row's `ratio` by default), in the order measured."""
        num, den = num or self.ratio[0], den or self.ratio[1]
        return np.asarray(self.times[num]) / np.asarray(self.times[den])

    def width(self) -> float:
        """Relative width of the re-run interval of the row's figure, the ratio of total times (inf before
        three visits)."""
        if self.visits < 3:
            return float("inf")
        num, den = self.ratio
        return stats.summarize_pairs(self.times[num], self.times[den]).width

    def visit(self, device: str = "cpu") -> None:
        gc.collect(1)  # outside the timed region: young garbage gone (a full collection walks every table: ~0.1 s)
        t0 = now()
        i = self.visits % len(self.items)
        item = self.items[i]
        if self.warm is not None:
            timing.warm_up(lambda: self.warm(item), self.warm_seconds, device)  # by the decision clock
        names = list(self.fns)
        shift = self.visits % len(names)
        for name in names[shift:] + names[:shift]:
            self.times.setdefault(name, []).append(timing.timed(lambda fn=self.fns[name]: fn(item), device))
        self.visit_items.append(i)
        if self.between is not None:
            self.extra.append(self.between())
        self.visit_seconds.append(now() - t0)


def interleave(rows: list[Runs], seconds: float, min_visits: int, precision: float, device: str = "cpu",
               log: Callable[[str], None] = print, label: str = "") -> int:
    """Visit `rows` in rounds until each is precise enough or `seconds` run out; returns the rounds made.

    Rounds 1..min_visits visit every row; later rounds the widest half of the rows not yet within
    `precision` (at least one). The order rotates by one row each round, so no row always follows the same
    one. A visit starts only if the row's median visit time still fits before the deadline -- except in the
    first round, which always runs, so that every row has a figure.
    """
    deadline = now() + seconds
    rnd = 0
    while True:
        if rnd < min_visits:
            active = list(rows)
        else:
            widths = {id(r): r.width() for r in rows}
            open_rows = sorted((r for r in rows if widths[id(r)] > precision), key=lambda r: -widths[id(r)])
            active = open_rows[: max(1, len(open_rows) // 2)]
            if not active:
                return rnd
            widest = active[0]
            log(f"    {label}round {rnd + 1}: {len(open_rows)} row(s) wider than {precision:.0%}; widest "
                f"{widest.key} at {widths[id(widest)]:.1%}; {deadline - now():.0f} s left")
        shift = rnd % len(active)
        typical = np.median([v for r in rows for v in r.visit_seconds]) if any(r.visits for r in rows) else 0.0
        for row in active[shift:] + active[:shift]:
            est = float(np.median(row.visit_seconds)) if row.visits else typical
            if rnd and now() + est > deadline:  # the first round always runs: every row has a figure
                return rnd
            row.visit(device)
        rnd += 1
