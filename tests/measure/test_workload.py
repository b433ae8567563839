import json
from importlib import resources

import numpy as np
import pytest

import specdec
from specdec.model import corpus
from specdec.measure import acceptance, workload
from specdec.measure.workload import WorkloadError, load_workload

from tests.decoding.test_decode import PROMPT, _greedy_script, _ScriptDraft


@pytest.fixture(scope="module")
def shipped():
    return load_workload("shakespeare24")


@pytest.fixture(scope="module")
def val_text():
    return corpus.decode(corpus.split_ids("val"))


# ---- the recipe and the shipped file ----

def test_rebuilding_the_recipe_gives_exactly_the_shipped_file():
    shipped = resources.files("specdec").joinpath("data/workload-shakespeare24.json").read_text()
    assert workload.build_default().to_json() == shipped


def test_shipped_workload_has_every_category_and_length_range(shipped):
    assert shipped.name == "shakespeare24" and shipped.seeds == workload.DEFAULT_SEEDS
    assert len(shipped.items) >= 24 and len({i.id for i in shipped.items}) == len(shipped.items)
    assert len({i.prompt for i in shipped.items}) == len(shipped.items)
    for category in workload.CATEGORIES:
        lengths = sorted(len(i.prompt) for i in shipped.items if i.category == category)
        # one prompt per length range in every category
        assert [next(b for b, (lo, hi) in enumerate(workload.LENGTH_BINS) if lo <= n <= hi) for n in lengths] \
            == list(range(len(workload.LENGTH_BINS)))


def test_shipped_prompts_come_from_validation_and_end_at_a_boundary(shipped, val_text):
    for item in shipped.items:
        at = val_text.find(item.prompt)
        assert at >= 0, item.id
        assert item.prompt.endswith("\n") or val_text[at + len(item.prompt)] in " \n", item.id
        assert set(item.prompt) <= set(corpus.vocabulary())
        assert 8 <= len(item.prompt) and len(item.prompt) + 200 + 9 <= 256


@pytest.mark.parametrize("category,check", [
    ("dialogue", lambda p: workload._SPEAKER.fullmatch(p.split("\n")[0]) and p.split("\n")[1].strip()),
    ("stage", lambda p: p.startswith("[")),
    ("verse", lambda p: p[0].isupper() and not p.startswith("[")),
    ("prose", lambda p: p[0].isupper() and not p.startswith("[")),
])
def test_categories_follow_their_rules(shipped, category, check):
    assert all(check(i.prompt) for i in shipped.items if i.category == category)


@pytest.mark.parametrize("lines,style", [
    (["Cease to persuade,\n", "Home-keeping youth\n", "'Tis true; for you\n"], "verse"),
    (["With drinking healths to my niece; I'll drink to her as\n", "long as there is a passage\n",
      "He's a coward\n"], "prose"),
    (["What?\n"], None),  # too short to tell
    (["Sweet Sir Andrew?\n", "[Aside]\n", "Bless you.\n"], None),  # a direction line does not count
    (["ah, lowercase first\n", "But then\n", "All capitals\n"], None),  # only later lines decide prose
])
def test_speech_style_rules(lines, style):
    assert workload._style(lines) == style


@pytest.mark.parametrize("unit,shortest,hi,expected", [
    ("Cease to persuade, my\n", 1, 12, "Cease to"),
    ("Cease to persuade, my\n", 1, 22, "Cease to persuade, my\n"),
    ("Cease to persuade, my\n", 1, 21, "Cease to persuade, my"),
    ("DUKE.\nIf music\n", 7, 7, ""),  # the name line alone is not dialogue
    ("DUKE.\nIf music\n", 7, 10, "DUKE.\nIf"),
    ("[Exit.]\n", 1, 8, "[Exit.]\n"),
])
def test_prompts_are_cut_at_line_or_word_ends(unit, shortest, hi, expected):
    assert workload._cut(unit, shortest, hi) == expected


# ---- loading ----

