import copy
import json
import subprocess
import sys

import numpy as np
import pytest

from specdec.measure import machine_record

from specdec.report.compare import calibrate
from specdec.report import figures, findings, headline, paired_sections, render, render_speedup, build as report
from specdec.measure import stats

from tests.conftest import REPORT_BUDGET as BUDGET


@pytest.fixture(scope="module")
def doc(report_doc):
    return report_doc


def _chains(rows):
    return [r for r in rows if r["tree"] is None]


def test_report_document_has_the_documented_schema(doc):
    m = doc["machine"]
    assert set(m) >= {"cpu", "threads", "interop_threads", "cpu_affinity", "torch_version", "device", "commit",
                      "load_start", "load_end", "backend"}
    assert m["threads"] == 1 and m["device"] == "cpu" and m["backend"] == "eager"
    assert doc["settings"]["budget"] == BUDGET and doc["settings"]["min_pairs"] == 3
    assert [r["draft"] for r in _chains(doc["exactness"])] == ["target", "bigram", "int8"]  # quick: one context
    for r in doc["exactness"]:  # exactness.verdicts' rule on each row's own p-value
        assert r["verdict"] == ("exact" if r["p_value"] is None or r["p_value"] > r["p_threshold"] else "CHECK")
    # the draws are seeded (seed 0 at every context), so the shipped drafts' verdicts are fixed: exact
    assert [r["verdict"] for r in doc["exactness"]] == ["exact"] * len(doc["exactness"])
    tested = [r for r in doc["exactness"] if r["p_value"] is not None]  # chains and trees, every context
    assert {r["p_threshold"] for r in doc["exactness"]} == {0.001 / len(tested)}  # Bonferroni over the table
    assert {(r["draft"], r["k"]) for r in _chains(doc["acceptance"])} == {(d, k) for d in ("bigram", "int8")
                                                                        for k in (1, 2)}
    for r in _chains(doc["acceptance"]):
        assert set(r) >= {"draft", "k", "acceptance", "alpha", "expected_length", "bunched", "chars_per_pass",
                          "target_passes", "chars"}
    c = doc["costs"]
    assert set(c) >= {"target_pass_us", "verify_pass_us", "verify_ratio_samples", "drafts", "samples"}
    assert set(c["verify_pass_us"]) == {"2", "3"} == set(c["verify_ratio_samples"])
    assert set(c["drafts"]["bigram"]) >= {"char_us", "c", "c_samples", "weight_bytes"}
    assert len(c["drafts"]["bigram"]["c_samples"]) == c["samples"] >= 3
    f = doc["noise_floor"]
    # the schedule runs on conftest's fake clock: every row gets its minimum of 3 pairs on any machine
    assert set(f) >= {"median", "ci_low", "ci_high", "pairs", "ratios"} and f["pairs"] == len(f["ratios"]) >= 3
    for r in doc["speedup"]:
        assert set(r) >= {"draft", "k", "chars_per_pass", "predicted", "predicted_before", "predicted_refined",
                          "measured_median", "measured_min", "measured_max", "ci_low", "ci_high", "pairs", "ratios"}
        assert r["pairs"] == len(r["ratios"]) >= 3 and r["measured_min"] <= r["measured_median"] <= r["measured_max"]
        assert r["measured_median"] == pytest.approx(float(np.median(r["ratios"])))
        assert r["ci_low"] <= r["measured"] <= r["ci_high"]
    assert set(doc["recommendations"]) == {"bigram", "int8"}
    assert doc["sizing"]["changes"] == [] and "budget_needed" not in doc["sizing"]  # the shipped model fits as it is
    assert [s["section"].split(":")[0] for s in doc["sections"]] == [
        "drafts", "sizing", "trees", "exactness", "acceptance over 3 run(s) (deterministic)",
        "acceptance, the write-up's prompt and seed",
        "overhead", "costs", "speedup", "adaptive k", "greedy (temperature 0)"]


def test_the_timed_sections_share_the_budget(doc):
    # (keeping to the clock itself is tested in test_schedule with a fake clock; here the allotments add up)
    timed = [s for s in doc["sections"] if s["allotted"] is not None]
    assert [s["section"].split(":")[0] for s in timed] == ["overhead", "costs", "speedup", "adaptive k",
                                                             "greedy (temperature 0)"]
    assert sum(report.SHARES.values()) == pytest.approx(1.0)
    for sec, name in zip(timed, ("overhead", "costs")):  # a share of what the fixed work left (and the overhead)
        assert 0 < sec["allotted"] <= report.SHARES[name] * BUDGET
    # each section's seconds are rounded to 0.01 s: up to 0.005 s each above what it took
    assert sum(s["seconds"] for s in doc["sections"]) <= doc["wall_seconds"] + 0.005 * len(doc["sections"])


