"""Calibration of the re-run intervals: what a pair of runs says, and the per-machine between-run record."""

import json
import math
import subprocess
import sys

import pytest

from specdec.report.compare import calibrate
from specdec.measure import machine_record

Z = calibrate.Z95
MACHINE = {"cpu": "Test CPU @ 1GHz", "cores": 2, "threads": 1, "device": "cpu", "backend": "eager"}


def _doc(rows: dict, floor_width: float = 0.2, applied: float = 0.0) -> dict:
    """A report document with what calibration reads: name -> (figure, low, high); `applied` the between-run τ
    its intervals already carry (each side h widened to √(h² + (Z·τ·figure)²))."""
    def widen(m, lo, hi):
        e = Z * applied * m
        return m, m - math.hypot(m - lo, e), m + math.hypot(hi - m, e)

    return {"machine": dict(MACHINE, date="2026-11-30T00:00:00+00:00", commit="abc"), "settings": {"quick": False},
            "noise_floor": {"measured": 1.0, "ci_low": 0.9, "ci_high": 1.1, "width": floor_width,
                            "between_run": {"tau": applied}},
            "speedup": [{"draft": d, "k": k, "tree": None, **dict(zip(("measured", "ci_low", "ci_high"), widen(*v)))}
                        for (d, k), v in rows.items()]}


def test_needs_by_hand():
    a = _doc({("ngram", 8): (1.0, 0.9, 1.1), ("int8", 1): (2.0, 1.8, 2.2)})
    b = _doc({("ngram", 8): (1.3, 1.2, 1.4), ("int8", 1): (2.1, 2.0, 2.2)})
    # ngram: gap 0.3 beyond a side of 0.1: √(0.09 - 0.01) / (Z · 1.0), a fraction of a's figure
    assert calibrate.needs(a, b) == pytest.approx([math.sqrt(0.08) / Z, 0.0])
    # the other way: b's lower side 0.1 against a gap of 0.3; int8: 0.1 inside b's lower side 0.1 -> 0
    assert calibrate.needs(b, a) == pytest.approx([math.sqrt(0.08) / (Z * 1.3), 0.0])
    br = calibrate.between_run(a, b)
    assert br["rows"] == 2 and br["needs"] == pytest.approx(calibrate.needs(a, b) + calibrate.needs(b, a))
    assert br["mean_shift"] == pytest.approx((math.log(1 / 1.3) + math.log(2 / 2.1)) / 2)


def test_needs_undo_the_term_a_report_already_carried():
    """A record must learn what intervals lacked before its own term, or it would shrink towards nothing."""
    rows_a = {("ngram", 8): (1.0, 0.9, 1.1), ("bigram", 4): (1.5, 1.4, 1.55)}
    b = _doc({("ngram", 8): (1.3, 1.2, 1.4), ("bigram", 4): (1.2, 1.1, 1.3)})
    plain = calibrate.needs(_doc(rows_a), b)
    assert calibrate.needs(_doc(rows_a, applied=0.05), b) == pytest.approx(plain)
    assert plain[0] > 0 and plain[1] > 0


