"""Joint exactness through `speculative_generate` itself: the first three characters of whole generations.

For every draft, k in {1, 4}, temperature 0.7 and 1.0, fixed and adaptive k, SAMPLES generations (one seed
each) are compared with REFERENCE target-only generations at that temperature (other seeds) by a two-sample
chi-square test; the verdicts are taken over all 48 rows at once (family alpha 0.001), as a report would.
This reaches what the first-character check cannot: positions 2..k of a round, the bonus character, the
target's and the draft's cache rollback after a rejection, and the adaptive schedule.

The default run checks a twin of the grid: each draft at one k and temperature, both schedules, the four
(k, temperature) pairs taken in turn so that every cell of the grid is run by some draft (12 rows). SAMPLES is
enough to catch a residual taken from the wrong row of q (the negative control).
"""

import pytest

import specdec
from specdec.measure import exactness
from specdec.model import sampling
from specdec.decoding import rule

SAMPLES, REFERENCE = 250, 1_000
GRID = [(k, t, adaptive) for k in (1, 4) for t in (0.7, 1.0) for adaptive in (False, True)]
DRAFTS = list(specdec.DRAFTS)
FULL = [(d, k, t, a) for d in DRAFTS for k, t, a in GRID]  # 48 rows
_TURNS = [(4, 0.7), (1, 1.0), (4, 1.0), (1, 0.7)]  # the twin's (k, temperature) for drafts 0, 1, 2, 3, 4, ...
TWIN = [(d, *_TURNS[i % len(_TURNS)], a) for i, d in enumerate(DRAFTS) for a in (False, True)]
FULL_THRESHOLD = exactness.FAMILY_ALPHA / len(FULL)  # a row's threshold in the whole grid (the stricter one)


def _references(target, n):
    return {t: exactness.joint_counts(target, None, n, temperature=t) for t in (0.7, 1.0)}


def _grid(target, draft_factory, cells, samples, references):
    """The verdicts over `cells` (draft, k, temperature, adaptive), all at once as a report would."""
    rows = []
    for k, t, adaptive in GRID:
        drafts = {d: draft_factory(d) for d, *cell in cells if tuple(cell) == (k, t, adaptive)}
        if drafts:
            rows += exactness.verify_joint(target, drafts, k, samples, temperature=t, adaptive=adaptive,
                                           reference=references[t])
    return exactness.verdicts(rows)


def _failures(rows):
    return [(r["draft"], r["k"], r["temperature"], r["adaptive"], r["p_value"]) for r in rows if r["verdict"] != "exact"]


def _check_layout(rows, cells, samples, reference):
    """The rows are exactly `cells`, at the sample counts and the threshold of len(cells) rows."""
    assert len(rows) == len(cells)
    assert {(r["draft"], r["k"], r["temperature"], r["adaptive"]) for r in rows} == set(cells)
    assert all(r["samples"] == samples and r["reference_samples"] == reference for r in rows)
    assert rows[0]["p_threshold"] == pytest.approx(exactness.FAMILY_ALPHA / len(cells))
    # The adaptive rows are mostly not the fixed runs again (the same seeds): the schedule changes the first 3
    # characters' counts. Not all: with a draft the target nearly always accepts, k = 4's first round usually
    # emits all three, and the two samples can coincide.
    p = {(r["draft"], r["k"], r["temperature"], r["adaptive"]): r["p_value"] for r in rows}
    differ = [p[d, k, t, True] != p[d, k, t, False] for d, k, t, a in p if a]
    assert sum(differ) >= len(differ) // 2


def _check_draft(rows, cells, draft):
    mine = [r for r in rows if r["draft"] == draft]
    assert len(mine) == sum(d == draft for d, *_ in cells) and not _failures(mine)


@pytest.fixture(scope="module")
def references(target):
    return _references(target, REFERENCE)


@pytest.fixture(scope="module")
def grid(target, draft_factory, references):
    return _grid(target, draft_factory, TWIN, SAMPLES, references)


def test_the_twin_runs_every_cell_of_the_grid_and_every_draft_in_both_schedules():
    assert {(k, t, a) for _, k, t, a in TWIN} == set(GRID) and len(TWIN) == 2 * len(DRAFTS)
    assert {(d, k, t) for d, k, t, a in TWIN if a} == {(d, k, t) for d, k, t, a in TWIN if not a}
    assert set(TWIN) < set(FULL) and len(FULL) == len(DRAFTS) * 8


def test_the_grid_is_its_cells_at_the_sample_counts_and_threshold(grid):
    _check_layout(grid, TWIN, SAMPLES, REFERENCE)


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
    _check_draft(grid, TWIN, draft)


def _wrong_row(p, q, drafted, rng):
    """The rule with one bug: the residual at a rejection is taken against the previous row of q."""
    for i, x in enumerate(drafted):
        if p[i, x] >= q[i, x] or rng.random() * q[i, x] < p[i, x]:
            continue
        return i, sampling.sample(rule.residual(p[i], q[i - 1]), rng)
    return len(drafted), sampling.sample(p[len(drafted)], rng)


@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_a_residual_from_the_wrong_row_of_q_fails(target, draft_factory, references, monkeypatch, temperature):
    """Negative control: the same check, at the grid's sample count and the whole grid's threshold (the twin's
    is looser), with the rule broken."""
    monkeypatch.setattr(rule, "accept_reject", _wrong_row)
    (row,) = exactness.verify_joint(target, {"ngram": draft_factory("ngram")}, 4, SAMPLES, temperature=temperature,
                                    reference=references[temperature])
    assert row["p_value"] <= FULL_THRESHOLD


@pytest.fixture(scope="module")
def batch_target():
    """The batched rows' own target (the same checkpoint): a batch leaves its cache with B rows, which the
    session's target must not carry into tests that compare every row of its cache."""
    return specdec.load_target()


@pytest.mark.parametrize("draft,k,temperature", [("int4", 4, 1.0), ("bigram", 1, 0.7)])
def test_batched_generations_have_the_joint_law_of_one_at_a_time(batch_target, references, draft, k, temperature):
    """B = 8 at a time: the same first three characters as one at a time (one generator per sequence, the same
    seeds), so the same counts, and the row is exact against target-only generation (the session target's
    reference counts: the same weights)."""
    target = batch_target
    d = specdec.make_draft(draft, target)
    one = exactness.joint_counts(target, d, 80, k, seed=9, temperature=temperature)
    assert exactness.joint_counts(target, d, 80, k, seed=9, temperature=temperature, batch=8) == one
    (row,) = exactness.verify_joint(target, {draft: d}, k, SAMPLES, temperature=temperature,
                                    reference=references[temperature], batch=8)
    assert row["batch"] == 8 and row["verdict"] == "exact"


def test_batched_target_only_counts_are_the_reference_counts(batch_target, references):
    assert exactness.joint_counts(batch_target, None, REFERENCE, temperature=1.0, batch=32) == references[1.0]