def test_state_shift_is_the_rows_median_step_change_and_warned_beyond_ten_percent(doc):
    changes = sorted(r["terms_us"]["step"] / r["before_terms_us"]["step"] - 1 for r in doc["speedup"])
    assert doc["state_shift"] == pytest.approx(float(np.median(changes)))
    assert (abs(doc["state_shift"]) > 0.10) == any("during the pairs than in the cost table" in w
                                                   for w in doc["warnings"])


def test_overhead_rows_are_the_report_targets_passes_against_the_recorded_floor(doc, target):
    from specdec.measure.anatomy import profiler_split, roofline

    setup = doc["overhead_setup"]
    m, cfg = setup["machine"], target.config
    assert [r["positions"] for r in doc["overhead"]] == [1, 2, 3, 5, 9] and setup["context_pos"] == 100
    for r in doc["overhead"]:
        assert set(r) >= {"backend", "positions", "measured_us", "floor_us", "share"} and r["backend"] == "eager"
        flops = roofline.pass_flops(cfg, r["positions"], 100)
        nbytes = roofline.pass_bytes(cfg, r["positions"], 100)
        # the roofline by hand: µs = FLOP / (GFLOP/s · 1e3), bytes / (GB/s · 1e3), the larger
        assert r["floor_us"] == pytest.approx(max(flops / (m["matmul_gflops"] * 1e3), nbytes / (m["cache_gbps"] * 1e3)))
        assert r["share"] == pytest.approx(1 - r["floor_us"] / r["measured_us"]) and r["measured_us"] > 0
    assert m["threads"] == doc["machine"]["threads"] == 1
    assert set(doc["attribution"]) == {"eager"} and (setup["draft"], setup["k"]) == ("bigram", 4)
    # quick: the smaller profiled blocks
    assert (setup["chars"], setup["repeats"]) == (report.QUICK["overhead_chars"], report.QUICK["overhead_repeats"])
    assert set(doc["attribution"]["eager"]) == {"step", "round"}
    for scope in ("step", "round"):
        cats = doc["attribution"]["eager"][scope]
        assert list(cats) == list(profiler_split.CATEGORIES)
        assert sum(cats.values()) == pytest.approx(setup["totals"]["eager"][scope]["accounted_us"])
    assert doc["attribution"]["eager"]["step"]["the rule"] == 0 < doc["attribution"]["eager"]["round"]["the rule"]
    text = render.tables(doc)
    assert "## Overhead: the eager target pass against its roofline floor" in text
    assert "### Where the time goes, eager backend" in text
    assert text.index("## 4. Costs") < text.index("## Overhead") < text.index("## 5. Predicted")


def test_acceptance_rows_pool_direct_generations_of_the_workload_runs(doc, target, draft_factory):
    import specdec
    from specdec.measure import workload

    runs = workload.load_workload("shakespeare24").cycled(8)  # what --quick runs
    assert doc["settings"]["workload"]["runs"] == [[item.id, seed] for item, seed in runs]
    row = next(r for r in doc["acceptance"] if r["draft"] == "int8" and r["k"] == 2)
    sts = [specdec.speculative_generate(target, draft_factory("int8"), item.prompt, 60, k=2, seed=seed).stats
           for item, seed in runs]
    assert row["target_passes"] == sum(s.target_passes for s in sts)
    assert [e["target_passes"] for e in row["per_item"]] == [s.target_passes for s in sts]
    accepted, hist = sum(s.accepted for s in sts), row["accepted_per_position"]
    assert row["acceptance"] == accepted / sum(s.drafted for s in sts)
    assert row["alpha"] == pytest.approx(accepted / (accepted + hist[0] + hist[1]))


def test_the_writeup_table_is_romeo_seed_0_exactly(doc, target, draft_factory):
    import specdec

    aw = doc["acceptance_writeup"]
    assert (aw["prompt"], aw["seed"]) == ("ROMEO:", 0)
    for r in aw["rows"]:
        st = specdec.speculative_generate(target, draft_factory(r["draft"]), "ROMEO:", 60, k=r["k"], seed=0).stats
        assert (r["target_passes"], r["acceptance"]) == (st.target_passes, st.acceptance)


