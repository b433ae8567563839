import copy
import json

import numpy as np
import pytest

from specdec import cli, compare, render, report


@pytest.fixture(scope="module")
def doc(target):
    return report.measure(target, ["bigram", "int8"], [1, 2], quick=True, pairs=3, threads=1, chars=60,
                          log=lambda s: None)


def test_report_document_has_the_documented_schema(doc):
    assert set(doc["machine"]) >= {"cpu", "threads", "torch_version", "device", "commit"}
    assert doc["machine"]["threads"] == 1 and doc["machine"]["device"] == "cpu"
    assert [r["draft"] for r in doc["exactness"]] == ["target", "bigram", "int8"]
    assert all(r["verdict"] in ("exact", "CHECK") for r in doc["exactness"])
    assert [r["p_threshold"] for r in doc["exactness"][1:]] == [0.001 / 2] * 2  # Bonferroni over the drafts
    assert {(r["draft"], r["k"]) for r in doc["acceptance"]} == {(d, k) for d in ("bigram", "int8") for k in (1, 2)}
    for r in doc["acceptance"]:
        assert set(r) >= {"draft", "k", "acceptance", "chars_per_pass", "target_passes", "chars"}
    c = doc["costs"]
    assert set(c) >= {"target_pass_us", "verify_pass_us", "drafts"} and set(c["verify_pass_us"]) == {"2", "3"}
    assert set(c["drafts"]["bigram"]) >= {"char_us", "c", "weight_bytes"}
    for r in doc["speedup"]:
        assert set(r) >= {"draft", "k", "chars_per_pass", "predicted", "predicted_refined", "measured_median",
                          "measured_min", "measured_max", "ci_low", "ci_high", "pairs"}
        assert r["pairs"] == 3 and r["measured_min"] <= r["measured_median"] <= r["measured_max"]
    assert set(doc["recommendations"]) == {"bigram", "int8"}


def test_acceptance_rows_match_a_direct_generation(doc, target, draft_factory):
    import specdec

    row = next(r for r in doc["acceptance"] if r["draft"] == "int8" and r["k"] == 2)
    st = specdec.speculative_generate(target, draft_factory("int8"), "ROMEO:", 60, k=2, seed=0).stats
    assert (row["target_passes"], row["acceptance"]) == (st.target_passes, st.acceptance)


def test_predicted_is_the_writeup_formula_of_the_recorded_figures(doc):
    for r in doc["speedup"]:
        c = doc["costs"]["drafts"][r["draft"]]["c"]
        assert r["predicted"] == pytest.approx(r["chars_per_pass"] / (1 + r["k"] * c))


def test_tables_render_all_five_and_flag_noise(doc):
    noisy = copy.deepcopy(doc)
    noisy["speedup"][0].update(measured_min=0.5, measured_max=1.5, measured_median=1.0, noisy=True)
    text = render.tables(noisy)
    for title in ("1. Exactness", "2. Acceptance", "3. Measured speedup", "4. Costs", "5. Predicted"):
        assert title in text
    assert "noisy: range 100% of median; rerun with --pairs" in text