def test_txt_file_one_prompt_per_line_with_newline_escapes(tmp_path):
    f = tmp_path / "mine.txt"
    f.write_text("ROMEO:\n\n   \nDUKE.\\nIf music\n")
    w = load_workload(f)
    assert w.name == "mine" and w.seeds == workload.DEFAULT_SEEDS
    assert [(i.id, i.category, i.prompt) for i in w.items] == [("p1", "user", "ROMEO:"),
                                                                ("p2", "user", "DUKE.\nIf music")]


def test_json_list_and_schema_files(tmp_path):
    (tmp_path / "a.json").write_text(json.dumps(["ROMEO:", "JULIET:"]))
    w = load_workload(tmp_path / "a.json", seeds=[7])
    assert [(i.id, i.prompt) for i in w.items] == [("p1", "ROMEO:"), ("p2", "JULIET:")] and w.seeds == (7,)
    doc = {"name": "two", "seeds": [3, 4], "items": [{"id": "r", "category": "dialogue", "prompt": "ROMEO:"},
                                                      {"prompt": "Enter"}]}
    (tmp_path / "b.json").write_text(json.dumps(doc))
    w = load_workload(str(tmp_path / "b.json"))
    assert (w.name, w.seeds) == ("two", (3, 4))
    assert w.items == (workload.WorkloadItem("r", "dialogue", "ROMEO:"), workload.WorkloadItem("p2", "user", "Enter"))
    assert [(i.id, s) for i, s in w.runs()] == [("r", 3), ("r", 4), ("p2", 3), ("p2", 4)]


def test_a_written_workload_loads_back_equal(tmp_path, shipped):
    (tmp_path / "copy.json").write_text(shipped.to_json())
    assert load_workload(tmp_path / "copy.json") == shipped


def test_single_is_the_one_item_workload():
    w = workload.single("ROMEO:", 5)
    assert [(i.prompt, s) for i, s in w.runs()] == [("ROMEO:", 5)]


@pytest.mark.parametrize("name,content,message", [
    ("missing.txt", None, "'.*missing.txt' does not exist; allowed: a shipped name"),
    ("w.yaml", "ROMEO:", "unknown workload '.*w.yaml'; allowed: a shipped name"),
    ("bad.json", "[\"ROMEO:\",", "is not valid JSON .*; allowed:"),
    ("empty.txt", "\n  \n", "has no prompts; allowed:"),
    ("empty.json", "[]", "has no prompts; allowed:"),
    ("dict.json", "{\"prompts\": []}", "has no list of items; allowed:"),
    ("num.json", "[\"ROMEO:\", 3]", "item 2 is 3, not a string prompt"),
    ("vocab.txt", "ROMEO:\nJULIET: caf\u00e9\n", "prompt 'p2' has the character '\u00e9', which is not in the vocab"),
    ("back.txt", "a\\tb\n", "prompt 'p1' has the character '\\\\\\\\'"),
    ("long.txt", "x" * 48 + "\n", "prompt 'p1' is 48 characters; with 200 generated and k up to 8 it must be at "
                                 "most 47 \\(context 256\\)"),
    ("dup.json", json.dumps({"items": [{"id": "a", "prompt": "x"}, {"id": "a", "prompt": "y"}]}),
     "duplicate id 'a'"),
    ("seeds.json", json.dumps({"seeds": [], "items": ["x"]}), "seeds must be a non-empty list .* got \\[\\]"),
    ("seeds2.json", json.dumps({"seeds": [1, -2], "items": ["x"]}), "got \\[1, -2\\]"),
    ("emptyprompt.json", "[\"\"]", "prompt 'p1' is empty"),
    ("newline-id.json", json.dumps({"items": [{"id": "a\nb", "prompt": "caf\u00e9"}]}), "prompt 'a\\\\nb' has"),
])
def test_bad_files_are_one_line_errors_naming_the_problem(tmp_path, name, content, message):
    if content is not None:
        (tmp_path / name).write_text(content, encoding="utf-8")
    with pytest.raises(WorkloadError, match=message) as info:
        load_workload(tmp_path / name)
    assert "\n" not in str(info.value) and isinstance(info.value, ValueError)