def test_speedup_rows_are_the_workloads_ratio_of_total_times(doc):
    for r in doc["speedup"] + [doc["noise_floor"]]:
        assert r["measured_min"] <= r["measured"] <= r["measured_max"]
        assert len(r["per_item_ratios"]) == r["items"] == 3  # at least 3 pairs, over the quick run's 3 prompts
        assert r["workload_ci_low"] <= r["workload_ci_high"]


def test_predicted_is_the_writeup_formula_of_the_recorded_figures(doc):
    for r in doc["speedup"]:
        c = doc["costs"]["drafts"][r["draft"]]["c"]
        per_round = r["k"] if r["tree"] is None else r["drafted_per_round"]  # a tree's round drafts its nodes
        assert r["predicted"] == pytest.approx(r["chars_per_pass"] / (1 + per_round * c))


def test_the_prediction_before_the_run_uses_the_cost_tables_terms(doc):
    """The median, over the cost table's samples (all taken before the first pair), of the refined model with
    the workload's pooled counts: each of the n generations' first step and first round (its k drafts, or a
    tree's mean nodes per round) priced apart."""
    acc = {(r["draft"], r["k"], str(r.get("tree"))): r for r in doc["acceptance"]}
    for r in doc["speedup"]:
        a = acc[r["draft"], r["k"], str(r.get("tree"))]
        n, kf = a["runs"], (r["k"] if r["tree"] is None else r["drafted_per_round"])
        per_sample = [((a["chars"] - n) * step + n * first_step)
                      / ((a["target_passes"] - n) * rnd + (a["drafted"] - n * kf) * char + n * first_round)
                      for step, char, rnd, first_step, first_round in r["before_terms_samples"]]
        assert len(per_sample) == doc["costs"]["samples"]
        assert r["predicted_before"] == pytest.approx(float(np.median(per_sample)))


def test_the_drift_comes_from_the_rows_halves_and_widens_every_interval(doc):
    """τ recomputed from the document alone: each row's per-pair log ratios in the order measured (visit i ran
    the workload's run i mod runs), plus log(that run's target passes / the row's mean), halves compared."""
    acc = {(r["draft"], r["k"], str(r.get("tree"))): r for r in doc["acceptance"]}
    series = []
    for r in doc["speedup"]:
        passes = np.array([it["target_passes"] for it in acc[r["draft"], r["k"], str(r.get("tree"))]["per_item"]],
                          dtype=float)
        visits = np.arange(r["pairs"]) % passes.size
        series.append(np.log(r["ratios"]) + np.log(passes[visits] / passes.mean()))
    tau, rows = stats.drift(series)
    assert doc["noise_floor"]["drift"] == pytest.approx(tau) and doc["noise_floor"]["drift_rows"] == rows
    for r in doc["speedup"]:
        assert r["width"] >= r["pairs_width"] - 1e-12
        if tau > 0:
            assert r["width"] > r["pairs_width"]


def test_tables_render_everything_with_the_noise_floor_first(doc):
    text = render.tables(doc)
    for title in ("1. Exactness", "2. Acceptance", "3. Measured speedup", "4. Costs", "5. Predicted",
                  "## Time spent"):
        assert title in text
    table3 = text.split("## 3.")[1]
    assert table3.splitlines()[4].startswith("| noise floor: target-only / target-only (A/A)")


def test_the_report_opens_with_the_headline_and_report_json_keeps_its_facts(doc):
    text = render.tables(doc)
    assert text.startswith(headline.headline(doc) + "\n\n## Setup\n")
    assert doc["headline"] == headline.headline_facts(doc)
    # every exactness row passes, so each draft's best configuration is its fastest row
    for d in doc["headline"]["drafts"]:
        best = max((r for r in doc["speedup"] if r["draft"] == d["draft"]), key=lambda r: r["measured"])
        assert (d["measured"], d["ci"]) == (best["measured"], [best["ci_low"], best["ci_high"]])
    assert [d["draft"] for d in doc["headline"]["drafts"]] == ["bigram", "int8"]
    assert doc["headline"]["warnings"] == doc["warnings"]
    for w in doc["warnings"]:
        assert text.index(f"**{w}**") < text.index("## Setup")  # the warnings open the report, not the tables


