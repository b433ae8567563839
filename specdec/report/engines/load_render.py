"""`specdec load`'s output: the Markdown page (load.md), the figure of speedup and p99 TPOT against load
(load.png), and the folder they are written to with load.json, all-or-nothing.

Before anything is concluded, what was measured (`measure.load.raw`: every window's requests and counts) is
written on its own (`write_raw`: OUT-incomplete/windows.json), so that a conclusion that fails loses nothing
measured; `write_failure` puts the failure's traceback beside it. Everything else reads only the document
`measure.load.load_conclude.concluded` returns.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

from specdec.measure.load.load_stats import judged
from specdec.report.figures import _pyplot, _save
from specdec.report.markdown import table
from specdec.util.files import swap_folder, write_atomic

MS = 1000.0
RAW, FAILURE = "windows.json", "conclusion-error.txt"


def _interval(s: dict | None, fmt: str = "{:.2f}") -> str:
    if not s:
        return "-"
    return f"{fmt.format(s['estimate'])} ({fmt.format(s['ci_low'])}-{fmt.format(s['ci_high'])})"


def _ms(p: dict | None) -> str:
    return "-" if not p else f"{p['estimate'] * MS:.1f} ({p['ci_low'] * MS:.1f}-{p['ci_high'] * MS:.1f})"


def _num(x, fmt: str = "{:.2f}") -> str:
    return "-" if x is None else fmt.format(x)


def _added_up(check: bool | None) -> str:
    """The server's draft counts against the replies' own: "not read" where either was not there to read."""
    return "not read" if check is None else ("yes" if check else "NO")


def _short_count(short: dict | None) -> int:
    """How many measured replies of a level, over its arms, had fewer tokens than asked (0 for a load.json from
    before they were counted)."""
    return sum(arm["short"] for arm in (short or {}).values())


def _short_cell(short: dict | None) -> str:
    """A level's short replies over its measured ones ("-" for a load.json from before they were counted)."""
    if not short:
        return "-"
    n = _short_count(short)
    return "none" if not n else f"{n} of {sum(arm['measured'] for arm in short.values())}"


def crossover_line(kind: str, c: dict) -> str:
    """One sentence per kind of level: where speculation stops paying, with its interval."""
    unit = "clients" if kind == "concurrency" else "requests/s"
    if c.get("answer") == "pays from a level on":
        return f"**{kind}**: pays from {c['level']:g} {unit} on (it does not pay below that)."
    if c.get("answer") != "crossover":
        return f"**{kind}**: {c.get('answer')}."
    # None on either side: a re-run's crossing lies beyond the levels tried (crossover.crossing_interval)
    lo = "beyond the levels tried" if c.get("ci_low") is None else f"{c['ci_low']:.2f}"
    hi = "beyond the levels tried" if c.get("ci_high") is None else f"{c['ci_high']:.2f}"
    est = "beyond the levels tried" if c.get("estimate") is None else f"near {c['estimate']:.2f} {unit}"
    return (f"**{kind}**: speculation stops paying at {c['level']:g} {unit} (the first level tried after a "
            f"paying one that does not pay: {c.get('verdict', 'not pays')}); its speedup's estimate crosses 1 "
            f"{est}, 95 % re-run interval of that crossing {lo} to {hi}.")