def test_write_is_all_or_nothing(doc, tmp_path, monkeypatch):
    paths = report.write(doc, tmp_path, render.tables(doc))
    assert {p.name for p in paths} == {"report.md", "report.json", "speedup.png"}
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(render, "plot", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.write({**doc, "wall_seconds": -1}, tmp_path, "new")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # earlier report intact, no temp


def test_compare_flags_a_costlier_draft_and_not_an_identical_report(doc, tmp_path, capsys):
    a = tmp_path / "a.json"
    a.write_text(json.dumps(doc))
    assert cli.main(["compare", str(a), str(a)]) == 0
    assert "no draft cost moved" in capsys.readouterr().out
    worse = copy.deepcopy(doc)
    d = worse["costs"]["drafts"]["bigram"]
    lo, hi = d["c_range"]
    d["c"], d["c_range"], d["char_us"] = hi * 1.2, (hi * 1.1, hi * 1.3), d["char_us"] * 1.2
    b = tmp_path / "b.json"
    b.write_text(json.dumps(worse))
    assert cli.main(["compare", str(a), str(b)]) == 1
    out = capsys.readouterr().out
    assert "WORSE draft cost: bigram" in out and "int8" not in out.split("WORSE")[-1]


def test_compare_rejects_what_is_not_a_report(tmp_path):
    p = tmp_path / "x.json"
    p.write_text('{"a": 1}')
    with pytest.raises(ValueError, match="not a specdec report"):
        compare.load(str(p))


def test_findings_are_computed_from_the_figures(doc):
    lines = render.findings(doc)
    acc = {r["draft"]: r["acceptance"] for r in doc["acceptance"] if r["k"] == 1}
    top, bottom = max(acc, key=acc.get), min(acc, key=acc.get)
    assert lines[0].startswith(f"Best acceptance at k=1: {top}, {acc[top]:.3f}")
    assert lines[1].startswith(f"Worst acceptance at k=1: {bottom}, {acc[bottom]:.3f}")
    n_ok = sum(abs(r["predicted_refined"] / r["measured_median"] - 1) <= 0.05 for r in doc["speedup"])
    assert any(f"refined prediction is within 5% on {n_ok}/{len(doc['speedup'])} rows" in x for x in lines)


def test_adaptive_rows_face_each_drafts_best_fixed_k(doc, target, draft_factory):
    import specdec

    assert [r["draft"] for r in doc["adaptive"]] == ["bigram", "int8"]
    for r in doc["adaptive"]:
        fixed = [x for x in doc["speedup"] if x["draft"] == r["draft"]]
        assert r["best_fixed_k"] == max(fixed, key=lambda x: x["measured_median"])["k"]
        st = specdec.speculative_generate(target, draft_factory(r["draft"]), "ROMEO:", 60, k=r["start_k"], seed=0,
                                          adaptive=True, k_max=r["k_max"]).stats
        assert (r["target_passes"], r["mean_k"], r["acceptance"]) == (st.target_passes, st.mean_k, st.acceptance)
        assert r["pairs"] == 3 and r["vs_fixed_min"] <= r["vs_fixed_median"] <= r["vs_fixed_max"]
    text = render.tables(doc)
    assert "## Adaptive k" in text and "adaptive ÷ fixed" in text
    assert any(x.startswith("Adaptive k against the best fixed k") for x in render.findings(doc))


@pytest.mark.parametrize("to_err,spec_err,share,note", [
    (0.12, 0.01, 0.8, "off in the paired runs: target-only step +12.0%, draft character cost +1.0%"),
    (0.01, -0.09, 0.8, "off in the paired runs: draft character cost -9.0%, target-only step +1.0%"),
    (0.00, 0.07, 0.1, "off in the paired runs: verify round cost +7.0%, target-only step +0.0%"),
])
def test_a_missed_row_names_the_term_that_was_off(to_err, spec_err, share, note):
    row = {"predicted_refined": 1.10, "measured_median": 1.0, "target_only_error": to_err,
           "speculative_error": spec_err, "draft_share": share}
    assert render._miss_note(row) == note
    assert render._miss_note({**row, "predicted_refined": 1.04}) == ""  # within 5 %: no note


def test_an_uncertain_row_gets_as_many_pairs_again_pooled(target, monkeypatch):
    monkeypatch.setitem(report.QUICK, "retake_ci", -1.0)  # every row counts as uncertain
    logs = []
    doc = report.measure(target, ["bigram"], [2], quick=True, pairs=3, chars=30, log=logs.append)
    (row,) = doc["speedup"]
    first, pooled = row["ci_widths"]
    assert row["retaken"] and row["pairs"] == 6 == len(row["ratios"])
    assert report._ci_width(row) == pytest.approx(pooled)
    assert row["measured_median"] == pytest.approx(float(np.median(row["ratios"])))
    assert any(line.startswith("[4/4] more pairs for bigram k=2") for line in logs)
    assert "pairs doubled (CI" in render.tables(doc)


def test_quick_reports_never_retake(doc):
    assert not any(r["retaken"] for r in doc["speedup"])


def test_at_most_half_the_rows_get_more_pairs_the_most_uncertain_first(target, monkeypatch):
    monkeypatch.setitem(report.QUICK, "retake_ci", -1.0)
    doc = report.measure(target, ["bigram"], [1, 2], quick=True, pairs=3, chars=30, log=lambda s: None)
    again = [r for r in doc["speedup"] if r["retaken"]]
    other = [r for r in doc["speedup"] if not r["retaken"]]
    assert len(again) == 1 == len(other)
    assert again[0]["ci_widths"][0] >= report._ci_width(other[0])
