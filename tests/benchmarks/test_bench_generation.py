"""pytest-benchmark suite: a quick local A/B of passes, draft characters and generation.

    pytest tests/benchmarks --benchmark-autosave                 # save a run
    pytest tests/benchmarks --benchmark-compare                  # compare with the last saved run
    pytest tests/benchmarks --benchmark-group-by=group           # draft x k side by side (the default)

Under `--benchmark-disable` (as in CI) each body runs once, untimed, so the suite is also a smoke test.
Threads are fixed to 1 by the session fixture; `extra_info` records them with acceptance and passes.
Target passes and generations run on every backend in `specdec.BACKENDS` (`-k eager`, `-k fused` pick one);
a group holds one backend, so the target-only baseline sits beside the speculative rows it is compared with,
and `--benchmark-group-by=param:positions` (or `param:k`) puts the backends side by side instead.
"""

import functools

import numpy as np
import pytest
import torch

import specdec
from specdec.decoding import trees
from specdec.decoding import sequoia
from specdec.measure.acceptance import measure_child_acceptance
from specdec.model.protocol import tree_support

from .conftest import backends_for_suite, drafts_for_suite

PROMPT, CHARS, SEED = "ROMEO:", 200, 0
DRAFTS = drafts_for_suite()
KS = [1, 2, 4, 8]
COST_TEXT = "KING HENRY:\nOnce more unto the breach, dear friends, once more;\nOr close the wall up"
BACKENDS = backends_for_suite()


@pytest.fixture(scope="module")
def context(target):
    """The ids every pass and drafted token is timed after, in the target's own tokens."""
    return target.tokenize(COST_TEXT)


@pytest.fixture(scope="module")
def on(target, draft_factory):
    """on(backend) -> (the target run by it, a draft factory for drafts made from that target), built once;
    eager is the session's target and drafts."""

    @functools.lru_cache(maxsize=None)
    def make(backend):
        if backend == "eager":
            return target, draft_factory
        model = specdec.load_target(backend=backend)
        return model, functools.lru_cache(maxsize=None)(lambda name: specdec.make_draft(name, model))

    return make


@pytest.mark.parametrize("positions", [1, 2, 3, 5, 9])
@pytest.mark.parametrize("backend", BACKENDS)
def test_target_pass(benchmark, on, context, backend, positions):
    benchmark.group = f"target pass by positions, {backend}"
    target = on(backend)[0]
    pos = len(context) - 1
    with torch.inference_mode():
        target(target.ids(context), 0)
        x = target.ids(context[-1:] * positions)
        logits = benchmark(target, x, pos)
    benchmark.extra_info.update(backend=backend, positions=positions, threads=torch.get_num_threads())
    assert logits.shape == (1, positions, target.vocab_size)


@pytest.mark.parametrize("draft", DRAFTS)
def test_draft_character(benchmark, target, draft_factory, context, draft):
    benchmark.group = "one drafted character"
    d = draft_factory(draft)
    rng = np.random.default_rng(0)
    d.reset()
    d.propose(context, 1, rng, 1.0)

    def one_character():
        d.rollback(len(context) - 1)
        return d.propose(context, 1, rng, 1.0)

    ids, q = benchmark(one_character)
    benchmark.extra_info.update(draft=draft, weight_bytes=d.weight_bytes(), threads=torch.get_num_threads())
    assert len(ids) <= 1 and q.shape == (len(ids), target.vocab_size)  # prompt lookup may find no match


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_target_only_generation(benchmark, on, backend, k):
    benchmark.group = f"generate {CHARS} chars, k={k}, {backend}"  # the baseline sits in every k group
    out = benchmark(specdec.generate, on(backend)[0], PROMPT, CHARS, seed=SEED)
    benchmark.extra_info.update(backend=backend, draft="target-only", k=0, target_passes=out.stats.target_passes,
                                chars_per_pass=1.0, acceptance=None, threads=torch.get_num_threads())
    assert out.stats.target_passes == CHARS