def render(doc: dict) -> str:
    s = doc["settings"]
    lines = ["# Speculative decoding under load", ""]
    if doc.get("incomplete"):
        lines += [f"**INCOMPLETE**: {doc['incomplete']}. What was measured before is below.", ""]
    servers = doc.get("servers") or {}
    for arm, d in servers.items():
        lines.append(f"- server `{arm}`: `{' '.join(d.get('argv', [])) or d.get('url')}`")
    probe = doc.get("n_max_probe")
    if probe:
        lines.append(f"- per-request `speculative.n_max` honoured: {probe.get('honoured')} (drafted "
                     f"{probe.get('drafted')})")
    lines += [f"- {s['visits']} visit(s) per level, {s['requests']} measured requests per window after "
              f"{s['warmup']} warm-up, {s['max_tokens']} tokens each, temperature {s['temperature']:g}, order "
              f"{s['order']}; latencies from each request's scheduled send", "",
              "## Paired speedup per level" if s["order"] == "paired" else
              "## Unpaired speedup per level (each arm's windows run in a block of their own, as vllm bench sweeps)",
              "", "Speedup: spec-off time per token / spec-on time per token over the visits (ratio of totals, 95 % "
              "re-run interval; below 3 visits the visits' range widened by √2, and no verdict); A/A: spec-off "
              "against spec-off in the same visits, on the speedup the verdict judges: throughput at a concurrency "
              "level, TPOT at a rate (an open loop's throughput is the offered rate until it saturates).", ""]
    rows = []
    for lv in doc["levels"]:
        busy = lv["busy_slots_per_decode"]
        eq = lv.get("greedy_equality") or {}
        on, _, aa = judged(lv)
        tpot = on == "tpot"
        rows.append([lv["name"], lv["visits"], _interval(lv["speedup"]), _interval(lv["speedup_tpot"]),
                     _interval(aa), f"{lv['verdict']} ({'TPOT' if tpot else 'throughput'})",
                     _num(lv["acceptance"]["acceptance"], "{:.3f}"), _engine_cell(lv["acceptance"].get("engine")),
                     _added_up(lv["acceptance"].get("counts_add_up")),
                     f"{_num(busy.get('off'))} / {_num(busy.get('on'))}",
                     "-" if eq.get("equal") is None else ("yes" if eq["equal"] else f"NO ({eq['differ']})"),
                     _short_cell(lv.get("short_replies"))])
    short = [lv["name"] for lv in doc["levels"] if _short_count(lv.get("short_replies"))]
    if short:
        lines += [f"**SHORT REPLIES** at {', '.join(short)}: replies with fewer tokens than the {s['max_tokens']} "
                  "asked (the server's context full, or a stop it should not make); their figures cover fewer "
                  "tokens than the others'.", ""]
    lines += [table(["level", "visits", "speedup", "TPOT speedup", "A/A (judged)", "verdict (judged on)", "acceptance",
                     "server's acceptance length; per position", "counts add up", "busy slots off / on",
                     "greedy equal", "short replies"], rows), ""]
    lines += ["## Crossover", ""] + [crossover_line(k, c) for k, c in doc.get("crossover", {}).items()] + [""]
    lines += ["## Latency and throughput per arm", "", "Milliseconds, p50 / p99 with 95 % re-run intervals; "
              "goodput: requests per second meeting every SLO" + (f" ({_slos(s['slos'])})" if s["slos"] else
                                                                   " (no SLO given: every request)") + ".", ""]
    rows = []
    for lv in doc["levels"]:
        for arm in ("off", "on"):
            a = lv["arms"][arm]
            if not a.get("requests"):
                continue
            rows.append([lv["name"], arm, a["requests"], _num(a["output_tokens_per_s"], "{:.1f}"),
                         _ms(a["ttft"]["p50"]), _ms(a["ttft"]["p99"]), _ms(a["tpot"]["p50"]), _ms(a["tpot"]["p99"]),
                         _ms(a["itl"]["p99"]), _ms(a["e2el"]["p99"]), _num(a["goodput"]["requests_per_s"])])
    lines += [table(["level", "arm", "requests", "tokens/s", "TTFT p50", "TTFT p99", "TPOT p50", "TPOT p99",
                     "ITL p99", "E2EL p99", "goodput"], rows), ""]
    return "\n".join(lines)


def _slos(slos: dict) -> str:
    return ", ".join(f"{k} <= {v * MS:g} ms" for k, v in slos.items())


