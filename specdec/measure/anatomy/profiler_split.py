"""Splitting a run's time into categories: labelled spans timed directly, the rest by torch.profiler.

A run's sampling code, rule and draft run under labels (`label`), timed with perf_counter; the rest -- the
target's forward and the loop around it -- is split by torch.profiler (self CPU time of aten ops in categories,
and a residual no op accounts for: Python and dispatch), and an ONNX Runtime run by ONNX Runtime's profiler,
both in proportion, since a profiler stretches what it watches. The draft has a category of its own so that a
round's target work is not mixed with the draft's: a bigram draft is numpy the profiler cannot see at all.
torch.profiler is imported where a profile starts, so `import specdec` does not pay for it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Callable

import numpy as np
import torch

from specdec.measure import hygiene
from specdec.measure.clock import measured

# Categories of `attribution`, in the order they are printed. The last is the residual.
RESIDUAL = "framework dispatch and Python"
SESSION = "onnx runtime session"  # label of a whole ONNX Runtime run (onnx backend), split by its own profiler
CATEGORIES = ("matmul", "attention", "elementwise", "tensor creation", "logits to sample", "the rule", "draft",
              RESIDUAL)
LABELS = ("logits to sample", "the rule", "draft", SESSION)  # record_function labels: their whole span is theirs
_MATMUL = {"aten::mm", "aten::addmm", "aten::bmm", "aten::matmul", "aten::linear", "aten::baddbmm", "aten::mv",
           "aten::dot", "aten::addmv"}
_CREATION = {"aten::empty", "aten::empty_strided", "aten::empty_like", "aten::zeros", "aten::zeros_like",
             "aten::ones", "aten::ones_like", "aten::full", "aten::arange", "aten::cat", "aten::stack",
             "aten::copy_", "aten::to", "aten::_to_copy", "aten::clone", "aten::contiguous", "aten::lift_fresh",
             "aten::scalar_tensor", "aten::tensor", "aten::as_strided", "aten::view", "aten::_unsafe_view",
             "aten::reshape", "aten::transpose", "aten::t", "aten::slice", "aten::select", "aten::narrow",
             "aten::split", "aten::expand", "aten::unsqueeze", "aten::squeeze", "aten::detach", "aten::alias",
             "aten::resolve_conj", "aten::resolve_neg", "aten::index_select", "aten::embedding", "aten::index",
             "aten::numpy_T", "aten::_reshape_alias", "aten::permute", "aten::fill_", "aten::zero_"}


def category(name: str) -> str:
    """The category of an aten op by its name; anything neither matmul, attention nor a creation, copy, view
    or indexing op is arithmetic on elements or rows (add, mul, gelu, layer_norm, softmax, where, ...)."""
    if name in _MATMUL:
        return "matmul"
    if "attention" in name:
        return "attention"
    if name in _CREATION:
        return "tensor creation"
    return "elementwise"


def attribute(run: Callable[[object], int], repeats: int = 9, per_event_us: float | None = None,
              inside: Callable[[], contextlib.AbstractContextManager] | None = None) -> dict:
    """Split `run`'s time into CATEGORIES, µs per unit of work: labelled spans timed directly, the rest split by
    torch.profiler.

    run(mode) does one block of work and returns its units (steps, rounds, calls), wrapping its sampling, rule,
    draft and session code in `label(mode, LABEL)`: mode False runs bare, "time" times each label's span with
    perf_counter (about a microsecond a span) and True records it for torch.profiler. After one discarded
    bare block, each repeat runs a bare and a timed block (in turn first); then `repeats` profiled blocks run.
    The bare blocks give `measured_us` (median), the median timed block the split.
    - A label's µs are its spans in that timed block.
    - The rest (the target's forward and the loop around it) is that block's wall time less the spans. The
      profiler splits it: every op outside the labels gives its self CPU time to the category of its outermost
      aten op (the call the Python code made: linear's t and mm are matmul, SDPA's where and empty are
      attention, layer_norm's empty is elementwise); what it attributes to no op -- Python and dispatch between
      ops -- less its own cost (the events it recorded outside the labels times what one costs it here,
      `profiler_cost_us` or `per_event_us`: `profiler_us`), is RESIDUAL. Those profiled µs, which the profiler
      stretches (`stretch`: profiled rest over timed rest), are scaled onto the timed rest in proportion.
    - A SESSION span (the onnx backend's pass with its softmax or sampling, one ONNX Runtime run) is split the
      same way by ONNX Runtime's own profiler, which `inside()` turns on around the profiled blocks
      (`ort_profile.kernel_profile`: category -> µs of its kernels, and what that profiler added, measured on
      a chain of tiny kernels, which is taken out of the profiled span): its kernels' µs in proportion, and
      the rest of the span -- the runtime's executor, the binding, the Python around the run -- to RESIDUAL.
    So the categories sum to `accounted_us`, the median timed block's wall time, which is held against
    `measured_us`: how much timing the spans disturbed the work. As everywhere in specdec, that comparison is
    a ratio of neighbours: `accounted_ratio` is the median over repeats of a timed block's time over the bare
    block beside it, which a burst of load spanning several blocks cannot bias as it can the two medians.
    """
    return attribute_alternated({"run": run}, repeats, per_event_us, inside)["run"]


def attribute_alternated(runs: dict[str, Callable[[object], int]], repeats: int = 9,
                         per_event_us: float | None = None,
                         inside: Callable[[], contextlib.AbstractContextManager] | None = None) -> dict[str, dict]:
    """`attribute` of several runs in one alternated run: name -> its scope.

    Their bare and timed blocks interleave -- each repeat runs every run's bare block, one after the other in
    the order given, and then every run's timed block (the timed ones first in every other repeat) -- so slow
    drift and a burst of load land on all of them alike, and the difference between two runs is a difference
    of neighbours. The profiled blocks, which only give proportions, run one run
    at a time, each under its own `inside()`: an inner profiler's kernels belong to the run it watched.
    """
    for run in runs.values():
        run(False)  # discarded: first calls build caches (a table draft's tempered rows, onnx bindings)
    per_event = profiler_cost_us() if per_event_us is None else per_event_us
    blocks = _timed_blocks(runs, repeats)
    out = {}
    for name, run in runs.items():
        measured, timed = blocks[name]
        prof = _profiled_blocks(run, repeats, inside)
        # the median timed block, against the median bare one: a burst of load lands in one block, not in both
        accounted, spans = sorted(timed, key=lambda t: t[0])[(len(timed) - 1) // 2]
        cats, profiled, own, scale = _split_rest(accounted, spans, prof, per_event)
        _split_session(cats, spans, prof)
        ratio = float(np.median([t[0] / b for t, b in zip(timed, measured)]))  # a timed block over its bare twin
        out[name] = {"categories": cats, "measured_us": float(np.median(measured)), "accounted_us": accounted,
                     "accounted_ratio": ratio,
                     "profiled_us": profiled, "profiler_us": own, "stretch": 1 / scale if scale else 0.0,
                     "events_per_unit": prof.events / prof.units, "units_per_block": prof.units // repeats}
    return out


def _timed_blocks(runs: dict[str, Callable[[object], int]],
                  repeats: int) -> dict[str, tuple[list[float], list[tuple[float, dict]]]]:
    """`repeats` rounds of every run's bare block and every run's timed block, bare or timed first in turn, the
    runs interleaved in each: name -> (bare µs per unit, [(timed µs per unit, label -> its spans' µs per
    unit)])."""
    out = {name: ([], []) for name in runs}
    for i in range(repeats):
        with hygiene.no_gc():  # a collection would land in one block only
            for mode in (False, "time") if i % 2 == 0 else ("time", False):  # alternated: neither always first
                for name, run in runs.items():
                    _SPANS.clear()
                    t0 = measured()
                    n = run(mode)
                    us = (measured() - t0) / n * 1e6
                    bare, timed = out[name]
                    if mode:
                        timed.append((us, {label: sec / n * 1e6 for label, sec in _SPANS.items()}))
                    else:
                        bare.append(us)
    return out


@dataclass
class _Profile:
    """What `repeats` profiled blocks recorded, summed over the blocks."""

    wall_s: float  # their wall time
    units: int  # units of work they did
    events: int  # events the profiler recorded
    outside_events: int  # ... of which outside every label
    totals: dict[str, float]  # category or label -> µs (`_aggregate`)
    kernels: dict | None  # what `inside()` yielded: ONNX Runtime's kernels by category (None: no session)


def _profiled_blocks(run: Callable[[object], int], repeats: int,
                     inside: Callable[[], contextlib.AbstractContextManager] | None) -> _Profile:
    """`repeats` blocks under torch.profiler, with any inner profiler on: they only give proportions, so they
    run after the timed pairs."""
    quiet_profiler()
    prof = _Profile(0.0, 0, 0, 0, {}, None)
    with inside() if inside is not None else contextlib.nullcontext() as kernels:
        for _ in range(repeats):
            with hygiene.no_gc(), _torch_profile() as torch_prof:
                t0 = measured()
                prof.units += run(True)
                prof.wall_s += measured() - t0
            evs = torch_prof.events()
            prof.events += len(evs)
            got, outside = _aggregate(evs)
            prof.outside_events += outside
            for name, us in got.items():
                prof.totals[name] = prof.totals.get(name, 0.0) + us
    prof.kernels = kernels  # filled as the inner profiler closed
    return prof


def _split_rest(accounted: float, spans: dict[str, float], prof: _Profile,
                per_event: float) -> tuple[dict[str, float], float, float, float]:
    """The categories of a timed block (its wall time `accounted`, its labels' `spans`), all but a SESSION
    span's share: the labels' spans as timed, the rest by the profiled blocks' proportions, less the profiler's
    own cost. Returns (categories, profiled µs per unit, the profiler's own µs per unit, the scale from
    profiled to timed rest)."""
    out = dict.fromkeys(CATEGORIES, 0.0)
    for name in LABELS:
        if name != SESSION:
            out[name] = spans.get(name, 0.0)
    rest = accounted - sum(spans.get(name, 0.0) for name in LABELS)
    profiled = prof.wall_s * 1e6 / prof.units
    own = prof.outside_events / prof.units * per_event
    seen = {name: us / prof.units for name, us in prof.totals.items() if name not in LABELS}
    in_labels = sum(prof.totals.get(n, 0.0) for n in LABELS) / prof.units
    unseen = max(0.0, profiled - own - in_labels - sum(seen.values()))
    rest_profiled = sum(seen.values()) + unseen
    scale = rest / rest_profiled if rest_profiled > 0 else 0.0
    for name, us in seen.items():
        out[name] = us * scale
    out[RESIDUAL] = unseen * scale
    return out, profiled, own, scale


def _split_session(out: dict[str, float], spans: dict[str, float], prof: _Profile) -> None:
    """Add a SESSION span's µs to `out`: by ONNX Runtime's kernels in proportion, the rest of the span to
    RESIDUAL (all of it without a kernel profile: the run counts as dispatch, as the profiler would call it)."""
    session, session_profiled = spans.get(SESSION, 0.0), prof.totals.get(SESSION, 0.0) / prof.units
    if session <= 0:
        return
    kernels = prof.kernels
    in_kernels = {name: us / prof.units for name, us in (kernels or {}).items() if name in out}
    if session_profiled > 0 and in_kernels:  # the profiled span, less what ONNX Runtime's profiler added
        session_profiled -= kernels.get("profiler_us", 0.0) / prof.units
        s_scale = session / max(session_profiled, sum(in_kernels.values()))
        for name, us in in_kernels.items():
            out[name] += us * s_scale
        out[RESIDUAL] += session - sum(in_kernels.values()) * s_scale
    else:
        out[RESIDUAL] += session


def quiet_profiler() -> None:
    """torch.profiler's kineto logs `USDT: ... profiler_start` / `profiler_stop` at its highest severity each time
    a profile starts and stops (an attribution starts dozens); only a level above every severity (6) silences
    them. Kineto reads KINETO_LOG_LEVEL when the first profile starts, so both places here that start profiles
    (`_profiled_blocks`, `profiler_cost_us`) call this first -- the CLI and library users alike; a level the
    user set wins."""
    os.environ.setdefault("KINETO_LOG_LEVEL", "6")


def profiler_cost_us(calls: int = 2000, repeats: int = 3) -> float:
    """µs torch.profiler adds per event it records, on this machine now: a loop of `calls` tiny aten ops timed
    without and with the profiler (best of `repeats` each), the difference over the events recorded."""
    quiet_profiler()
    a, b, out = torch.ones(4), torch.ones(4), torch.empty(4)

    def loop() -> None:
        for _ in range(calls):
            torch.add(a, b, out=out)

    def best(profiled: bool) -> tuple[float, int]:
        times, n = [], 0
        for _ in range(repeats):
            with hygiene.no_gc(), (_torch_profile() if profiled else contextlib.nullcontext()) as prof:
                t0 = measured()
                loop()
                times.append(measured() - t0)
            n = len(prof.events()) if profiled else 0
        return min(times), n

    loop()
    plain, _ = best(False)
    with_profiler, n = best(True)
    return per_event_us(plain, with_profiler, n)


def per_event_us(plain_s: float, profiled_s: float, events: int) -> float:
    """µs per recorded event: the profiled loop's extra time over its events; 0 where a preempted plain run
    came out slower than the profiled one (no event costs less than nothing)."""
    return max(0.0, (profiled_s - plain_s) / max(events, 1) * 1e6)


def _aggregate(events) -> tuple[dict[str, float], int]:
    """µs by category over one profile's events (no residual), and how many events lay outside every label."""
    totals: dict[str, float] = {}
    outside = 0
    for e in events:
        chain = [e]
        while chain[-1].cpu_parent is not None:
            chain.append(chain[-1].cpu_parent)
        labels = [x for x in chain if x.name in LABELS]
        if labels:  # inside a label: only the outermost label's own event counts, with its whole span
            if e is labels[-1]:
                totals[e.name] = totals.get(e.name, 0.0) + e.cpu_time_total
            continue
        outside += 1
        ops = [x for x in chain if x.name.startswith("aten::")]
        if not ops:  # another annotation: its ops count by themselves, its own time is the residual's
            continue
        cat = category(ops[-1].name)
        totals[cat] = totals.get(cat, 0.0) + e.self_cpu_time_total
    return totals, outside


def _torch_profile():
    """torch.profiler over the CPU, imported where used: `import specdec` does not pay for it."""
    from torch.profiler import ProfilerActivity, profile

    return profile(activities=[ProfilerActivity.CPU])


_SPANS: dict[str, float] = {}  # label -> seconds, filled by the "time" mode of `_label`


class _Span:
    """Adds the seconds its `with` block takes to _SPANS[name]."""

    __slots__ = ("name", "t0")

    def __init__(self, name: str):
        self.name = name

    def __enter__(self) -> None:
        self.t0 = measured()

    def __exit__(self, *exc) -> None:
        _SPANS[self.name] = _SPANS.get(self.name, 0.0) + measured() - self.t0


def label(mode, name: str):
    """A label's span: timed (mode "time"), recorded for torch.profiler (mode True) or nothing (False)."""
    if mode == "time":
        return _Span(name)
    if not mode:
        return contextlib.nullcontext()
    from torch.profiler import record_function  # imported where used: `import specdec` does not pay for it

    return record_function(name)