def test_unknown_name_lists_the_shipped_ones():
    with pytest.raises(ValueError, match="unknown workload 'shakespeare99'; allowed: a shipped name "
                                         "\\(shakespeare24\\)"):
        load_workload("shakespeare99")


def test_context_limit_follows_chars():
    with pytest.raises(WorkloadError, match="must be at most 7 "):
        load_workload("shakespeare24", chars=240)


# ---- acceptance over a workload ----

def test_describe_by_hand():
    assert workload.describe([4, 1, 3, 2]) == {"mean": 2.5, "median": 2.5, "min": 1.0, "max": 4.0,
                                               "q1": 1.75, "q3": 3.25}


def test_acceptance_over_matches_direct_generation(target, draft_factory, shipped):
    two = workload.Workload("two", shipped.items[5:7], (0, 3))
    bigram = draft_factory("bigram")
    got = acceptance.acceptance_over(target, bigram, 4, two, chars=60)
    direct = [specdec.speculative_generate(target, bigram, item.prompt, 60, 4, seed).stats
              for item, seed in two.runs()]
    assert got["per_item"] == [{"prompt_id": item.id, "seed": seed, "acceptance": st.acceptance,
                                "chars_per_pass": st.chars_per_pass, "target_passes": st.target_passes,
                                "histogram": list(st.accepted_per_position), "drafted": st.drafted,
                                "category": item.category}
                               for (item, seed), st in zip(two.runs(), direct)]
    assert got["accepted_per_position"] == np.sum([st.accepted_per_position for st in direct], axis=0).tolist()
    assert got["totals"] == {"accepted": sum(s.accepted for s in direct), "drafted": sum(s.drafted for s in direct),
                             "target_passes": sum(s.target_passes for s in direct), "chars": 240,
                             "acceptance": sum(s.accepted for s in direct) / sum(s.drafted for s in direct),
                             "chars_per_pass": 240 / sum(s.target_passes for s in direct)}
    assert got["chars_per_pass"] == workload.describe([s.chars_per_pass for s in direct])
    hist = got["accepted_per_position"]  # position 1 is reached by every drafting round
    assert got["position_reached"][0] == sum(hist) and got["position_acceptance"][0] == sum(hist[1:]) / sum(hist)


def test_acceptance_over_a_tree_matches_direct_tree_generation(target, draft_factory, shipped):
    from specdec.decoding import trees

    two = workload.Workload("two", shipped.items[5:7], (0, 3))
    bigram, spec = draft_factory("bigram"), trees.TreeSpec.parse("2x2")
    got = acceptance.acceptance_over(target, bigram, 99, two, chars=40, tree=spec)  # k is ignored for trees
    direct = [specdec.speculative_generate(target, bigram, item.prompt, 40, 1, seed, tree=spec).stats
              for item, seed in two.runs()]
    assert [r["target_passes"] for r in got["per_item"]] == [st.target_passes for st in direct]
    for key in ("accepted_per_position", "tried_per_depth", "accepted_per_depth"):
        assert got[key] == np.sum([getattr(st, key) for st in direct], axis=0).tolist(), key
    assert got["depth_acceptance"] == [a / t if t else None for a, t in zip(got["accepted_per_depth"],
                                                                             got["tried_per_depth"])]
    assert got["totals"]["draft_calls"] == sum(st.draft_calls for st in direct)
    assert got["totals"]["chars"] == 160 and got["runs"] == 4
    assert "k" not in got and "position_acceptance" not in got  # a chain's keys only


@pytest.mark.parametrize("draft,k,passes,accepted", [("bigram", 1, 136, 64), ("bigram", 8, 114, 86)])
def test_single_romeo_reproduces_the_writeup_counts(target, draft_factory, draft, k, passes, accepted):
    got = acceptance.acceptance_over(target, draft_factory(draft), k, workload.single("ROMEO:", 0))
    assert (got["totals"]["target_passes"], got["totals"]["accepted"]) == (passes, accepted)
    assert got["per_item"][0]["target_passes"] == passes and got["runs"] == 1


