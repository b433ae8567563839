"""The engines' acceptance figures from a histogram, by hand, and their bootstrap intervals over prompts."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from specdec.measure import acceptance_engines as ae


def test_every_engines_figure_from_one_histogram_by_hand():
    """k = 3; rounds that accepted 0, 0, 1 and 3 drafts: 4 rounds, 4 accepted of 12 drafted."""
    got = ae.figures([2, 1, 0, 1])
    assert (got["rounds"], got["accepted"], got["drafted"]) == (4, 4, 12)
    assert got["acceptance"] == pytest.approx(1 / 3)  # vLLM's and llama.cpp's acceptance rate
    assert got["acceptance_length"] == 2.0  # 1 + 4 accepted / 4 rounds: SGLang's accept_length
    assert got["per_position"] == [0.5, 0.25, 0.25]  # vLLM: rounds accepting draft i / rounds
    assert got["conditional"] == [0.5, 0.5, 1.0]  # of the rounds that reached draft i
    assert ae.figures([0, 0, 0])["conditional"] == [None, None] and ae.figures([0, 0])["acceptance"] is None


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 50), min_size=2, max_size=9).filter(lambda h: sum(h) > 0))
def test_the_per_position_rates_sum_to_the_acceptance_length_less_one(hist):
    got = ae.figures(hist)
    assert sum(got["per_position"]) == pytest.approx(got["acceptance_length"] - 1)
    k = len(hist) - 1
    assert got["acceptance"] == pytest.approx((got["acceptance_length"] - 1) / k)  # every round drafted k
    assert all(a >= b for a, b in zip(got["per_position"], got["per_position"][1:]))


def _run(prompt, hist, seed=0):
    return {"prompt_id": prompt, "seed": seed, "histogram": hist, "drafted": sum(hist) * (len(hist) - 1)}


def test_the_interval_resamples_prompts_and_is_seeded():
    same = [_run("a", [1, 1, 2]), _run("b", [1, 1, 2])]
    got = ae.with_intervals(same, boot=200)
    assert got["intervals"]["acceptance_length"] == [got["acceptance_length"]] * 2  # no prompt differs: no width
    runs = [_run("a", [4, 0, 0]), _run("a", [3, 1, 0], seed=1), _run("b", [0, 0, 4]), _run("c", [2, 1, 1])]
    got = ae.with_intervals(runs, seed=3, boot=300)
    assert got["intervals"]["prompts"] == 3 and got == ae.with_intervals(runs, seed=3, boot=300)
    lo, hi = got["intervals"]["acceptance"]
    assert lo < got["acceptance"] < hi and 0.0 <= lo and hi <= 1.0
    # the pooled figure: 16 rounds, 0+1+8+1+2 = 12 accepted of 32 drafted
    assert got["acceptance"] == pytest.approx(12 / 32) and got["rounds"] == 16


def test_each_category_is_judged_on_its_own_prompts():
    runs = [_run("verse-1", [0, 0, 4]), _run("prose-1", [4, 0, 0]), _run("odd", [2, 2, 0])]
    got = ae.by_category(runs, {"verse-1": "verse", "prose-1": "prose"}, boot=50)
    assert sorted(got) == ["all", "other", "prose", "verse"]
    assert (got["verse"]["acceptance"], got["prose"]["acceptance"], got["other"]["acceptance"]) == (1.0, 0.0, 0.25)


# vLLM's /metrics as it writes them (prometheus_client's text exposition: HELP and TYPE lines, a counter per engine
# and model, per-position counters labelled position="i"), before and after a window of k = 3 rounds
VLLM_BEFORE = """# HELP vllm:spec_decode_num_drafts_total Number of spec decoding drafts.
# TYPE vllm:spec_decode_num_drafts_total counter
vllm:spec_decode_num_drafts_total{engine="0",model_name="m"} 10.0
# HELP vllm:spec_decode_num_draft_tokens_total Number of draft tokens.
# TYPE vllm:spec_decode_num_draft_tokens_total counter
vllm:spec_decode_num_draft_tokens_total{engine="0",model_name="m"} 30.0
# HELP vllm:spec_decode_num_accepted_tokens_total Number of accepted tokens.
# TYPE vllm:spec_decode_num_accepted_tokens_total counter
vllm:spec_decode_num_accepted_tokens_total{engine="0",model_name="m"} 12.0
# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.
# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="0"} 6.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="1"} 4.0
vllm:spec_decode_num_accepted_tokens_per_pos_total{engine="0",model_name="m",position="2"} 2.0
"""
# 8 more rounds (24 drafted): 6 accepted position 0, 4 of them position 1, 2 of those position 2: 12 accepted
VLLM_AFTER = (VLLM_BEFORE.replace("} 10.0", "} 18.0").replace("} 30.0", "} 54.0").replace("} 12.0", "} 24.0")
              .replace('"0"} 6.0', '"0"} 12.0').replace('"1"} 4.0', '"1"} 8.0').replace('"2"} 2.0', '"2"} 4.0'))


def test_a_vllm_window_reads_as_vllm_defines_its_figures():
    """The recorded sample's window through the load sweep's reader: the histogram from vLLM's counters, and every
    figure as vLLM computes it from them (acceptance rate = accepted / draft tokens = 12 / 24; mean acceptance
    length = 1 + accepted / drafts = 1 + 12 / 8; per-position rate = per_pos[i] / drafts = 6/8, 4/8, 2/8)."""
    from specdec.engines.openai_http import parse_prometheus
    from specdec.measure.load import load

    c = load.window_counts(parse_prometheus(VLLM_BEFORE), parse_prometheus(VLLM_AFTER), [])
    assert c["counters"] == "vllm" and c["rounds_by_accepted"] == [2, 2, 2, 2]
    got = c["engine_figures"]
    assert (got["acceptance"], got["acceptance_length"]) == (0.5, 2.5)
    assert got["per_position"] == [0.75, 0.5, 0.25] and got["conditional"] == [0.75, 4 / 6, 0.5]


def test_the_report_counts_a_feature_draft_as_it_generates():
    """acceptance_over wraps a draft to log its rounds; a draft that reads the target (medusa) must still be
    handed the target's features through the wrapper: its pooled counts equal speculative_generate's own."""
    import specdec
    from specdec.measure.acceptance import acceptance_over

    target = specdec.load_target(backend="numpy")
    items = specdec.load_workload("shakespeare24").items[:2]
    got = acceptance_over(target, specdec.make_draft("medusa", target), 4, None, chars=40,
                          runs=[(item, 0) for item in items])
    direct = [specdec.speculative_generate(target, specdec.make_draft("medusa", target), item.prompt, 40, k=4,
                                           seed=0).stats for item in items]
    assert (got["totals"]["accepted"], got["totals"]["drafted"]) == (sum(s.accepted for s in direct),
                                                                     sum(s.drafted for s in direct))
    assert got["totals"]["accepted"] > 0


def test_a_feature_drafts_first_character_is_exact_at_a_round_after_a_prefill():
    """exactness.verify hands a draft that reads the target the states of a prefill over the context (less its
    last token, the one the prefill emitted) before its proposal, as the loop does: medusa's and eagle's first
    characters pass the chi-square test (deterministic given the seed), and eagle drafts all k after it."""
    import numpy as np

    import specdec
    from specdec.measure import exactness

    target = specdec.load_target(backend="numpy")
    drafts = {name: specdec.make_draft(name, target) for name in ("medusa", "eagle")}
    rows = specdec.verify(target, drafts, samples=4000)
    assert [r["verdict"] for r in rows] == ["exact", "exact"], rows
    assert rows == specdec.verify(target, drafts, samples=4000)  # the same draws given the seed
    drafted, q = exactness._first_proposal(target, drafts["eagle"], target.tokenize("ROMEO:"), 4,
                                           np.random.default_rng(0), 1.0)
    assert len(drafted) == 4 and q.shape == (4, target.vocab_size)


def test_the_report_gives_the_engines_figures_at_its_temperature_and_greedy_at_the_largest_k(target, draft_factory,
                                                                                            monkeypatch):
    """sections.acceptance: every chain row carries the engines' figures at the report's temperature; the largest
    k's row also greedy ones, which match a greedy acceptance_over of the same runs exactly; table 2c shows both."""
    from types import SimpleNamespace

    from specdec.measure.acceptance import acceptance_over
    from specdec.measure.workload import load_workload
    from specdec.report import render, sections

    runs = load_workload("shakespeare24").runs()[:3]
    d = draft_factory("bigram")
    run = SimpleNamespace(drafts=["bigram"], ks=[1, 2], target=target, objs={"bigram": d}, chars=20,
                          temperature=1.0, runs=runs, acc={}, child={})
    monkeypatch.setattr(sections.ts, "acceptance_rows", lambda run, child: [])  # no trees here
    rows = sections.acceptance(run)["acceptance"]
    assert [r["engines_temperature"] for r in rows] == [1.0, 1.0] and "engines_greedy" not in rows[0]
    greedy = acceptance_over(target, d, 2, None, 20, 0.0, runs=runs)
    assert rows[1]["engines_greedy"]["all"]["histogram"] == list(greedy["accepted_per_position"])
    lines = " ".join("".join(render._engines_acceptance({"acceptance": rows}, {"units": "characters"})).split())
    assert "| bigram | 2 | 0 | all |" in lines and "| bigram | 2 | 1 | all |" in lines and "| bigram | 1 | 0 |" not in lines
