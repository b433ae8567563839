import numpy as np
import pytest

import specdec
from specdec.model import corpus

PROMPT = "ROMEO:"  # the documented prompt of the acceptance table
ALL_DRAFTS = list(specdec.DRAFTS)


def test_target_only_pays_one_pass_per_character(target):
    out = specdec.generate(target, PROMPT, 50, seed=0)
    assert len(out.text) == 50 and out.stats.target_passes == 50 and out.stats.chars == 50
    assert set(out.text) <= set(corpus.vocabulary())


def test_same_seed_same_text_other_seed_other_text(target):
    a = specdec.generate(target, PROMPT, 80, seed=3).text
    assert specdec.generate(target, PROMPT, 80, seed=3).text == a
    assert specdec.generate(target, PROMPT, 80, seed=4).text != a


def test_greedy_is_deterministic_and_seed_free(target):
    assert (specdec.generate(target, PROMPT, 60, seed=0, temperature=0).text
            == specdec.generate(target, PROMPT, 60, seed=99, temperature=0).text)


@pytest.mark.parametrize("draft", ALL_DRAFTS)
@pytest.mark.parametrize("k", [1, 2, 4, 8])
def test_greedy_speculative_equals_greedy_target(target, draft_factory, draft, k):
    expected = specdec.generate(target, PROMPT, 200, seed=0, temperature=0).text
    out = specdec.speculative_generate(target, draft_factory(draft), PROMPT, 200, k=k, seed=0, temperature=0)
    assert out.text == expected


@pytest.mark.parametrize("draft", ALL_DRAFTS)
@pytest.mark.parametrize("k,chars", [(1, 200), (4, 37), (8, 200), (8, 9), (3, 1)])
def test_speculative_stats_are_consistent(target, draft_factory, draft, k, chars):
    out = specdec.speculative_generate(target, draft_factory(draft), PROMPT, chars, k=k, seed=1)
    st = out.stats
    assert len(out.text) == chars == st.chars
    hist = st.accepted_per_position
    assert len(hist) == k + 1 and sum(hist) == st.draft_calls
    assert sum(i * n for i, n in enumerate(hist)) == st.accepted <= st.drafted
    # only a final round that needs a single character skips the draft
    assert 0 <= st.target_passes - st.draft_calls <= 1
    assert st.accepted + st.target_passes == chars
    assert st.acceptance == (st.accepted / st.drafted if st.drafted else 0.0)
    assert st.chars_per_pass == pytest.approx(chars / st.target_passes)


def test_last_round_drafts_only_what_is_still_needed(target, draft_factory):
    # 9 characters at k = 8 with a perfect-enough draft: round one drafts 8 and, if all are accepted, emits 9
    st = specdec.speculative_generate(target, draft_factory("int8"), PROMPT, 9, k=8, seed=0, temperature=0).stats
    assert st.drafted >= 8 and (st.target_passes == 1) == (st.accepted == 8)
    first_round = specdec.speculative_generate(target, draft_factory("int8"), PROMPT, 1, k=8, seed=0).stats
    assert (first_round.drafted, first_round.target_passes, first_round.draft_calls) == (0, 1, 0)
    two = specdec.speculative_generate(target, draft_factory("int8"), PROMPT, 2, k=8, seed=0).stats
    assert two.drafted == 1 and two.accepted_per_position[2:] == [0] * 7  # round one drafts 2 - 1


def test_same_seed_same_speculative_text(target, draft_factory):
    d = draft_factory("int4")
    a = specdec.speculative_generate(target, d, PROMPT, 120, k=4, seed=5)
    b = specdec.speculative_generate(target, d, PROMPT, 120, k=4, seed=5)
    assert a.text == b.text and a.stats == b.stats


def test_acceptance_orders_the_writeup_drafts_at_k1(target, draft_factory):
    acc = {name: specdec.speculative_generate(target, draft_factory(name), PROMPT, 200, k=1, seed=0).stats.acceptance
           for name in ("int8", "int4", "bigram")}
    assert acc["int8"] > acc["int4"] > acc["bigram"]


@pytest.mark.parametrize("draft,k,passes,accepted", [
    ("bigram", 1, 136, 64), ("bigram", 8, 114, 86),
    ("int8", 1, 101, 99), ("int8", 8, 24, 176),
    ("int4", 1, 108, 92), ("int4", 8, 32, 168),
])
def test_acceptance_table_counts_are_exact(target, draft_factory, draft, k, passes, accepted):
    """The write-up's acceptance table, prompt 'ROMEO:', 200 characters, seed 0: deterministic counts."""
    st = specdec.speculative_generate(target, draft_factory(draft), PROMPT, 200, k=k, seed=0).stats
    assert (st.target_passes, st.accepted) == (passes, accepted)


