"""The report's opening (the headline) and its exactness table, from small hand-made documents: every expected
figure and line below is worked out by hand from the rows."""

import copy

import pytest

from specdec.report import headline, markdown, render

FLOOR = {"measured": 1.004, "ci_low": 0.98, "ci_high": 1.03, "pairs": 5}
BUSY = "WARNING: the machine was busy (load average 3.0 at the start); stop them, or give a larger --budget."


def _ex(draft, context, p, verdict="exact", k=2, tree=None, tv=0.01):
    return {"draft": draft, "k": k, "tree": tree, "context": context, "samples": 1000, "tv": tv, "baseline_tv": 0.012,
            "baseline_tv_min": 0.008, "baseline_tv_max": 0.02, "p_value": p, "p_threshold": 0.0001, "verdict": verdict}


def _sp(draft, k, measured, lo, hi, tree=None, pairs=6):
    return {"draft": draft, "k": k, "tree": tree, "measured": measured, "ci_low": lo, "ci_high": hi, "pairs": pairs}


TREE = {"shape": "2x2", "budget": 6}


def _doc():
    doc = {
        "machine": {"cpu": "Test CPU", "device": "cpu", "backend": "eager", "threads": 1},
        "settings": {"workload": {"name": "shakespeare24", "items": 3}, "prompt": None, "chars": 60, "budget": 20.0},
        "wall_seconds": 19.4,
        "noise_floor": dict(FLOOR),
        "exactness": [
            _ex("target", "a", None, tv=0.011), _ex("target", "b", None, tv=0.015),
            _ex("fast", "a", 0.5), _ex("fast", "b", 0.2),
            _ex("fast", "a", 0.00001, "CHECK", k=2, tree=TREE), _ex("fast", "b", 0.3, k=2, tree=TREE),
            _ex("slow", "a", 0.7), _ex("slow", "b", 0.6),
            _ex("noisy", "a", 0.4), _ex("noisy", "b", 0.9),
            _ex("broken", "a", 0.8), _ex("broken", "b", 0.00002, "CHECK"),
        ],
        "speedup": [
            _sp("fast", 1, 1.5, 1.4, 1.6), _sp("fast", 2, 1.8, 1.7, 1.9),
            _sp("fast", 2, 2.5, 2.4, 2.6, tree=TREE),  # the fastest row, but its exactness gave a CHECK
            _sp("slow", 1, 0.8, 0.7, 0.9), _sp("slow", 2, 0.7, 0.65, 0.75),
            _sp("noisy", 1, 1.02, 1.01, 1.05),  # above 1, but its interval reaches into the floor's (to 1.03)
            _sp("broken", 1, 3.0, 2.9, 3.1),
        ],
    }
    doc["warnings"] = [BUSY] + headline.result_warnings(doc)  # as the report puts them together
    return doc


def test_the_headline_facts_by_hand():
    h = headline.headline_facts(_doc())
    assert h["run"] == {"machine": "Test CPU", "device": "cpu", "backend": "eager", "threads": 1,
                        "workload": "shakespeare24", "prompt": None, "runs": 3, "chars": 60, "budget": 20.0,
                        "wall_seconds": 19.4, "units": "characters", "target": "shipped"}
    assert h["noise_floor"] == {"measured": 1.004, "ci": [0.98, 1.03], "pairs": 5}
    assert h["drafts"] == [
        {"draft": "fast", "config": "k=2", "measured": 1.8, "ci": [1.7, 1.9], "pairs": 6, "verdict": "faster"},
        {"draft": "slow", "config": "k=1", "measured": 0.8, "ci": [0.7, 0.9], "pairs": 6, "verdict": "slower"},
        {"draft": "noisy", "config": "k=1", "measured": 1.02, "ci": [1.01, 1.05], "pairs": 6,
         "verdict": "not distinguishable from the noise floor"},
        {"draft": "broken", "config": None, "verdict": "no configuration passed exactness"},
    ]
    assert h["recommendation"] == "fast k=2"
    assert h["warnings"][0] == BUSY
    assert [w.split(" (chi-square")[0] for w in h["warnings"][1:]] == [
        "WARNING: exactness gave a CHECK for fast tree 2x2 at context a",
        "WARNING: exactness gave a CHECK for broken k=2 at context b"]
    assert all("do not use it" in w for w in h["warnings"][1:])