def figure(doc: dict):
    """Speedup (band: interval) and p99 TPOT of each arm against load, one column per kind of level; None
    without matplotlib or levels."""
    kinds = list(dict.fromkeys(lv["kind"] for lv in doc["levels"]))
    plt = _pyplot() if kinds else None
    if plt is None:
        return None
    fig, axes = plt.subplots(2, len(kinds), figsize=(5.5 * len(kinds), 7), squeeze=False)
    for col, kind in enumerate(kinds):
        lvs = [lv for lv in doc["levels"] if lv["kind"] == kind and judged(lv)[1]]
        sp = [judged(lv)[1] for lv in lvs]  # the speedup the verdicts judge, and its A/A
        aa = [(lv["value"], judged(lv)[2]) for lv in lvs if judged(lv)[2]]
        x = [lv["value"] for lv in lvs]
        top, bottom = axes[0][col], axes[1][col]
        top.plot(x, [s["estimate"] for s in sp], "o-", label="spec-on / spec-off")
        top.fill_between(x, [s["ci_low"] for s in sp], [s["ci_high"] for s in sp], alpha=0.25)
        top.plot([v for v, _ in aa], [a["estimate"] for _, a in aa], "s--", color="grey", label="A/A")
        top.axhline(1.0, color="black", lw=0.8)
        on = judged(lvs[0])[0] if lvs else "throughput"
        top.set_title(f"{'TPOT' if on == 'tpot' else 'throughput'} speedup against {kind}")
        top.set_ylabel("speedup")
        top.legend()
        for arm, style in (("off", "s--"), ("on", "o-")):
            pts = [(lv["value"], lv["arms"][arm]["tpot"]["p99"]) for lv in lvs if lv["arms"][arm].get("requests")]
            pts = [(v, p["estimate"] * MS) for v, p in pts if p]
            if pts:
                bottom.plot(*zip(*pts), style, label=f"spec-{arm}")
        bottom.set_title(f"p99 TPOT against {kind}")
        bottom.set_ylabel("ms per token")
        bottom.set_xlabel("clients" if kind == "concurrency" else "requests per second")
        bottom.legend()
        for ax in (top, bottom):
            if len(x) > 1 and min(x) > 0:
                ax.set_xscale("log", base=2)
                ax.set_xticks(x, [f"{v:g}" for v in x])
                ax.minorticks_off()
    fig.tight_layout()
    return fig


def _beside(out: str | os.PathLike) -> tuple[Path, Path]:
    """`out` made absolute, and a new empty folder beside it to build its next contents in (`swap_folder`)."""
    out = Path(out).absolute()
    out.parent.mkdir(parents=True, exist_ok=True)
    return out, Path(tempfile.mkdtemp(dir=out.parent, prefix=f".{out.name}-"))


def write_raw(raw: dict, out: str | os.PathLike) -> Path:
    """out/windows.json alone, the folder swapped in whole (an earlier one there is replaced, never mixed)."""
    out, tmp = _beside(out)
    (tmp / RAW).write_text(json.dumps(raw, indent=1) + "\n")
    swap_folder(tmp, out)
    return out / RAW


def write_failure(out: str | os.PathLike, trace: str) -> Path:
    """out/conclusion-error.txt: why the conclusion failed, beside the windows `write_raw` put there."""
    path = Path(out).absolute() / FAILURE
    write_atomic(path, trace)
    return path


def write(doc: dict, out: str | os.PathLike, text: str) -> list[Path]:
    """out/load.json, out/load.md and out/load.png (where matplotlib is), built beside `out` and swapped in
    whole: an interrupted write leaves the earlier folder, never a mix."""
    out, tmp = _beside(out)
    names = ["load.json", "load.md"]
    (tmp / "load.json").write_text(json.dumps(doc, indent=1) + "\n")
    (tmp / "load.md").write_text(text + "\n")
    fig = figure(doc)
    if fig is not None and _save(fig, tmp / "load.png"):
        names.append("load.png")
    swap_folder(tmp, out)
    return [out / n for n in names]


def _engine_cell(engine: dict | None) -> str:
    """The server's own figures, in its terms (vLLM's and llama.cpp's per-position counters): acceptance length
    (1 + accepted / rounds) and the unconditional per-position rates."""
    if not engine:
        return "-"
    rates = " ".join(f"{r:.2f}" for r in engine["per_position"] if r is not None)
    return f"{engine['acceptance_length']:.2f}; {rates} ({engine['counters']})"
