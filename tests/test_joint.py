"""Joint exactness through `speculative_generate` itself: the first three characters of whole generations.

For every draft, k in {1, 4}, temperature 0.7 and 1.0, fixed and adaptive k, SAMPLES generations (one seed
each) are compared with REFERENCE target-only generations at that temperature (other seeds) by a two-sample
chi-square test; the verdicts are taken over all 48 rows at once (family alpha 0.001), as a report would.
This reaches what the first-character check cannot: positions 2..k of a round, the bonus character, the
target's and the draft's cache rollback after a rejection, and the adaptive schedule.

SAMPLES keeps this module near a minute and a half on a 2-core machine, enough to catch a residual taken from
the wrong row of q (the negative control). The slow test repeats the grid with SLOW_SAMPLES generations.
"""

import pytest

import specdec
from specdec.measure import exactness
from specdec.model import sampling
from specdec.decoding import rule

SAMPLES, REFERENCE = 250, 1_000
SLOW_SAMPLES, SLOW_REFERENCE = 2_000, 8_000
GRID = [(k, t, adaptive) for k in (1, 4) for t in (0.7, 1.0) for adaptive in (False, True)]
DRAFTS = list(specdec.DRAFTS)


def _references(target, n):
    return {t: exactness.joint_counts(target, None, n, temperature=t) for t in (0.7, 1.0)}


def _grid(target, draft_factory, samples, references):
    drafts = {name: draft_factory(name) for name in DRAFTS}
    rows = []
    for k, t, adaptive in GRID:
        rows += exactness.verify_joint(target, drafts, k, samples, temperature=t, adaptive=adaptive,
                                       reference=references[t])
    return exactness.verdicts(rows)


def _failures(rows):
    return [(r["draft"], r["k"], r["temperature"], r["adaptive"], r["p_value"]) for r in rows if r["verdict"] != "exact"]


@pytest.fixture(scope="module")
def references(target):
    return _references(target, REFERENCE)


@pytest.fixture(scope="module")
def grid(target, draft_factory, references):
    return _grid(target, draft_factory, SAMPLES, references)


def test_the_grid_is_every_draft_k_temperature_and_schedule(grid):
    assert len(grid) == len(DRAFTS) * 8
    assert {(r["draft"], r["k"], r["temperature"], r["adaptive"]) for r in grid} == {
        (d, k, t, a) for d in DRAFTS for k, t, a in GRID}
    assert all(r["samples"] == SAMPLES and r["reference_samples"] == REFERENCE for r in grid)
    assert grid[0]["p_threshold"] == pytest.approx(0.001 / len(grid))
    # The adaptive rows are mostly not the fixed runs again (the same seeds): the schedule changes the first 3
    # characters' counts. Not all: with a draft the target nearly always accepts, k = 4's first round usually
    # emits all three, and the two samples can coincide.
    p = {(r["draft"], r["k"], r["temperature"], r["adaptive"]): r["p_value"] for r in grid}
    differ = [p[d, k, t, True] != p[d, k, t, False] for d, k, t, a in p if a]
    assert sum(differ) >= len(differ) // 2


@pytest.mark.parametrize("k", [1, 4])
def test_the_adaptive_schedule_reaches_the_first_three_characters(target, draft_factory, k):
    """With the same seed, some adaptive run's first 3 characters differ from the fixed run's: the runs are long
    enough (exactness.joint_run) for the schedule to set a round inside them."""
    def first3(seed, adaptive):
        return specdec.speculative_generate(target, draft_factory("bigram"), exactness.JOINT_PROMPT,
                                            exactness.joint_run(k), k, seed, adaptive=adaptive).text[:3]

    assert any(first3(seed, False) != first3(seed, True) for seed in range(0, 40, 2))


@pytest.mark.parametrize("draft", DRAFTS)
def test_the_first_three_characters_are_distributed_as_target_only_generation(grid, draft):
    mine = [r for r in grid if r["draft"] == draft]
    assert len(mine) == 8 and not _failures(mine)


def _wrong_row(p, q, drafted, rng):
    """The rule with one bug: the residual at a rejection is taken against the previous row of q."""
    for i, x in enumerate(drafted):
        if p[i, x] >= q[i, x] or rng.random() * q[i, x] < p[i, x]:
            continue
        return i, sampling.sample(rule.residual(p[i], q[i - 1]), rng)
    return len(drafted), sampling.sample(p[len(drafted)], rng)


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_a_residual_from_the_wrong_row_of_q_fails(target, draft_factory, grid, references, monkeypatch, temperature):
    """Negative control: the same check, at the grid's sample count and threshold, with the rule broken."""
    monkeypatch.setattr(rule, "accept_reject", _wrong_row)
    (row,) = exactness.verify_joint(target, {"ngram": draft_factory("ngram")}, 4, SAMPLES, temperature=temperature,
                                    reference=references[temperature])
    assert row["p_value"] <= grid[0]["p_threshold"]


@pytest.mark.slow
def test_the_grid_holds_with_eight_times_the_generations(target, draft_factory):
    rows = _grid(target, draft_factory, SLOW_SAMPLES, _references(target, SLOW_REFERENCE))
    assert not _failures(rows)