@pytest.mark.parametrize("prompt,chars,k,temperature,message", [
    ("", 10, 1, 1.0, "prompt is empty"),
    ("ROMEO: é", 10, 1, 1.0, "'é' is not in the vocabulary"),
    (PROMPT, 0, 1, 1.0, "chars must be at least 1"),
    (PROMPT, 251, 1, 1.0, "exceeds the context of 256"),
    (PROMPT, 10, 0, 1.0, "k must be at least 1"),
    (PROMPT, 10, 250, 1.0, "k=250 overflows the context"),
    (PROMPT, 10, 1, -0.5, "temperature must be 0 or a finite number >= 1e-30, got -0.5"),
    (PROMPT, 10, 1, float("nan"), "temperature must be 0 or a finite number >= 1e-30, got nan"),
    (PROMPT, 10, 1, float("inf"), "temperature must be 0 or a finite number >= 1e-30, got inf"),
])
def test_bad_requests_are_one_line_value_errors(target, draft_factory, prompt, chars, k, temperature, message):
    with pytest.raises(ValueError, match=message) as info:
        specdec.speculative_generate(target, draft_factory("bigram"), prompt, chars, k=k, temperature=temperature)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("temperature", [float("nan"), float("inf"), -1.0])
def test_target_only_refuses_a_temperature_that_is_not_a_finite_number_at_least_0(target, temperature):
    with pytest.raises(ValueError, match=f"temperature must be 0 or a finite number >= 1e-30, got {temperature}"):
        specdec.generate(target, PROMPT, 10, temperature=temperature)


def test_context_is_long_enough_for_200_after_56(target):
    out = specdec.generate(target, "x" * 56, 200, seed=0)
    assert len(out.text) == 200


class _ScriptDraft(specdec.Draft):
    """Proposes the characters of a fixed script (one-hot q), from wherever the sequence has got to."""

    name = "script"

    def __init__(self, script: list[int], n_prompt: int, always: int | None = None):
        self.script, self.n_prompt, self.always = script, n_prompt, always

    def propose(self, tokens, k, rng, temperature):
        start = len(tokens) - self.n_prompt
        ids = [self.always] * k if self.always is not None else self.script[start:start + k]
        q = np.zeros((k, len(corpus.vocabulary())))
        q[np.arange(k), ids] = 1.0
        return ids, q


def _greedy_script(target, chars):
    return corpus.encode(specdec.generate(target, PROMPT, chars, temperature=0).text)


@pytest.mark.parametrize("k_max,passes,drafted", [
    (16, 6, 4 + 6 + 8 + 10 + 12 + 14),  # emits 5 7 9 11 13, then 15 of the last 15 (kr = 14)
    (6, 9, 4 + 6 * 7 + 5),  # emits 5, then 7 per round up to 54, then the last 6 (kr = 5)
])
def test_adaptive_k_grows_by_two_while_every_draft_is_accepted(target, k_max, passes, drafted):
    script = _greedy_script(target, 60)
    st = specdec.speculative_generate(target, _ScriptDraft(script, len(PROMPT)), PROMPT, 60, k=4, temperature=0,
                                      adaptive=True, k_max=k_max).stats
    assert (st.target_passes, st.drafted, st.accepted) == (passes, drafted, drafted)
    assert st.adaptive and st.k == 4 and len(st.accepted_per_position) == k_max + 1


def test_adaptive_k_shrinks_by_one_to_one_on_rejections(target):
    script = _greedy_script(target, 10)
    never = corpus.encode("@")[0]
    assert never not in script
    out = specdec.speculative_generate(target, _ScriptDraft(script, len(PROMPT), always=never), PROMPT, 10, k=4,
                                       temperature=0, adaptive=True)
    st = out.stats  # every round emits the target's one correction; drafts 4 3 2 1 1 1 1 1 1, the last none
    assert (st.target_passes, st.drafted, st.accepted, st.draft_calls) == (10, 15, 0, 9)
    assert corpus.encode(out.text) == script and st.mean_k == pytest.approx(15 / 9)


@pytest.mark.parametrize("draft", ALL_DRAFTS)
def test_adaptive_greedy_speculative_equals_greedy_target(target, draft_factory, draft):
    expected = specdec.generate(target, PROMPT, 200, seed=0, temperature=0).text
    out = specdec.speculative_generate(target, draft_factory(draft), PROMPT, 200, k=2, seed=0, temperature=0,
                                       adaptive=True)
    assert out.text == expected


@pytest.mark.parametrize("draft", ["bigram", "int4"])
def test_adaptive_sampled_stats_are_consistent(target, draft_factory, draft):
    st = specdec.speculative_generate(target, draft_factory(draft), PROMPT, 150, k=4, seed=2, adaptive=True).stats
    assert sum(st.accepted_per_position) == st.draft_calls
    assert sum(i * n for i, n in enumerate(st.accepted_per_position)) == st.accepted
    assert st.accepted + st.target_passes == 150
    assert st == specdec.speculative_generate(target, draft_factory(draft), PROMPT, 150, k=4, seed=2,
                                              adaptive=True).stats


def test_adaptive_k_max_below_k_is_refused(target, draft_factory):
    with pytest.raises(ValueError, match="k_max must be at least k=4, got 2"):
        specdec.speculative_generate(target, draft_factory("bigram"), PROMPT, 10, k=4, adaptive=True, k_max=2)
