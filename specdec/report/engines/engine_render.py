"""The engine report's text: the answer per engine first, then every row, the counts each engine reported,
greedy equality, the engines side by side on the same configurations, and what an engine cannot give.

It reads only the document `engine_build.measure` returns, so a saved report.json renders again.
"""

from __future__ import annotations

from specdec.report.headline import answer
from specdec.report.markdown import interval, table, words

NOT_REPORTED = "not reported by this engine"


def headline_facts(doc: dict) -> dict:
    """Per engine: its A/A floor, per draft its best measured configuration with its verdict against that
    floor, and the recommendation (the fastest FASTER configuration, else target-only). A configuration
    whose greedy output differed from target-only is left out of the answer."""
    unequal = {(g["engine"], g["draft"], g["k"]) for g in doc.get("greedy_equality", []) if not g["equal"]}
    out = {}
    for name, floor in doc["noise_floors"].items():
        drafts, recommendation = answer([r for r in doc["speedup"] if r["engine"] == name], floor,
                                        lambda r: (r["engine"], r["draft"], r["k"]) not in unequal,
                                        "greedy output differed from target-only")
        out[name] = {"noise_floor": {"measured": floor["measured"], "ci": [floor["ci_low"], floor["ci_high"]],
                                     "pairs": floor["pairs"]},
                     "drafts": drafts, "recommendation": recommendation}
    return out


def render(doc: dict) -> str:
    s, m = doc["settings"], doc["machine"]
    w = s["workload"]
    what = f"workload {w['name']!r}" if s.get("prompt") is None else f"prompt {s['prompt']!r}"
    out = [f"# specdec report: engines {', '.join(s['engines'])}\n"]
    if doc.get("incomplete"):
        out.append(f"**INCOMPLETE: the run stopped ({doc['incomplete']}); the figures below are what was timed "
                   "before it.**\n")
    out += [
           f"{m['cpu']} ({m['device']}), {m['threads']} thread(s); {what}, {w['items']} run(s) of {s['chars']} "
           f"{words(doc)['units']} at temperature {s['temperature']:g}; budget {s['budget']:.0f} s, measured in "
           f"{doc['wall_seconds']:.0f} s. Each engine's configurations are timed against target-only *through "
           "that engine*, in alternated pairs beside its own A/A floor.\n"]
    for name, h in doc["headline"].items():
        f = h["noise_floor"]
        out += [f"## {name}\n", f"A/A floor {f['measured']:.3f}x ({interval(*f['ci'], f['pairs'], 3)}, {f['pairs']} "
                f"pairs).\n", table(["draft", "best configuration", "speedup", "95% re-run interval", "verdict"], [
                    [d["draft"], d["config"] or "-", "" if d["config"] is None else f"{d['measured']:.2f}",
                     "" if d["config"] is None else interval(*d["ci"], d["pairs"]), d["verdict"]]
                    for d in h["drafts"]]),
                f"\n**Recommendation ({name}): {h['recommendation']}.**\n"]
    out += [f"**{x}**\n" for x in doc.get("warnings", [])]
    out += ["## Every configuration\n", rows_table(doc)]
    if len(s["engines"]) > 1:
        out += ["\n## The engines side by side (same pair, same prompts and seeds)\n", side_by_side(doc)]
    out.append("\nGenerations asked of each engine (requests, for a served one): "
               + ", ".join(f"{name} {n}" for name, n in (doc.get("calls") or {}).items()) + ".")
    fit = doc.get("fit") or {}
    if fit.get("dropped"):
        out.append(f"\nNot timed (the budget did not fit {fit['pairs_per_row']} pairs of every row; each draft kept "
                   f"its best single-run k): {', '.join(fit['dropped'])}.")
    out.append("\n## What an engine report cannot give\n")
    out += [f"- {section}: {why}" for section, why in doc.get("unavailable", {}).items()]
    return "\n".join(out) + "\n"


def _count(x, fmt: str = "{}") -> str:
    return NOT_REPORTED if x is None else fmt.format(x)


def rows_table(doc: dict) -> str:
    acc = {(a["engine"], a["draft"], a["k"]): a for a in doc.get("acceptance", [])}
    eq = {(g["engine"], g["draft"], g["k"]): g for g in doc.get("greedy_equality", [])}
    wd = words(doc)
    body = []
    for r in doc["speedup"]:
        key = (r["engine"], r["draft"], r["k"])
        a, g = acc.get(key, {}), eq.get(key)
        body.append([r["engine"], r["draft"], r["k"], f"{r['measured']:.3f}", interval(r["ci_low"], r["ci_high"], r["pairs"], 3),
                     r["pairs"], _count(a.get("acceptance"), "{:.3f}"), _count(a.get("chars_per_pass"), "{:.2f}"),
                     "-" if g is None else ("yes" if g["equal"] else f"no, from {g['first_difference']}")])
    return table(["engine", "draft", "k", "speedup", "95% re-run interval", "pairs", "acceptance", wd["per_pass"],
                  "greedy equal"], body)


def side_by_side(doc: dict) -> str:
    """Per (draft, k) that more than one engine timed: each engine's speedup and acceptance in one row."""
    engines = doc["settings"]["engines"]
    acc = {(a["engine"], a["draft"], a["k"]): a for a in doc.get("acceptance", [])}
    sp = {(r["engine"], r["draft"], r["k"]): r for r in doc["speedup"]}
    configs = list(dict.fromkeys((r["draft"], r["k"]) for r in doc["speedup"]))
    body = []
    for draft, k in configs:
        if sum((e, draft, k) in sp for e in engines) < 2:
            continue
        row = [draft, k]
        for e in engines:
            r, a = sp.get((e, draft, k)), acc.get((e, draft, k), {})
            row += ["-" if r is None else f"{r['measured']:.2f} ({interval(r['ci_low'], r['ci_high'], r['pairs'])})",
                    "-" if r is None else _count(a.get("acceptance"), "{:.3f}")]
        body.append(row)
    if not body:
        return "No configuration was timed on more than one engine."
    return table(["draft", "k"] + [f"{e} {x}" for e in engines for x in ("speedup", "acceptance")], body)