def test_one_list_of_warnings_for_the_headline_and_the_document():
    """A row timed once (a slow machine's budget) warns in report.json's list, and the headline shows that
    list: it adds none of its own."""
    doc = _doc()
    doc["speedup"][3]["pairs"] = 1
    few = headline.result_warnings(doc)
    assert few[0] == ("WARNING: fewer than 2 timed pairs, so no re-run interval and no verdict, for: slow k=1 "
                      "(1 pair); these rows are cut from the answer; give a larger --budget (the fixed work took "
                      "most of this one).")
    assert len(few) == 3  # then the two CHECKs
    doc["warnings"] = [BUSY] + few
    assert headline.headline_facts(doc)["warnings"] == doc["warnings"]
    text = render.headline(doc)
    assert [line.strip("*") for line in text.splitlines() if line.startswith("**WARNING")] == doc["warnings"]
    assert headline.headline_facts({**doc, "warnings": []})["warnings"] == []


def test_a_row_of_one_pair_is_cut_from_the_answer_and_shows_no_interval():
    """A slow machine's budget timed fast k=2 once: the answer is judged from fast k=1 (6 pairs), not from the
    one pair; a draft with only one-pair rows says too few pairs; no table prints a point as an interval."""
    doc = _doc()
    doc["speedup"][1]["pairs"] = 1  # fast k=2, the best chain of its draft
    doc["speedup"][3]["pairs"] = doc["speedup"][4]["pairs"] = 1  # every row of slow
    drafts = {d["draft"]: d for d in headline.headline_facts(doc)["drafts"]}
    assert (drafts["fast"]["config"], drafts["fast"]["verdict"]) == ("k=1", "faster")
    assert (drafts["slow"]["config"], drafts["slow"]["verdict"]) == (None, headline.TOO_FEW)
    doc["noise_floor"]["pairs"] = 1
    assert "0.980-1.030" not in headline.headline(doc) and "none: 1 pair over 1 pairs" in headline.headline(doc)
    assert (markdown.interval(1.7, 1.9, 1), markdown.interval(1.7, 1.9, 2)) == ("none: 1 pair", "1.70-1.90")


def test_nothing_faster_recommends_target_only():
    doc = _doc()
    doc["speedup"] = [r for r in doc["speedup"] if r["draft"] in ("slow", "noisy")]
    assert headline.headline_facts(doc)["recommendation"] == "target-only"
    assert ("**Recommendation: target-only.** No exact configuration is faster than target-only beyond the noise "
            "floor on this machine.") in headline.headline(doc)


@pytest.mark.parametrize("lo,hi,floor,want", [
    (1.04, 1.10, (0.98, 1.03), "faster"),
    (1.03, 1.10, (0.98, 1.03), "not distinguishable from the noise floor"),  # touches the floor's high end
    (0.96, 0.99, (0.90, 0.95), "not distinguishable from the noise floor"),  # above the floor, but below 1
    (1.01, 1.04, (0.90, 0.95), "faster"),  # above both
    (0.90, 0.97, (0.98, 1.03), "slower"),
    (0.90, 0.98, (0.98, 1.03), "not distinguishable from the noise floor"),
    (1.01, 1.02, (1.03, 1.06), "not distinguishable from the noise floor"),  # below the floor, but above 1
])
def test_a_verdict_needs_the_whole_interval_beyond_the_floor_and_1(lo, hi, floor, want):
    assert headline.timing_verdict({"ci_low": lo, "ci_high": hi}, {"ci_low": floor[0], "ci_high": floor[1]}) == want