def test_the_exactness_table_has_one_row_per_configuration(doc):
    table1 = render.tables(doc).split("## 1. Exactness")[1].split("\n## ")[0]
    rows = [line for line in table1.splitlines() if line.startswith("| ") and "verdict" not in line]
    # the target, bigram and int8 at k = 2, bigram's two trees, once each (quick checks at one context;
    # test_render folds several contexts into one row)
    assert [[c.strip() for c in r.strip("|").split("|")][:2] for r in rows] == [
        ["target, sampled directly (baseline)", ""], ["bigram", "k=2"], ["int8", "k=2"],
        ["bigram", "tree 4x2x2x1"], ["bigram", "tree budget 32"]]
    assert len(doc["exactness"]) == 5 * doc["settings"]["contexts"]  # the per-context rows stay in the document


def test_a_row_is_noisy_by_its_interval_against_the_floor_never_by_its_range(doc):
    floor = {**doc["noise_floor"], "width": 0.02}
    row = {**doc["speedup"][0], "pairs": 10, "timing_width": 0.10, "width": 0.14, "noisy": True, "measured_min": 0.1,
           "measured_max": 9}
    assert render_speedup._noise_note(row, floor) == ("noisy: timing interval 10% of the figure, 5.0x the noise floor's; give "
                                              "a larger --budget or a quieter machine")
    assert render_speedup._noise_note({**row, "noisy": False}, floor) == ""  # a huge range alone says nothing
    assert "too few for an interval" in render_speedup._noise_note({**row, "pairs": 2}, floor)


def test_write_is_all_or_nothing(doc, tmp_path, monkeypatch):
    paths = report.write(doc, tmp_path, render.tables(doc))
    # every row was timed over the 3 prompts (conftest's fake clock), so the per-prompt figure is there
    assert {p.name for p in paths} == {"report.md", "report.json", "speedup.png", "attribution.png",
                                       "per-prompt.png"}
    assert json.loads((tmp_path / "report.json").read_text())["noise_floor"] == doc["noise_floor"]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(figures, "plot_speedup", interrupted)
    with pytest.raises(KeyboardInterrupt):
        report.write({**doc, "wall_seconds": -1}, tmp_path, "new")
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # earlier report intact, no temp


def test_findings_are_computed_from_the_figures(doc):
    lines = findings.findings(doc)
    acc = {r["draft"]: r["acceptance"] for r in doc["acceptance"] if r["k"] == 1}
    top, bottom = max(acc, key=acc.get), min(acc, key=acc.get)
    assert lines[0].startswith(f"Best acceptance at k=1: {top}, {acc[top]:.3f}")
    assert lines[1].startswith(f"Worst acceptance at k=1: {bottom}, {acc[bottom]:.3f}")
    for key, label in (("predicted_before", "made before the run"), ("predicted_refined", "cost accounting")):
        n = len(doc["speedup"])
        n5, n10 = (sum(abs(r[key] / r["measured"] - 1) <= tol for r in doc["speedup"]) for tol in (0.05, 0.10))
        assert any(label in x and f"within 5% of the measured figure on {n5}/{n} rows and within 10% on {n10}/{n}"
                   in x for x in lines)
    shift = doc["state_shift"]
    said = f"A target-only step ran {abs(shift):.0%} {'slower' if shift > 0 else 'faster'} during the pairs"
    assert [x for x in lines if said in x] == [x for x in lines if "made before the run is within" in x]


def test_adaptive_rows_face_each_drafts_best_fixed_k(doc, target, draft_factory):
    import specdec

    assert [r["draft"] for r in doc["adaptive"]] == ["bigram", "int8"]
    for r in doc["adaptive"]:
        fixed = [x for x in _chains(doc["speedup"]) if x["draft"] == r["draft"]]
        assert r["best_fixed_k"] == max(fixed, key=lambda x: x["measured"])["k"]
        runs = specdec.load_workload("shakespeare24").cycled(8)
        visited = runs[: min(r["pairs"], len(runs))]  # the counts come from the runs its triples generated
        sts = [specdec.speculative_generate(target, draft_factory(r["draft"]), item.prompt, 60, k=r["start_k"],
                                            seed=seed, adaptive=True, k_max=r["k_max"]).stats
               for item, seed in visited]
        assert r["target_passes"] == sum(s.target_passes for s in sts)
        assert r["mean_k"] == sum(s.drafted for s in sts) / sum(s.draft_calls for s in sts)
        assert r["pairs"] >= 1 and r["vs_fixed_measured_min"] <= r["vs_fixed_measured"] <= r["vs_fixed_measured_max"]
    text = render.tables(doc)
    assert "## Adaptive k" in text and "adaptive ÷ fixed" in text
    assert any(x.startswith("Adaptive k against the best fixed k") for x in findings.findings(doc))


