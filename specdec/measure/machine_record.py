"""What this machine's calibrations said about runs it has not seen yet: the between-run spread, recorded.

A report's re-run interval is built from its own pairs (block bootstrap, the A/A floor) and from the drift
between the halves of its own run. Neither can see a change of the machine's state that happens *between* two
runs: two back-to-back reports in a noisy stretch can differ on most rows while neither run's halves moved
(`specdec report --repeat 2` shows such a pair in its calibration.md).

Such a spread can only be learnt from earlier runs on the same machine, the way metrology adds a type B
uncertainty known from earlier calibrations of an instrument. `specdec report --repeat N` and
`specdec calibrate DIR` measure, for every row of a pair, the extra its interval needed to hold the other run's
figure, as a fraction of the figure (`calibrate.needs`), and append them here. A later report on the same
machine (same CPU model, cores, torch threads, device and backend) takes the split-conformal 95 % quantile τ
of the recent needs -- at least what the recent pairs needed to pass (`pair_quantile`) -- and adds it to every
speedup interval in quadrature (± 1.96·τ·figure), and says so. It is the same for a quiet run as for a noisy
one: the next run's state is what it covers, and a quiet run cannot know it. The record is a small JSON file
in the user's cache directory (`$XDG_CACHE_HOME/specdec/between-run.json`, by default under ~/.cache), written
atomically.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

from specdec.util.errors import InputError

RECENT = 10  # calibrations pooled: the machine's recent history, not every state it was ever in
LEVEL = 0.95  # the intervals are 95 % intervals: the term is what held 95 % of past row-directions
PAIR_SHARE = 0.90  # a calibration passes when each run's intervals hold the other's figure on this share of rows
UNITS = "fraction"  # what `needs` are in: a fraction of the row's figure
# The between-run term of a machine with no record yet (one standard deviation, a fraction of the figure). On
# the development VM, eleven back-to-back `specdec report --quick --drafts bigram ngram --ks 2 4` of one commit
# moved a speedup row's per-prompt figure by 1.1-2.6 % (standard deviation over the runs) against a 0.8-1.2 %
# standard error within each run: a between-run term of 1.5 % pooled over the rows, 2.4 % for the noisiest.
# 2 % until the machine's own calibrations replace it: conservative for most rows, not for every one.
DEFAULT_TAU = 0.02
# Calibrations a record needs before its own τ replaces the default: one quiet pair says little about the next
# state, and a shift of the machine shows only in some pairs.
MIN_CALIBRATIONS = 3


class RecordError(InputError):
    """The record file exists but cannot be read as a record."""


def path() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "specdec" / "between-run.json"


def key(machine: dict) -> str:
    """What makes two reports' machine states comparable: CPU model, cores, threads, device and backend."""
    return (f"{machine.get('cpu')} | {machine.get('cores')} cores | {machine.get('threads')} thread(s) | "
            f"{machine.get('device', 'cpu')} | {machine.get('backend', 'eager')}")


def _read(p: Path) -> dict:
    if not p.exists():
        return {}
    try:
        doc = json.loads(p.read_text())
        if not isinstance(doc, dict) or not all(isinstance(v, list) for v in doc.values()):
            raise ValueError("not a mapping of machine -> list of calibrations")
        return doc
    except (OSError, ValueError) as exc:
        raise RecordError(f"{p}: not a between-run record ({str(exc).splitlines()[0]}); delete it to start "
                          f"a new one") from None


def load(machine: dict) -> list[dict]:
    """This machine's recorded calibrations, oldest first ([] when none); entries in other units (an earlier
    version's) are left out."""
    return [e for e in _read(path()).get(key(machine), []) if e.get("units") == UNITS]


def quantile(entries: list[dict]) -> float | None:
    """τ: the extra (a fraction of the figure) that held `LEVEL` of the row-directions of the RECENT latest
    calibrations -- the split-conformal quantile, the ⌈(N + 1)·LEVEL⌉-th smallest of their N needs, so that a
    new run exchangeable with them is covered with probability at least LEVEL -- and never less than what the
    recent *pairs* needed to pass (`pair_quantile`). None when there are too few needs for the first (fewer
    than LEVEL / (1 - LEVEL) ≈ 19) or no calibration at all."""
    recent = entries[-RECENT:]
    needs = sorted(float(x) for e in recent for x in e["needs"])
    k = math.ceil((len(needs) + 1) * LEVEL)
    if not needs or k > len(needs):
        return None
    return max(needs[k - 1], pair_quantile(recent))


def pair_need(entry: dict) -> float:
    """The least extra that would have let one calibration pass: in each direction (the first `rows` needs, then
    the rest), the need ranked just past the misses a pass allows (⌊(1 − PAIR_SHARE)·rows⌋), the larger one."""
    n = [float(x) for x in entry["needs"]]
    rows = int(entry.get("rows") or len(n))
    out = 0.0
    for side in (n[:rows], n[rows:]):
        ranked = sorted(side, reverse=True)
        allowed = math.floor((1 - PAIR_SHARE) * len(side) + 1e-9)
        out = max(out, ranked[allowed] if allowed < len(ranked) else 0.0)
    return out


def pair_quantile(entries: list[dict]) -> float:
    """What the recent pairs needed to pass, as a quantile over pairs: the ⌈(N + 1)·PAIR_SHARE⌉-th smallest of
    their N pair needs, the largest while N is too small for that (under 9). A shift of the machine between two
    runs moves many rows at once, so the misses cluster in a pair: the row-direction quantile alone, mostly
    zeros, can stay at 0 while pairs fail (docs/calibration.md, "The re-run interval")."""
    needs = sorted(pair_need(e) for e in entries)
    if not needs:
        return 0.0
    k = math.ceil((len(needs) + 1) * PAIR_SHARE)
    return needs[min(k, len(needs)) - 1]


def append(machine: dict, entry: dict) -> Path:
    """Add one calibration to this machine's record: read, add and rewrite under a lock (two reports that
    calibrate at once each keep their entry), the rewrite atomic (a temporary file, then a rename)."""
    from specdec.util.files import locked, write_atomic  # here: report imports this module

    p = path()
    p.parent.mkdir(parents=True, exist_ok=True)
    with locked(p):
        doc = _read(p)
        doc.setdefault(key(machine), []).append(entry)
        write_atomic(p, json.dumps(doc, indent=1) + "\n")
    return p


def resolve(setting: str | None, machine: dict) -> dict:
    """The between-run term a report will use: {"tau", "source", "calibrations"}, τ a fraction of each figure.

    setting: "auto" (or None) -- this machine's record; while it has fewer than MIN_CALIBRATIONS calibrations
    (or too few needs), DEFAULT_TAU (source "default"): a first report on a new machine is re-run at another
    state of it too; "off" -- none.
    """
    if setting not in (None, "auto", "off"):
        raise InputError(f"--between-run must be auto or off, got {setting!r}")
    if setting == "off":
        return {"tau": 0.0, "source": "off", "calibrations": 0}
    entries = load(machine)[-RECENT:]
    tau = learnt(entries)
    if tau is None:
        return {"tau": DEFAULT_TAU, "source": "default", "calibrations": len(entries)}
    return {"tau": tau, "source": "record", "calibrations": len(entries)}


def learnt(entries: list[dict]) -> float | None:
    """The τ a record gives once it has MIN_CALIBRATIONS calibrations (`quantile` of the RECENT latest); None
    before, while reports take DEFAULT_TAU."""
    return quantile(entries) if len(entries) >= MIN_CALIBRATIONS else None