def test_the_headline_renders_the_facts_in_order():
    text = headline.headline(_doc())
    lines = text.splitlines()
    assert lines[0] == "# specdec report"
    assert lines[2] == ("Test CPU (cpu), eager backend, 1 thread(s); workload 'shakespeare24', 3 run(s) of 60 "
                        "characters; budget 20 s, measured in 19 s.")
    assert lines[4].startswith("Noise floor (target-only against itself, A/A): 1.004x, 95 % re-run interval "
                               "0.980-1.030 over 5 pairs.")
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[6:12]]
    assert cells[0] == ["draft", "best exact configuration", "speedup", "95% re-run interval", "verdict"]
    assert cells[2:] == [["fast", "k=2", "1.80", "1.70-1.90", "faster"],
                         ["slow", "k=1", "0.80", "0.70-0.90", "slower"],
                         ["noisy", "k=1", "1.02", "1.01-1.05", "not distinguishable from the noise floor"],
                         ["broken", "-", "", "", "no configuration passed exactness"]]
    assert lines[13] == ("**Recommendation: fast k=2**, 1.80x (95 % re-run interval 1.70-1.90): the fastest exact "
                         "configuration that is faster than target-only beyond the noise floor.")
    assert lines[15] == f"**{BUSY}**" and lines[17].startswith("**WARNING: exactness gave a CHECK for fast tree 2x2")
    assert len(lines) == 20  # the three warnings are the last lines
    quiet = {**_doc(), "warnings": [], "exactness": [r for r in _doc()["exactness"] if r["verdict"] == "exact"]}
    assert headline.headline(quiet).endswith("\nNo warnings.")


def test_the_exactness_table_has_one_row_per_configuration_at_its_worst_context():
    doc = _doc()
    lines = render._exactness(doc)[1].splitlines()
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in lines[2:]]
    assert cells == [
        ["target, sampled directly (baseline)", "", "2", "b", "", "0.0150", "0.0120 (0.0080-0.0200)", ""],
        ["fast", "k=2", "2", "b", "0.200", "0.0100", "0.0120 (0.0080-0.0200)", "exact"],
        ["fast", "tree 2x2", "2", "a", "0.000", "0.0100", "0.0120 (0.0080-0.0200)", "CHECK"],
        ["slow", "k=2", "2", "b", "0.600", "0.0100", "0.0120 (0.0080-0.0200)", "exact"],
        ["noisy", "k=2", "2", "a", "0.400", "0.0100", "0.0120 (0.0080-0.0200)", "exact"],
        ["broken", "k=2", "2", "b", "0.000", "0.0100", "0.0120 (0.0080-0.0200)", "CHECK"],
    ]
    assert "at or below 0.0001 (0.001 over the 10 tests, Bonferroni)" in render._exactness(doc)[2]


def test_a_check_at_any_context_makes_the_configuration_check():
    rows = [_ex("d", "a", 0.00005, "CHECK"), _ex("d", "b", 0.00001, "exact")]  # a verdict, not the smallest p
    (g,) = render.exactness_configs(rows)
    assert (g["row"]["context"], g["contexts"], g["verdict"]) == ("b", 2, "CHECK")


def test_the_headline_reads_the_document_without_changing_it():
    doc = _doc()
    before = copy.deepcopy(doc)
    headline.headline(doc)
    assert doc == before


def test_the_setup_line_says_what_other_processes_took():

    assert headline.others_note({"others_cpus": 0.0649}) == "; other processes kept 0.06 CPUs busy during the run"
    assert headline.others_note({}) == ""  # a report made before the figure existed


def test_one_pair_gives_no_verdict_and_says_why():
    """A budget too small for the model leaves one pair per row: a point, not an interval, so no verdict."""

    floor = {"ci_low": 0.99, "ci_high": 1.01, "pairs": 1}
    row = {"ci_low": 1.76, "ci_high": 1.76, "pairs": 1, "measured": 1.76}
    assert headline.timing_verdict(row, floor) == headline.TOO_FEW
    assert headline.timing_verdict(dict(row, pairs=5), dict(floor, pairs=5)) == headline.FASTER