_ROW = {"measured": 1.0, "before_terms_us": {"step": 500.0, "draft_char": 10.0, "round": 700.0},
        "terms_us": {"step": 500.0, "draft_char": 10.0, "round": 700.0}, "target_only_error": 0.0,
        "speculative_error": 0.0, "draft_share": 0.1, "predicted_before": 1.0, "predicted_refined": 1.0}


@pytest.mark.parametrize("to_err,spec_err,share,note", [
    (0.12, 0.01, 0.8, "accounting off in the paired runs: target-only step +12.0%, draft character cost +1.0%"),
    (0.01, -0.09, 0.8, "accounting off in the paired runs: draft character cost -9.0%, target-only step +1.0%"),
    (0.00, 0.07, 0.1, "accounting off in the paired runs: verify round cost +7.0%, target-only step +0.0%"),
])
def test_a_missed_row_names_the_term_that_was_off(to_err, spec_err, share, note):
    row = {**_ROW, "predicted_refined": 1.10, "target_only_error": to_err, "speculative_error": spec_err,
           "draft_share": share}
    assert render_speedup._miss_note(row) == note
    assert render_speedup._miss_note({**row, "predicted_refined": 1.04}) == ""  # within 5 %: no note


def test_a_missed_prediction_names_the_terms_that_moved_since_the_cost_table():
    row = {**_ROW, "predicted_before": 0.9, "terms_us": {"step": 450.0, "draft_char": 10.0, "round": 721.0}}
    assert render_speedup._miss_note(row) == "terms moved since the cost table: step -10.0%, round +3.0%, draft_char +0.0%"


def _calibration_doc(rows: dict) -> dict:
    """A report document with only the intervals calibration reads: name -> (median, low, high)."""
    floor = rows.pop("floor")
    return {"noise_floor": {"measured": floor[0], "ci_low": floor[1], "ci_high": floor[2]},
            "speedup": [{"draft": d, "k": k, "measured": m, "ci_low": lo, "ci_high": hi}
                        for (d, k), (m, lo, hi) in rows.items()]}


def test_calibration_counts_each_direction_by_hand():
    a = _calibration_doc({"floor": (1.0, 0.98, 1.02), ("ngram", 8): (2.4, 2.3, 2.5), ("int8", 1): (0.80, 0.78, 0.82)})
    b = _calibration_doc({"floor": (1.01, 0.97, 1.05), ("ngram", 8): (2.45, 2.42, 2.48), ("int8", 1): (0.85, 0.81, 0.89)})
    cov = calibrate.coverage(a, b)
    # a covers b: floor yes, ngram yes, int8 no (0.85 > 0.82); b covers a: floor yes, ngram no, int8 no (0.80 < 0.81)
    assert (cov["n"], cov["a_covers_b"], cov["b_covers_a"], cov["passed"]) == (3, 2, 1, False)
    assert calibrate.coverage(a, copy.deepcopy(a))["passed"]
    text = calibrate.render([cov])
    assert "contain run 2's median on 2/3 rows" in text and "does NOT hold" in text


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "specdec.cli", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args,message", [
    (["--budget", "0"], "--budget must be a positive number of seconds, got 0.0"),
    (["--budget", "nan"], "--budget must be a positive number of seconds, got nan"),
    (["--repeat", "0"], "--repeat must be at least 1, got 0"),
    (["--cpu", "4096"], "CPU 4096 is not available"),
    (["--cpu", "one"], "is not a CPU list"),
    (["--pairs", "0"], "--pairs must be at least 1, got 0"),
    (["--prompt", "ROMEO:", "--workload", "shakespeare24"], "give --prompt (one configuration) or --workload"),
    (["--workload", "hamlet99"], "hamlet99"),
    (["--trees", "4x0"], "--trees: bad tree shape '4x0'"),
    (["--trees", "budget 0"], "--trees: a tree budget must be between 1 and 255 nodes, got 'budget 0'"),
    (["--workload", "/nonexistent/prompts.txt"], "/nonexistent/prompts.txt"),
])
def test_bad_report_options_are_one_line_before_anything_runs(args, message, tmp_path):
    out = tmp_path / "r"
    proc = _cli("report", "--out", str(out), *args)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and message in lines[0], proc.stderr
    assert not out.exists()


