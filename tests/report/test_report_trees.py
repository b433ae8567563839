"""Tree configurations in the report: their rows and keys, their counts against direct generation, the tree
cost model against the chain one, the verify pass by node count. Uses the session's small report (bigram
and int8 at k = 1, 2; bigram brings the default trees); nothing here asserts on times or pair counts."""

import numpy as np
import pytest

import specdec
from specdec.report import findings, paired_sections, render
from specdec.measure import stats
from specdec.decoding import trees
from specdec.decoding import sequoia
from specdec.report import tree_sections as ts

TREE_KEYS = {"shape", "budget", "depth", "parents", "nodes_per_depth"}
SHAPES = ["4x2x2x1", "budget 32"]


def _trees(rows):
    return [r for r in rows if r["tree"] is not None]


def test_every_table_draft_gets_the_default_tree_configurations(report_doc):
    assert report_doc["settings"]["trees"] == SHAPES
    for section in ("acceptance", "speedup"):
        assert [(r["draft"], r["tree"]["shape"]) for r in _trees(report_doc[section])] == [
            ("bigram", s) for s in SHAPES]  # int8 is no table draft: chains only
        for r in report_doc[section]:
            assert r["tree"] is None or set(r["tree"]) == TREE_KEYS
    fixed = _trees(report_doc["acceptance"])[0]["tree"]
    assert (fixed["budget"], fixed["depth"], fixed["nodes_per_depth"]) == (44, 4, [4, 8, 16, 16])  # 4+8+16+16
    dp = _trees(report_doc["acceptance"])[1]["tree"]
    assert dp["budget"] == 32 and sum(dp["nodes_per_depth"]) == 32


def test_the_budget_shape_is_the_dp_on_the_recorded_child_acceptance(report_doc):
    ch = report_doc["child_acceptance"]["bigram"]
    assert len(ch["vector"]) == ch["width"] == 8 and len(ch["runs"]) == 3
    spec, expected = sequoia.optimal_tree(ch["vector"], 32)
    row = _trees(report_doc["acceptance"])[1]
    assert row["tree"]["parents"] == list(spec.parents)
    assert row["expected_chars_per_pass"] == pytest.approx(expected)


def test_tree_counts_pool_direct_tree_generations_of_the_workload_runs(report_doc, target, draft_factory):
    runs = specdec.load_workload("shakespeare24").cycled(8)  # what --quick runs
    for row in _trees(report_doc["acceptance"]):
        spec = trees.TreeSpec(tuple(row["tree"]["parents"]))
        sts = [specdec.speculative_generate(target, draft_factory("bigram"), item.prompt, 60, 1, seed,
                                            tree=spec).stats for item, seed in runs]
        assert row["target_passes"] == sum(s.target_passes for s in sts)
        assert row["drafted"] == sum(s.drafted for s in sts)
        assert row["acceptance"] == sum(s.accepted for s in sts) / sum(s.drafted for s in sts)
        assert row["chars_per_pass"] == 60 * len(runs) / row["target_passes"]
        assert row["accepted_per_depth"] == np.sum([s.accepted_per_depth for s in sts], axis=0).tolist()
        assert [e["target_passes"] for e in row["per_item"]] == [s.target_passes for s in sts]


def test_tree_exactness_rows_are_shaped_like_chain_rows(report_doc):
    chain = next(r for r in report_doc["exactness"] if r["draft"] == "bigram" and r["tree"] is None)
    rows = _trees(report_doc["exactness"])
    assert [r["tree"]["shape"] for r in rows] == SHAPES
    for r in rows:
        assert set(r) == set(chain) and r["context"] == chain["context"] and r["k"] == r["tree"]["depth"]
        assert 0.0 <= r["p_value"] <= 1.0


def test_tree_verify_pass_by_node_count_is_in_the_cost_table(report_doc):
    c = report_doc["costs"]
    assert set(c["tree_verify_pass_us"]) == {"2", "5", "9", "17", "33", "65"} == set(c["tree_verify_ratio_samples"])
    assert all(len(v) == c["samples"] for v in c["tree_verify_ratio_samples"].values())
    assert set(c["tree_loop"]["bigram"]) == set(SHAPES)
    assert set(c["tree_loop"]["bigram"]["4x2x2x1"]) == {"step_us", "node_us", "round_us", "first_step_us",
                                                        "first_round_us"}