@pytest.mark.parametrize("k", KS)
@pytest.mark.parametrize("draft", DRAFTS)
@pytest.mark.parametrize("backend", BACKENDS)
def test_speculative_generation(benchmark, on, backend, draft, k):
    benchmark.group = f"generate {CHARS} chars, k={k}, {backend}"
    target, drafts = on(backend)
    out = benchmark(specdec.speculative_generate, target, drafts(draft), PROMPT, CHARS, k=k, seed=SEED)
    st = out.stats
    benchmark.extra_info.update(backend=backend, draft=draft, k=k, acceptance=st.acceptance,
                                chars_per_pass=st.chars_per_pass, target_passes=st.target_passes,
                                threads=torch.get_num_threads())
    assert len(out.ids) == CHARS and st.accepted + st.target_passes == CHARS


WORKLOAD_RUNS = specdec.load_workload("shakespeare24").cycled(4)  # six runs: every fourth prompt, seeds in turn


# target-only has no k: it runs once, named k=1 as before (the ids saved benchmarks compare by stay the same)
@pytest.mark.parametrize("draft,k", [("target-only", 1)] + [(d, k) for d in ("bigram", "ngram") for k in (1, 4, 8)])
def test_workload_generation(benchmark, target, draft_factory, draft, k):
    """Generating six runs of the workload (prompt, seed) one after another: time is the
    workload's; extra_info carries its lower-is-better counts (target passes per character, rejected per
    drafted) pooled over the runs."""
    if draft == "target-only":
        run = lambda: [specdec.generate(target, item.prompt, CHARS, seed=seed) for item, seed in WORKLOAD_RUNS]
    else:
        d = draft_factory(draft)
        run = lambda: [specdec.speculative_generate(target, d, item.prompt, CHARS, k=k, seed=seed)
                       for item, seed in WORKLOAD_RUNS]
    benchmark.group = f"workload shakespeare24 (6 runs), k={k}"
    outs = benchmark(run)
    passes = sum(o.stats.target_passes for o in outs)
    drafted, accepted = sum(o.stats.drafted for o in outs), sum(o.stats.accepted for o in outs)
    benchmark.extra_info.update(draft=draft, k=k, runs=len(outs), passes_per_char=passes / (CHARS * len(outs)),
                                rejected_per_drafted=(drafted - accepted) / drafted if drafted else None,
                                threads=torch.get_num_threads())
    assert all(len(o.ids) == CHARS for o in outs) and passes <= CHARS * len(outs)


@pytest.fixture(scope="module")
def budget_tree(target, draft_factory):
    """The ngram draft's DP shape for 32 nodes, from its child acceptance at the benchmark's prompt and seed
    (deterministic, measured once: not part of the timed generation)."""
    if reason := tree_support(target):
        pytest.skip(reason)
    acc = measure_child_acceptance(target, draft_factory("ngram"), PROMPT, CHARS, seed=SEED)
    return sequoia.optimal_tree(acc, 32)[0]


@pytest.mark.parametrize("shape", ["4x2x2x1", "budget 32"])
def test_tree_generation(benchmark, target, draft_factory, budget_tree, shape):
    """Tree rounds with the ngram draft (issue 13); extra_info carries the lower-is-better counts: target
    passes per character and rejected per drafted node."""
    spec = budget_tree if shape == "budget 32" else trees.TreeSpec.parse(shape)
    benchmark.group = f"generate {CHARS} chars, trees"
    out = benchmark(specdec.speculative_generate, target, draft_factory("ngram"), PROMPT, CHARS, 1, SEED, tree=spec)
    st = out.stats
    benchmark.extra_info.update(draft="ngram", tree=str(spec), nodes=spec.budget, depth=spec.depth,
                                passes_per_char=st.target_passes / CHARS, chars_per_pass=st.chars_per_pass,
                                rejected_per_drafted=(st.drafted - st.accepted) / st.drafted,
                                threads=torch.get_num_threads())
    assert len(out.ids) == CHARS and st.accepted + st.target_passes == CHARS
