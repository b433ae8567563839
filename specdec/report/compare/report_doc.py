"""A report read back: `load` (a missing file, bad JSON, a document that is not a specdec report or not of the shape
this version reads, a NaN where a figure should be: each one line), and `comparable` (two reports measured the same
target, settings, drafts and threads, or a one-line refusal naming every difference). `compare` judges only what
passes both.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from specdec.util.errors import InputError

REQUIRED = ("machine", "settings", "costs", "acceptance", "speedup")
SETTINGS = ("prompt", "chars", "seed", "temperature", "ks")
OPTIONAL_SETTINGS = ("workload", "trees")  # compared too; a report without them has none
def load(path: str) -> dict:
    """A report document; a clear error for a missing file or one that is not a specdec report."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{path}: no such report.json")
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise InputError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    missing = [k for k in _required(doc) if k not in doc] if isinstance(doc, dict) else list(REQUIRED)
    if missing:
        raise InputError(f"{path}: not a specdec report (missing keys: {', '.join(missing)})")
    if bad := _misshapen(doc):
        raise InputError(f"{path}: not a report this version reads ({bad})")
    for key in ("costs", "acceptance", "speedup"):  # the figures compared: NaN or inf would compare as anything
        bad = _non_finite(doc.get(key, {}), key)
        if bad:
            raise InputError(f"{path}: {bad[0]} is {bad[1]}, not a finite number")
    return doc


ROW_KEYS = {"acceptance": ("draft", "k", "acceptance", "target_passes"), "speedup": ("draft", "k")}


def _required(doc: dict) -> tuple[str, ...]:
    """The keys a report must have: an engine report (`report --engine`) has no cost table."""
    return tuple(k for k in REQUIRED if k != "costs") if isinstance(doc, dict) and "engines" in doc else REQUIRED


def _misshapen(doc: dict) -> str | None:
    """What in doc does not have the shape `compare` reads (a hand-edited report, or another tool's), named in
    a few words; None when it fits. Per-sample keys an older report lacks are `_need`'s to name."""
    for key in ("machine", "settings", "costs"):
        if key in _required(doc) and not isinstance(doc[key], dict):
            return f"{key} is {type(doc[key]).__name__}, not an object"
    for key, needed in ROW_KEYS.items():
        rows = doc[key]
        if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
            return f"{key} is not a list of rows"
        for i, r in enumerate(rows):
            if missing := [k for k in needed if k not in r]:
                return f"{key}[{i}] lacks {', '.join(missing)}"
    for key in ("verify_pass_us", "drafts"):
        if not isinstance(doc.get("costs", {}).get(key, {}), dict):
            return f"costs.{key} is not an object"
    return None


SHIPPED_TARGET = {"name": "shipped", "architecture": "specdec-gpt", "vocab_size": 84,
                  "tokenizer": "corpus characters"}  # what a report made before targets were recorded measured
TARGET_KEYS = tuple(SHIPPED_TARGET)  # what makes two targets the same (protocol.describe)


def comparable(a: dict, b: dict) -> None:
    """ValueError (one line) unless A and B measured the same target and tokenizer, settings, drafts and thread
    count."""
    diffs = []
    ta, tb = (doc["settings"].get("target") or SHIPPED_TARGET for doc in (a, b))
    for key in TARGET_KEYS:
        if ta.get(key) != tb.get(key):
            diffs.append(f"target {key} {ta.get(key)!r} vs {tb.get(key)!r}")
    for key in SETTINGS:
        va, vb = _need(a, "A", "settings", key), _need(b, "B", "settings", key)
        if va != vb:
            diffs.append(f"{key} {va!r} vs {vb!r}")
    for key in OPTIONAL_SETTINGS:
        va, vb = a["settings"].get(key), b["settings"].get(key)
        if va != vb:
            long = isinstance(va, dict) or isinstance(vb, dict)  # a workload's run list is too long for a line
            diffs.append(f"{key} differs" if long else f"{key} {va!r} vs {vb!r}")
    ta, tb = _need(a, "A", "machine", "threads"), _need(b, "B", "machine", "threads")
    if ta != tb:
        diffs.append(f"threads {ta} vs {tb}")
    ea, eb = a["settings"].get("engines"), b["settings"].get("engines")
    if ea != eb:
        diffs.append(f"engines {ea or ['specdec (its own report)']} vs {eb or ['specdec (its own report)']}")
    da, db = set(_need(a, "A", "settings", "drafts")), set(_need(b, "B", "settings", "drafts"))
    if da != db:
        diffs.append(f"drafts {sorted(da)} vs {sorted(db)}")
    if diffs:
        raise InputError("refusing to compare reports that measured different things: " + "; ".join(diffs))


def _non_finite(x, where: str) -> tuple[str, float] | None:
    """The first NaN or infinite number inside x, with its dotted path."""
    if isinstance(x, float) and not math.isfinite(x):
        return where, x
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for key, value in items:
        if found := _non_finite(value, f"{where}.{key}"):
            return found
    return None


def _need(doc: dict, side: str, *keys: str):
    """doc[k1][k2]...; a one-line error naming the missing key (an older report lacks the per-sample keys)."""
    node = doc
    for i, key in enumerate(keys):
        if not isinstance(node, dict) or key not in node:
            raise InputError(f"report {side} lacks {'.'.join(keys[: i + 1])} (made by an older specdec "
                             "report? measure it again)")
        node = node[key]
    return node