def test_tree_speedup_rows_carry_both_predictions_and_the_best_configuration_is_named(report_doc):
    for r in _trees(report_doc["speedup"]):
        assert r["predicted_before"] > 0 and r["predicted_refined"] > 0 and r["ci_low"] <= r["measured"] <= r["ci_high"]
    rec = report_doc["recommendations"]["bigram"]
    labels = {"k=1", "k=2", "tree 4x2x2x1", "tree budget 32"}
    assert rec["best_config_measured"] in labels and rec["best_config_predicted"] in labels
    assert set(rec["best_config_per_item"]) == labels
    text = render.tables(report_doc)
    assert "### 2a. Token trees" in text and "one tree verify pass (65 positions: 1 + 64 nodes)" in text
    # every exactness row passes (test_report), so the best exact configuration is the fastest row
    b = max(report_doc["speedup"], key=lambda r: r["measured"])
    what = f"{b['draft']} tree {b['tree']['shape']} ({b['tree']['budget']} nodes)" if b["tree"] else f"{b['draft']} k={b['k']}"
    assert findings.findings(report_doc)[-1] == (
        f"Best exact configuration (exactness rows passing): {what}, {b['measured']:.2f}x ({b['ci_low']:.2f}-"
        f"{b['ci_high']:.2f}), predicted {b['predicted_before']:.2f}x before the run.")


def test_a_chain_shaped_tree_prices_and_counts_as_the_chain():
    # One child per node, depth 4: a round drafts 4 nodes as a chain round drafts k = 4 characters, so the
    # model is the chain's: 60 chars, 20 passes, 76 nodes; step 10, round 25, node 1 µs ->
    # 60·10 / (20·25 + 76·1) = 600 / 576.
    a = {"totals": {"chars": 60, "target_passes": 20, "drafted": 76}}
    got = paired_sections._predictions(a, np.array([[10.0, 1.0, 25.0, 10.0, 29.0]]), 0, 4).estimate
    assert got == pytest.approx(600 / 576) == stats.refined_speedup(60, 20, 76, 10.0, 25.0, 1.0)
    # over 2 generations whose first step costs 30 and first round 60 (its 4 nodes included):
    # (58·10 + 2·30) / (18·25 + (76 - 8)·1 + 2·60) = 640 / 638
    got = paired_sections._predictions(a, np.array([[10.0, 1.0, 25.0, 30.0, 60.0]]), 2, 4).estimate
    assert got == pytest.approx(640 / 638)
    # and the child-acceptance model of that tree is Leviathan's E(α, k) with α the first child's acceptance
    assert ts.expected_chars(trees.TreeSpec.parse("1x1x1x1"), [0.5]) == pytest.approx(1.9375)
    assert stats.expected_length(0.5, 4) == pytest.approx(1.9375)


@pytest.mark.parametrize("text,want", [("budget 32", 32), ("32", 32), ("Budget 8", 8)])
def test_a_budget_configuration_parses_to_its_node_count(text, want):
    assert trees.parse_tree(text) == want


def test_a_shape_configuration_parses_to_its_tree():
    assert trees.parse_tree("4x2x2x1").parents == trees.TreeSpec.parse("4x2x2x1").parents
    with pytest.raises(ValueError):
        trees.parse_tree("4x0")


def test_the_tree_round_sampler_returns_the_five_terms(target, draft_factory):
    from specdec.measure import round_samplers
    from specdec.measure.anatomy import tree_timing

    got = tree_timing.tree_loop_sampler(target, draft_factory("bigram"), trees.TreeSpec.parse("2x2"), number=1,
                                        position=40, prompt_chars=10)()
    assert len(got) == len(round_samplers.TERMS) and all(x > 0 for x in got)  # no claim on sizes: the machine is shared
    assert set(tree_timing.verify_fns(target)) == {f"tree_verify{n}" for n in (1, 2, 5, 9, 17, 33, 65)}


@pytest.mark.parametrize("text,match", [("0", "between 1 and 255 nodes, got '0'"), ("budget 256", "got 'budget 256'"),
                                         ("16x16", "has 272 nodes; at most 255"), ("2x", "bad tree shape '2x'")])
def test_one_parser_holds_every_tree_limit(text, match):
    with pytest.raises(ValueError, match=match):
        trees.parse_tree(text)