def test_report_out_that_is_a_file_fails_before_measuring(tmp_path):
    f = tmp_path / "taken"
    f.write_text("mine")
    proc = _cli("report", "--out", str(f), "--quick")
    assert proc.returncode == 2 and "is not a directory" in proc.stderr and "Traceback" not in proc.stderr
    assert f.read_text() == "mine"


def test_the_between_run_term_adds_in_quadrature_with_the_drift():
    from types import SimpleNamespace

    from specdec.measure.schedule import Runs

    r = Runs("row", {"target": None, "spec": None}, ("target", "spec"),
             items=[(SimpleNamespace(id="p1"), 0), (SimpleNamespace(id="p2"), 1)])
    r.times = {"target": [1.0, 1.1, 0.9, 1.0, 1.05, 0.95], "spec": [0.5, 0.56, 0.44, 0.52, 0.5, 0.49]}
    r.visit_items = [0, 1, 0, 1, 0, 1]
    both = paired_sections.paired_figures(r, "target", "spec", {"drift": 0.03, "between_run": {"tau": 0.04}})
    same = paired_sections.paired_figures(r, "target", "spec", {"drift": 0.05})  # √(0.03² + 0.04²) = 0.05
    plain = paired_sections.paired_figures(r, "target", "spec", {"drift": 0.0})
    assert (both["ci_low"], both["ci_high"]) == pytest.approx((same["ci_low"], same["ci_high"]))
    assert both["ci_high"] - both["ci_low"] > plain["ci_high"] - plain["ci_low"]


def test_a_machine_without_a_record_gets_the_default_between_run_term_and_is_told(doc):
    assert doc["noise_floor"]["between_run"] == {"tau": machine_record.DEFAULT_TAU, "source": "default",
                                                 "calibrations": 0}
    assert doc["settings"]["between_run"]["source"] == "default"
    assert "a default between-run term in quadrature too (τ = 2.0%): this machine has 0 recorded" in render.tables(doc)


def test_the_cost_table_shows_each_drafts_add_on_to_the_round(doc):
    """The add-on column is the round with the draft less the round alone, at the same k (hand-set terms)."""
    d = copy.deepcopy(doc)
    c = d["costs"]
    c["round_us"] = {"1": 118.0, "2": 131.0}
    for k, with_draft in (("1", 130.4), ("2", 125.6)):
        c["loop"]["bigram"][k].update(round_us=with_draft)
    text = render.tables(d)
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if "| add-on (µs) |" in line)
    table = lines[start : lines.index("", start)]
    rows = {cells[1]: cells for cells in ([x.strip() for x in line.split("|")[1:-1]] for line in table)
            if cells[0] == "bigram"}
    assert rows["1"][5] == "+12" and rows["2"][5] == "-5"  # 130.4 - 118, 125.6 - 131
    assert rows["1"][4] == f"{130.4 / 118:.3f}"


def test_a_draft_that_proposes_fewer_than_k_is_set_against_the_round_at_what_it_drafts(doc):
    """A draft capped at K (medusa's heads) drafts as many at k > K as at K: its row says so and its add-on is
    taken against the round alone at K (hand-set: bigram drafted 10 at k = 1 and at k = 2)."""
    d = copy.deepcopy(doc)
    c = d["costs"]
    c["round_us"] = {"1": 118.0, "2": 131.0}
    for k, with_draft in (("1", 130.4), ("2", 125.6)):
        c["loop"]["bigram"][k].update(round_us=with_draft)
    for r in d["acceptance"]:
        if r["draft"] == "bigram" and r["tree"] is None:
            r["drafted"] = 10
    lines = render.tables(d).splitlines()
    start = next(i for i, line in enumerate(lines) if "| add-on (µs) |" in line)
    rows = [[x.strip() for x in line.split("|")[1:-1]] for line in lines[start : lines.index("", start)]]
    bigram = [r for r in rows if r[0] == "bigram"]
    assert [r[1] for r in bigram] == ["1", "2 (drafts 1)"]
    assert [r[5] for r in bigram] == ["+12", "+8"]  # 130.4 - 118, 125.6 - 118
    assert render.drafts_up_to(d, "int8", "2") == "2"  # int8's rows untouched: it drafts what k asks
