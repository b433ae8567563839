"""The load sweep behind `specdec load`: spec-on against spec-off at every load level, alternated in visits, each
level with its own A/A, every request's timings kept.

Servers of the same target (`on` with speculation, `off` without: llama.cpp's server cannot switch it per
request, see `n_max_probe`) serve three arms: `on`, `off` and `off2` (a second spec-off window, the A/A). The
A/A arm goes to a second spec-off server where one is given (`urls["off2"]`; `specdec load` starts one), so
that it compares two server processes as spec-on against spec-off does, and a process's own layout bias shows
in the A/A too; else to the same spec-off server. At
each level, each visit runs one window per arm back to back, in an order rotated from visit to visit (off on
off2, on off2 off, off2 off on), so that no arm always runs first after a level change or last before the next.
`order="unpaired"` runs what `vllm bench serve`-style sweeps do instead (every level spec-off, then every level
spec-on, then the A/A block), for the side-by-side comparison of what each method concludes.

Around each window both servers' `/metrics` are read: the spec server's draft counters (llama.cpp's, or vLLM's
under its own names) give the window's acceptance and are checked against the sum of the replies' own
`timings.draft_n` (counts that add up), and `llamacpp:n_busy_slots_per_decode` with `n_decode_total` give the
busy slots per decode step over the window, the proof that the requests were batched. Identical payloads
(prompt, seed, max_tokens with ignore_eos, cache_prompt off) go to both servers in the same window position, so
at temperature 0 the texts must be equal request by request (greedy equality, per level).

`run` only measures: it returns every window as it was measured (`SweepWindows`, written as it is by
`raw()`), and the answer is drawn from them afterwards (`load_conclude.concluded`), so that the caller can put
what was measured on disk before anything is concluded from it: a conclusion that fails loses nothing measured.

A server that stops answering mid-run ends the run: what was measured is kept, the document is marked
`incomplete` with the reason, and the caller writes it and exits 1.

Two clocks: the sends are paced and every latency is timed on `now` (`clock.measured` unless a test hands a
fake one: a measurement, which the guard SPECDEC_TIME_SCALE must not scale); the budget, a decision, reads the
decision clock `clock.now` like every other budget (docs/clock.md).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from specdec.engines import openai_http as http
from specdec.engines.openai_api import METRICS, rounds_by_accepted
from specdec.measure import acceptance_engines, clock
from specdec.measure.load.load_driver import Record, run_window
from specdec.measure.load.load_schedule import Level

ARMS = ("off", "on", "off2")  # off2: spec-off again, the A/A
PREDICTED, DECODES, BUSY = "llamacpp:tokens_predicted", "llamacpp:n_decode", "llamacpp:n_busy_slots_per_decode"
METRICS_TIMEOUT = 5.0
SETTLE_READS = 5


@dataclass
class Sweep:
    """What one sweep runs (the command's options, checked)."""

    urls: dict[str, str]  # "on", "off"
    levels: list[Level]
    prompts: list[str]
    visits: int = 3
    requests: int = 8  # measured per window
    warmup: int = 2
    max_tokens: int = 64
    temperature: float = 0.0
    seed: int = 0
    burstiness: float = 1.0
    slos: dict[str, float] = field(default_factory=dict)
    order: str = "paired"
    request_timeout: float = 120.0
    budget: float = math.inf  # seconds: no window starts after it


def server_url(urls: dict[str, str], arm: str) -> str:
    """The server an arm's window goes to: its own, or for the A/A arm the spec-off server when no second
    spec-off server was given."""
    return urls.get(arm) or urls["off"]


def schedule(levels: list[Level], visits: int, order: str = "paired") -> list[tuple[int, int, str]]:
    """(level index, visit, arm) in the order they run (module docstring)."""
    if order == "unpaired":
        return [(li, v, arm) for arm in ARMS for li in range(len(levels)) for v in range(visits)]
    out = []
    for li in range(len(levels)):
        for v in range(visits):
            k = v % len(ARMS)
            out += [(li, v, arm) for arm in ARMS[k:] + ARMS[:k]]
    return out


def cooldown(sweep: Sweep, level: Level) -> int:
    """A window's cool-down requests after its measured ones (load_driver): one for each other client of a
    closed loop; at most as many as the measured ones for an open loop, which sends them at the rate only while
    a measured request is still running."""
    return int(level.value) - 1 if level.kind == "concurrency" else sweep.requests


def payloads(sweep: Sweep, level: Level) -> list[dict]:
    """The window's requests, identical for every arm: prompts in turn, seed per position."""
    n = sweep.warmup + sweep.requests + cooldown(sweep, level)
    return [{"_prompt": i % len(sweep.prompts), "prompt": sweep.prompts[i % len(sweep.prompts)],
             "max_tokens": sweep.max_tokens, "min_tokens": sweep.max_tokens, "ignore_eos": True,
             "temperature": sweep.temperature, "seed": sweep.seed + i, "cache_prompt": False,
             "repeat_penalty": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0} for i in range(n)]


def read_metrics(url: str) -> dict[str, float] | None:
    """The server's /metrics, parsed; None when it does not serve them (or does not answer)."""
    try:
        return http.parse_prometheus(http.request(f"{url}/metrics", METRICS_TIMEOUT).body)
    except http.HttpFailure:
        return None


def window_counts(before: dict | None, after: dict | None, records: list[Record]) -> dict:
    """The window's server-side counts: drafted, accepted (and their per-reply sums), rounds by accepted,
    busy slots per decode."""
    out: dict = {"drafted_replies": _sum(r.drafted for r in records),
                 "accepted_replies": _sum(r.accepted for r in records)}
    if not before or not after:
        return out
    delta = lambda name: (http.counter(after, name) or 0.0) - (http.counter(before, name) or 0.0)
    kind = next((k for k, names in METRICS.items() if http.counter(after, names[0]) is not None), None)
    if kind is not None:  # llama.cpp's counters, or vLLM's (the same meanings under other names)
        drafted, accepted, _ = METRICS[kind]
        out["counters"] = kind
        out["drafted"], out["accepted"] = int(round(delta(drafted))), int(round(delta(accepted)))
        out["acceptance"] = out["accepted"] / out["drafted"] if out["drafted"] else None
        out["rounds_by_accepted"] = rounds_by_accepted(before, after, kind)
        if out["rounds_by_accepted"] and sum(out["rounds_by_accepted"]):  # the engine's figures, in its terms
            out["engine_figures"] = acceptance_engines.figures(out["rounds_by_accepted"], out["drafted"])
        if out["drafted_replies"] is not None:
            out["counts_add_up"] = (out["drafted"], out["accepted"]) == (out["drafted_replies"],
                                                                         out["accepted_replies"])
    d0, d1 = http.counter(before, DECODES), http.counter(after, DECODES)
    g0, g1 = before.get(BUSY), after.get(BUSY)
    if None not in (d0, d1, g0, g1) and d1 > d0:
        out["decodes"] = int(d1 - d0)
        out["busy_slots_per_decode"] = (g1 * d1 - g0 * d0) / (d1 - d0)  # the gauge is a running mean
    out["tokens_predicted"] = int(round(delta(PREDICTED))) if http.counter(after, PREDICTED) is not None else None
    return out


def _sum(values) -> int | None:
    values = list(values)
    return None if any(v is None for v in values) or not values else int(sum(values))


def _settled(url: str, before: dict | None, tokens: int) -> dict | None:
    """/metrics after a window, read again (a bounded number of times) until the server's token counter has
    counted the window's tokens: it may update just after the last reply."""
    after = read_metrics(url)
    for attempt in range(SETTLE_READS):
        moved = None if not (before and after) else \
            (http.counter(after, PREDICTED) or 0.0) - (http.counter(before, PREDICTED) or 0.0)
        if moved is None or moved >= tokens:
            break
        time.sleep(0.02 * (attempt + 1))
        after = read_metrics(url)
    return after


@dataclass
class SweepWindows:
    """What `run` measured: every window by (level index, visit, arm), as `load_conclude.conclude` reads them;
    the sweep's seconds on the measurement clock; why it stopped early (None: it ran whole)."""

    windows: dict[tuple[int, int, str], dict]
    wall_seconds: float
    incomplete: str | None = None


def run(sweep: Sweep, now: Callable[[], float] | None = None, sleep: Callable[[float], None] | None = None,
        log: Callable[[str], None] = lambda line: None, alive: Callable[[], str | None] = lambda: None,
        record: Callable[[dict], None] = lambda window: None) -> SweepWindows:
    """Every window of `schedule`, measured and returned as it is (nothing concluded:
    `load_conclude.concluded`). `now` paces the sends and times them (default `clock.measured`); `sleep` is the
    open loop's wait on it (None: the driver's own, which a failure cuts short). `alive` says why a server is
    gone (None while both run): asked after a window failed. `record` gets each window as `raw` writes it, as
    soon as it ends (the CLI appends it to a JSON-lines file). ^C or SIGTERM, or an error in a window's
    bookkeeping, ends the sweep with the windows measured and says why in `incomplete` (an error's traceback goes
    to stderr: a bug, said as one)."""
    now = now or clock.measured
    started = now()
    windows: dict[tuple[int, int, str], dict] = {}
    try:
        incomplete = _sweep(sweep, windows, now, sleep, log, alive, record)
    except KeyboardInterrupt:
        incomplete = f"interrupted after {len(windows)} window(s)"
        log(f"load: {incomplete}")
    except Exception as exc:  # noqa: BLE001 -- a /metrics it cannot read, a bug: the windows measured stand
        import traceback

        traceback.print_exc()
        incomplete = f"the sweep failed after {len(windows)} window(s): {type(exc).__name__}: {exc}"
    return SweepWindows(windows, round(now() - started, 3), incomplete)


def _sweep(sweep: Sweep, windows: dict, now, sleep, log, alive, record) -> str | None:
    """The windows in schedule order, each kept in `windows` and handed to `record` as it ends; why the sweep
    stopped early, or None."""
    decided_from = clock.now()  # the budget is a decision: it reads the seam, which the guard scales
    incomplete = None
    for li, visit, arm in schedule(sweep.levels, sweep.visits, sweep.order):
        left = sweep.budget - (clock.now() - decided_from)
        if left < 0:
            incomplete = f"the budget of {sweep.budget:g} s ran out before {sweep.levels[li].name} visit {visit + 1}"
            break
        level, url = sweep.levels[li], server_url(sweep.urls, arm)
        before = read_metrics(url)
        # no request is sent after the budget's end, converted to the sending clock at the window's start
        win = run_window(url, level, payloads(sweep, level), sweep.warmup, cooldown(sweep, level), now, sleep,
                         sweep.request_timeout, deadline=now() + left + sweep.request_timeout,
                         seed=sweep.seed + 1000 * visit + li, burstiness=sweep.burstiness)
        after = _settled(url, before, sum(r.tokens for r in win.records))
        windows[(li, visit, arm)] = {"window": win, "counts": window_counts(before, after, win.records)}
        record(_window_row(sweep, li, visit, arm, windows[(li, visit, arm)]))
        short = sum(r.short for r in win.records)
        log(f"load: {level.name} visit {visit + 1} {arm}: {len(win.measured_records())} measured requests"
            + (f", {short} SHORT (fewer tokens than asked)" if short else "")
            + (f", FAILED: {win.failure}" if win.failure else ""))
        if win.failure:
            incomplete = f"{arm} server {url} failed at {level.name}: {alive() or win.failure}"
            break
    return incomplete


def raw(sweep: Sweep, swept: SweepWindows) -> dict:
    """What was measured, ready for JSON before anything is concluded from it: the settings and every window
    with its requests and server counts, in the order they ran."""
    doc = {"settings": sweep_settings(sweep), "wall_seconds": swept.wall_seconds,
           "windows": [_window_row(sweep, li, visit, arm, w) for (li, visit, arm), w in swept.windows.items()]}
    if swept.incomplete:
        doc["incomplete"] = swept.incomplete
    return doc


def _window_row(sweep: Sweep, li: int, visit: int, arm: str, w: dict) -> dict:
    level = sweep.levels[li]
    return {"level": level.name, "kind": level.kind, "value": level.value, "visit": visit, **window_dict(arm, w)}


def window_dict(arm: str, w: dict) -> dict:
    """One measured window as the documents hold it: its arm, failure, server counts and requests."""
    return {"arm": arm, "failure": w["window"].failure, "counts": w["counts"],
            "requests": [r.to_dict() for r in w["window"].records]}


def sweep_settings(sweep: Sweep) -> dict:
    """The sweep's settings as its documents (measured and concluded) record them."""
    return {"urls": dict(sweep.urls), "levels": [lv.name for lv in sweep.levels], "visits": sweep.visits,
            "requests": sweep.requests, "warmup": sweep.warmup, "max_tokens": sweep.max_tokens,
            "temperature": sweep.temperature, "seed": sweep.seed, "burstiness": sweep.burstiness,
            "slos": dict(sweep.slos), "order": sweep.order, "prompts": len(sweep.prompts),
            "request_timeout_s": sweep.request_timeout, "budget_s": None if math.isinf(sweep.budget) else sweep.budget}


def n_max_probe(url: str, prompt: str, max_tokens: int = 32, timeout: float = 60.0) -> dict:
    """Whether the speculative server honours a per-request `speculative.n_max`: the same greedy request with
    n_max 0 and without, and the replies' draft counts. Honoured when n_max 0 drafts nothing and the plain
    request drafts something."""
    base = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0.0, "cache_prompt": False,
            "ignore_eos": True, "stream": False}
    drafted = {}
    for label, extra in (("default", {}), ("n_max=0", {"speculative.n_max": 0})):
        try:
            reply = http.request(f"{url}/v1/completions", timeout, {**base, **extra}).json("POST /v1/completions")
        except http.HttpFailure as exc:
            return {"honoured": None, "error": str(exc)}
        timings = reply.get("timings") if isinstance(reply, dict) else None
        drafted[label] = (timings or {}).get("draft_n")
    honoured = None if None in drafted.values() else (drafted["n_max=0"] == 0 and drafted["default"] > 0)
    return {"honoured": honoured, "drafted": drafted, "field": "speculative.n_max"}