def test_position_acceptance_does_not_count_a_short_last_round_as_a_rejection(target):
    # greedy script, k = 4, 8 characters: round one drafts 4 and keeps them (emits 5), round two drafts only
    # the 2 still needed and keeps them. The histogram [0, 0, 1, 0, 1] alone would say position 3 was
    # rejected once; the round log knows round two never drafted it.
    draft = _ScriptDraft(_greedy_script(target, 8), len(PROMPT))
    got = acceptance.acceptance_over(target, draft, 4, workload.single(PROMPT, 0), chars=8, temperature=0)
    assert got["accepted_per_position"] == [0, 0, 1, 0, 1]
    assert got["position_reached"] == [2, 2, 1, 1] and got["position_acceptance"] == [1.0] * 4


def test_position_acceptance_is_none_where_no_round_reached(target):
    never = corpus.encode("@")[0]
    draft = _ScriptDraft([], len(PROMPT), always=never)
    got = acceptance.acceptance_over(target, draft, 2, workload.single(PROMPT, 0), chars=10, temperature=0)
    assert got["position_reached"] == [9, 0] and got["position_acceptance"] == [0.0, None]


# ---- speedup summaries and the bootstrap over items ----

def test_summaries_by_hand():
    assert workload.ratio_of_totals([2, 4, 6], [1, 1, 4]) == 2.0


def test_bootstrap_of_constant_ratios_is_that_ratio():
    iv = workload.workload_interval(([3.0, 6.0, 1.5, 9.0], [1.5, 3.0, 0.75, 4.5]), workload.ratio_of_totals)
    assert (iv.estimate, iv.low, iv.high, iv.items) == pytest.approx((2.0, 2.0, 2.0, 4))


def test_bootstrap_one_column_and_one_item():
    assert workload.workload_interval([5.0, 5.0, 5.0], np.median).low == 5.0
    iv = workload.workload_interval(([2.0], [1.0]))
    assert (iv.estimate, iv.low, iv.high, iv.items) == (2.0, 2.0, 2.0, 1)


def test_bootstrap_resamples_items_and_is_reproducible():
    a, b = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [1.0, 1.0, 1.0, 2.0, 2.0, 2.0]
    iv = workload.workload_interval((a, b))
    assert iv == workload.workload_interval((a, b))
    # any resample's ratio of totals lies between the smallest and largest per-item ratio
    assert 1.0 <= iv.low < iv.estimate == 21 / 9 < iv.high <= 3.0
    assert workload.workload_interval((a, b), seed=1) != iv


def test_bootstrap_needs_an_item():
    with pytest.raises(ValueError, match="at least one item"):
        workload.workload_interval(([], []))


def _rows(values_by_k):
    return [{"k": k, "per_item": [{"prompt_id": pid, "seed": s, "chars_per_pass": v}
                                  for pid, per_seed in items.items() for s, v in enumerate(per_seed)]}
            for k, items in values_by_k.items()]


def test_best_k_per_item_by_hand():
    rows = _rows({1: {"a": [1.5, 1.7], "b": [1.9, 1.9], "c": [1.2, 1.2]},
                  4: {"a": [2.0, 1.0], "b": [1.8, 1.8], "c": [1.2, 1.2]},  # a: 1.5 < 1.6; c: a tie
                  8: {"a": [1.0, 1.0], "b": [1.0, 1.0], "c": [1.0, 1.0]}})
    assert workload.best_k_per_item(rows) == {1: 3, 4: 0, 8: 0}
    rows[1]["per_item"][0]["chars_per_pass"] = 2.4  # a at k = 4: mean 1.7 > 1.6
    assert workload.best_k_per_item(rows) == {1: 2, 4: 1, 8: 0}


def test_best_k_per_item_needs_the_same_items():
    with pytest.raises(ValueError, match="same items at every k"):
        workload.best_k_per_item(_rows({1: {"a": [1.0]}, 2: {"b": [1.0]}}))
