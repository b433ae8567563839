"""Markdown pieces every report page uses: the padded pipe table, a row's configuration label and name, a
spread and a verdict cell. They read only the document's dicts."""

from __future__ import annotations


def table(headers: list[str], rows: list[list]) -> str:
    """A Markdown pipe table padded to column width, so it reads as well in a terminal as rendered."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in r] for r in rows]
    width = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    line = lambda r: "| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, width))) + " |"
    sep = "|" + "|".join("-" * (w + 1) + ":" if i else ":" + "-" * (w + 1) for i, w in enumerate(width)) + "|"
    return "\n".join([line(cells[0]), sep] + [line(r) for r in cells[1:]])


def verdict(r: dict) -> str:
    """The row's own verdict (`exactness.verdicts`); none shown for the target sampled directly."""
    return "" if r["p_value"] is None else r.get("verdict", "")  # reports saved before verdicts have none


NO_INTERVAL = "none: 1 pair"  # one pair has no spread: its "interval" would be a point drawn as a range
MIN_INTERVAL_PAIRS = 2


def interval(lo: float, hi: float, pairs: int | None, digits: int = 2) -> str:
    """A re-run interval as every table prints it, or NO_INTERVAL where it rests on fewer than two pairs."""
    if pairs is not None and pairs < MIN_INTERVAL_PAIRS:
        return NO_INTERVAL
    return f"{lo:.{digits}f}-{hi:.{digits}f}"


def spread(d: dict) -> str:
    return f"{d['median']:.2f} ({d['q1']:.2f}-{d['q3']:.2f}; {d['min']:.2f}-{d['max']:.2f})"


def config_cell(r: dict) -> str:
    """A row's configuration: its k for a chain, 'tree 4x2x2x1' (or 'tree budget 32') for a tree."""
    return str(r["k"]) if r.get("tree") is None else f"tree {r['tree']['shape']}"


def config_label(r: dict) -> str:
    """A row's configuration, as compare, calibration and the recommendations name it: 'k=8' for a chain,
    'tree 4x2x2x1' for a tree (a tree's k is its depth, so k alone would name two rows alike)."""
    return f"k={r['k']}" if r.get("tree") is None else f"tree {r['tree']['shape']}"


def row_name(r: dict) -> str:
    """A speedup row's name where rows of several drafts share one table (calibration, backends): its draft and
    configuration, 'ngram k=8' or 'bigram tree 4x2x2x1'."""
    return f"{r['draft']} {config_label(r)}"


def units(doc: dict) -> str:
    """What one generated position is in this report: settings.units ("characters" for the shipped model and
    for a report saved before targets were recorded, "tokens" for a subword target)."""
    return (doc.get("settings") or {}).get("units") or "characters"


def words(doc: dict) -> dict[str, str]:
    """The report's labels in its units: unit / units ("character(s)" or "token(s)"), per_pass and
    per_target_pass (the shipped model's "chars per pass" and "chars per target pass", word for word)."""
    if units(doc) == "characters":
        return {"unit": "character", "units": "characters", "per_pass": "chars per pass",
                "per_target_pass": "chars per target pass"}
    return {"unit": "token", "units": "tokens", "per_pass": "tokens per pass",
            "per_target_pass": "tokens per target pass"}
