"""`specdec compare A/report.json B/report.json`: two machines or two commits side by side, without asv.

Every row shows A's figure, B's and B/A. Costs are judged by c, the draft character's cost in target passes,
because each of its samples is a ratio of two timings taken at the same moment: machine drift and a faster or
slower machine cancel in it, and what is left is the draft's own cost. A draft is flagged as worse when B's
median c lies above everything A measured (A's maximum) and A's median lies below everything B measured (B's
minimum): a move that the two measured ranges cannot explain. Any flag makes the exit code 1.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

REQUIRED = ("machine", "costs", "acceptance", "speedup")


def load(path: str) -> dict:
    """A report document; a clear error for a missing file or one that is not a specdec report."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{path}: no such report.json")
    try:
        doc = json.loads(p.read_text())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not valid JSON ({exc.msg} at line {exc.lineno})") from None
    missing = [k for k in REQUIRED if k not in doc]
    if missing:
        raise ValueError(f"{path}: not a specdec report (missing keys: {', '.join(missing)})")
    for key in ("costs", "acceptance", "speedup"):  # the figures compared: NaN or inf would compare as anything
        bad = _non_finite(doc[key], key)
        if bad:
            raise ValueError(f"{path}: {bad[0]} is {bad[1]}, not a finite number")
    return doc


def _non_finite(x, where: str) -> tuple[str, float] | None:
    """The first NaN or infinite number inside x, with its dotted path."""
    if isinstance(x, float) and not math.isfinite(x):
        return where, x
    items = x.items() if isinstance(x, dict) else enumerate(x) if isinstance(x, list) else ()
    for key, value in items:
        if found := _non_finite(value, f"{where}.{key}"):
            return found
    return None


def _ratio(a: float, b: float) -> str:
    return f"{b / a:.3f}" if a else "n/a"


def draft_regressions(a: dict, b: dict) -> dict[str, str]:
    """Drafts whose cost c got worse beyond both measured ranges, with the reason."""
    out = {}
    for name, db in b["costs"]["drafts"].items():
        da = a["costs"]["drafts"].get(name)
        if da is None:
            continue
        a_lo, a_hi = da.get("c_range", (da["c"], da["c"]))
        b_lo, b_hi = db.get("c_range", (db["c"], db["c"]))
        if db["c"] > a_hi and da["c"] < b_lo:
            out[name] = (f"c {da['c']:.4f} -> {db['c']:.4f} ({db['c'] / da['c'] - 1:+.1%}); "
                         f"A's range {a_lo:.4f}-{a_hi:.4f}, B's {b_lo:.4f}-{b_hi:.4f}")
    return out


def compare(a: dict, b: dict) -> tuple[str, dict[str, str]]:
    """The comparison as text, and the draft-cost regressions (empty when none)."""
    lines = [f"A: {a['machine'].get('cpu')} · {a['machine'].get('threads')} thread(s) · commit "
             f"{a['machine'].get('commit')}",
             f"B: {b['machine'].get('cpu')} · {b['machine'].get('threads')} thread(s) · commit "
             f"{b['machine'].get('commit')}", ""]
    ca, cb = a["costs"], b["costs"]
    lines.append(f"{'row':38} {'A':>10} {'B':>10} {'B/A':>7}")
    lines.append(f"{'target pass (us)':38} {ca['target_pass_us']:>10.1f} {cb['target_pass_us']:>10.1f} "
                 f"{_ratio(ca['target_pass_us'], cb['target_pass_us']):>7}")
    worse = draft_regressions(a, b)
    for name, db in cb["drafts"].items():
        da = ca["drafts"].get(name)
        if da is None:
            continue
        lines.append(f"{name + ' char (us)':38} {da['char_us']:>10.2f} {db['char_us']:>10.2f} "
                     f"{_ratio(da['char_us'], db['char_us']):>7}")
        flag = "  WORSE" if name in worse else ""
        lines.append(f"{name + ' c':38} {da['c']:>10.4f} {db['c']:>10.4f} {_ratio(da['c'], db['c']):>7}{flag}")
    acc_a = {(r["draft"], r["k"]): r for r in a["acceptance"]}
    for r in b["acceptance"]:
        ra = acc_a.get((r["draft"], r["k"]))
        if ra:
            lines.append(f"{r['draft'] + ' k=' + str(r['k']) + ' acceptance':38} {ra['acceptance']:>10.3f} "
                         f"{r['acceptance']:>10.3f} {_ratio(ra['acceptance'], r['acceptance']):>7}")
    sp_a = {(r["draft"], r["k"]): r for r in a["speedup"]}
    for r in b["speedup"]:
        ra = sp_a.get((r["draft"], r["k"]))
        if ra:
            lines.append(f"{r['draft'] + ' k=' + str(r['k']) + ' speedup (median)':38} "
                         f"{ra['measured_median']:>10.2f} {r['measured_median']:>10.2f} "
                         f"{_ratio(ra['measured_median'], r['measured_median']):>7}")
    lines.append("")
    if worse:
        lines += [f"WORSE draft cost: {name}: {why}" for name, why in worse.items()]
    else:
        lines.append("no draft cost moved beyond what the measured ranges explain")
    return "\n".join(lines), worse