@pytest.mark.parametrize("n,expected", [(20, 19.0), (40, 38.0), (18, None), (0, None)])
def test_the_conformal_quantile_by_hand(n, expected):
    # needs 0, 1, ..., n-1: the ⌈(n + 1) · 0.95⌉-th smallest (n = 20: the 20th, 19; n = 40: ⌈38.95⌉ = 39th, 38)
    entries = [{"needs": list(map(float, range(n)))[: n // 2], "units": "fraction"},
               {"needs": list(map(float, range(n)))[n // 2 :], "units": "fraction"}]
    assert machine_record.quantile(entries if n else []) == expected


def test_a_pairs_need_is_what_it_lacked_to_pass_by_hand():
    # 10 rows a direction: a pass allows ⌊0.1 · 10⌋ = 1 miss, so a direction needs its 2nd largest need
    e = {"needs": [0.05, 0.04] + [0.0] * 8 + [0.0] * 9 + [0.02], "rows": 10, "units": "fraction"}
    assert machine_record.pair_need(e) == 0.04
    # 19 pairs needing 0.01 .. 0.19: the ⌈20 · 0.9⌉ = 18th smallest; under 9 pairs, the largest
    pairs = [{"needs": [x / 100] * 4, "rows": 2} for x in range(1, 20)]
    assert machine_record.pair_quantile(pairs) == pytest.approx(0.18)
    assert machine_record.pair_quantile(pairs[:5]) == pytest.approx(0.05)
    assert machine_record.pair_quantile([]) == 0.0


def test_misses_clustered_in_one_pair_raise_the_term_the_pooled_quantile_leaves_at_zero():
    # nine quiet pairs and one whose first direction missed two rows: 200 needs, 2 above 0, so the pooled
    # ⌈201 · 0.95⌉ = 191st smallest is 0; the pairs' ⌈11 · 0.9⌉ = 10th smallest is that pair's need, 0.04
    quiet = [{"needs": [0.0] * 20, "rows": 10, "units": "fraction"}] * 9
    shifted = {"needs": [0.05, 0.04] + [0.0] * 18, "rows": 10, "units": "fraction"}
    assert machine_record.quantile(quiet + [shifted]) == 0.04
    assert machine_record.quantile(quiet + [quiet[0]]) == 0.0


def test_only_the_recent_calibrations_count():
    old = [{"needs": [100.0] * 20, "units": "fraction"}]
    recent = [{"needs": [0.0] * 20, "units": "fraction"}] * machine_record.RECENT
    assert machine_record.quantile(old + recent) == 0.0
    assert machine_record.quantile(recent[1:] + old) == 100.0


def test_record_round_trip_per_machine_and_resolve():
    # no record yet: the stated default, named as such
    assert machine_record.resolve("auto", MACHINE) == {"tau": machine_record.DEFAULT_TAU, "source": "default",
                                                       "calibrations": 0}
    path = machine_record.append(MACHINE, {"needs": [0.05] * 30, "units": "fraction"})
    machine_record.append(MACHINE, {"needs": [9.0] * 30})  # an earlier version's units: left out
    assert path.parent.name == "specdec" and len(json.loads(path.read_text())[machine_record.key(MACHINE)]) == 2
    # one calibration is not yet a record: the default holds until MIN_CALIBRATIONS, then the record's τ
    assert machine_record.resolve(None, MACHINE) == {"tau": machine_record.DEFAULT_TAU, "source": "default",
                                                     "calibrations": 1}
    for _ in range(machine_record.MIN_CALIBRATIONS - 1):
        machine_record.append(MACHINE, {"needs": [0.05] * 30, "units": "fraction"})
    assert machine_record.resolve(None, MACHINE) == {"tau": 0.05, "source": "record",
                                                     "calibrations": machine_record.MIN_CALIBRATIONS}
    assert machine_record.resolve("off", MACHINE) == {"tau": 0.0, "source": "off", "calibrations": 0}
    other = dict(MACHINE, threads=2)  # another thread count: another machine state, its own record
    assert machine_record.load(other) == [] and len(machine_record.load(MACHINE)) == machine_record.MIN_CALIBRATIONS
    with pytest.raises(ValueError, match="--between-run must be auto or off, got '0.1'"):
        machine_record.resolve("0.1", MACHINE)


def test_a_corrupt_record_is_one_line_naming_it():
    p = machine_record.path()
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("{not json")
    with pytest.raises(machine_record.RecordError) as info:
        machine_record.load(MACHINE)
    assert str(p) in str(info.value) and "delete it" in str(info.value) and "\n" not in str(info.value)


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "specdec.cli", *args], capture_output=True, text=True, timeout=120)


def test_calibrate_command_reads_a_repeat_folder_and_records_it(tmp_path):
    a = _doc({("ngram", 8): (1.0, 0.9, 1.1), ("int8", 1): (2.0, 1.8, 2.2)})
    b = _doc({("ngram", 8): (1.3, 1.2, 1.4), ("int8", 1): (2.1, 2.0, 2.2)})
    (tmp_path / "repeat-2").mkdir()
    (tmp_path / "report.json").write_text(json.dumps(a))
    (tmp_path / "repeat-2" / "report.json").write_text(json.dumps(b))
    out = _cli("calibrate", str(tmp_path))
    # a covers b: floor yes, ngram no, int8 yes (2/3 < 90 %): exit 1
    assert out.returncode == 1, out.stderr
    assert "contain run 2's median on 2/3 rows" in out.stdout and "2 of 4 row-directions needed more" in out.stdout
    assert "this machine now has 1" in out.stderr
    cal = json.loads((tmp_path / "calibration.json").read_text())[0]
    assert cal["between_run"]["rows"] == 2 and cal["against_rerun"]["n"] == 0  # these rows carry no prediction
    assert len(machine_record.load(MACHINE)) == 1
    assert _cli("calibrate", str(tmp_path), "--no-record").returncode == 1
    assert len(machine_record.load(MACHINE)) == 1
    (tmp_path / "repeat-2" / "report.json").unlink()
    bad = _cli("calibrate", str(tmp_path))
    assert bad.returncode == 2 and "needs report.json and repeat-2/report.json" in bad.stderr
    assert len(bad.stderr.strip().splitlines()) == 1


def _predicted(doc: dict, before: dict) -> dict:
    """doc with each speedup row's predicted_before set from {(draft, k): prediction}."""
    for r in doc["speedup"]:
        r["predicted_before"] = before[r["draft"], r["k"]]
    return doc


def test_against_rerun_by_hand():
    a = _predicted(_doc({("ngram", 8): (2.0, 1.8, 2.2), ("int8", 1): (0.8, 0.7, 0.9), ("bigram", 2): (1.0, 0.9, 1.1)}),
                   {("ngram", 8): 2.08, ("int8", 1): 0.9, ("bigram", 2): 1.0})
    b = _predicted(_doc({("ngram", 8): (2.18, 2.0, 2.4), ("int8", 1): (0.84, 0.7, 0.9), ("bigram", 2): (1.08, 1.0, 1.2)}),
                   {("ngram", 8): 2.18, ("int8", 1): 0.7, ("bigram", 2): 1.0})
    ag = calibrate.against_rerun(a, b)
    assert [r["row"] for r in ag["rows"]] == ["ngram k=8", "int8 k=1", "bigram k=2"]
    # a: 2.08/2.0 - 1 = +4 %, 0.9/0.8 - 1 = +12.5 %, 0; b: 0, 0.7/0.84 - 1 = -16.7 %, 1.0/1.08 - 1 = -7.4 %
    assert [r["a_error"] for r in ag["rows"]] == pytest.approx([0.04, 0.125, 0.0])
    assert [r["b_error"] for r in ag["rows"]] == pytest.approx([0.0, 0.7 / 0.84 - 1, 1 / 1.08 - 1])
    # the re-run: b's measured over a's: +9 %, +5 %, +8 %
    assert [r["rerun_error"] for r in ag["rows"]] == pytest.approx([0.09, 0.05, 0.08])
    assert ag["n"] == 3
    assert ag["a_error"]["within"] == {"0.05": 2, "0.1": 2}
    assert ag["b_error"]["within"] == {"0.05": 1, "0.1": 2}
    assert ag["rerun_error"]["within"] == {"0.05": 1, "0.1": 3}
    assert ag["a_error"]["largest"] == pytest.approx(0.125)
    assert ag["rerun_error"]["rms"] == pytest.approx(math.sqrt((0.0081 + 0.0025 + 0.0064) / 3))
    text = calibrate.render([{**calibrate.coverage(a, b), "against_rerun": ag}])
    assert "| int8 k=1 | +12.5% | -16.7% | +5.0% |" in text
    assert "Within 10%: the prediction on 2/3 rows of run 1 and 2/3 of run 2; run 2's measured figure is within " \
           "10% of run 1's on 3/3." in text


def test_against_rerun_skips_rows_without_a_prediction():
    a = _predicted(_doc({("ngram", 8): (2.0, 1.8, 2.2), ("int8", 1): (0.8, 0.7, 0.9)}), {("ngram", 8): 2.0, ("int8", 1): 0.8})
    b = _doc({("ngram", 8): (2.0, 1.8, 2.2), ("int8", 1): (0.8, 0.7, 0.9)})  # a report from before the key existed
    ag = calibrate.against_rerun(a, b)
    assert ag["n"] == 0 and ag["rerun_error"]["largest"] is None
    assert "against a re-run" not in calibrate.render([{**calibrate.coverage(a, b), "against_rerun": ag}])
