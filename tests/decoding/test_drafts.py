import numpy as np
import pytest
import torch

import specdec
from specdec.model import corpus, sampling
from specdec.decoding import drafts, ngram
from specdec.decoding import registry
from specdec.model import quantize


def test_unknown_draft_lists_the_available_ones(target):
    with pytest.raises(specdec.UnknownDraftError) as info:
        specdec.make_draft("int3", target)
    msg = str(info.value)
    assert "'int3'" in msg and all(name in msg for name in specdec.DRAFTS)


def test_bigram_rows_are_counted_on_the_training_split():
    table = drafts._bigram_table()
    np.testing.assert_allclose(table.sum(1), 1.0)
    ids = corpus.split_ids("train")
    q, u = corpus.encode("qu")
    after_q = ids[1:][ids[:-1] == q]
    assert table[q, u] == pytest.approx(((after_q == u).sum() + 1) / (len(after_q) + 84))


@pytest.mark.parametrize("name", list(specdec.DRAFTS))
def test_propose_returns_k_drafts_with_the_q_they_were_sampled_from(target, draft_factory, name):
    d = draft_factory(name)
    d.reset()
    tokens = corpus.encode("JULIET:\nO Romeo, Romeo")
    ids, q = d.propose(tokens, 5, np.random.default_rng(0), 1.0)
    assert len(ids) == 5 and q.shape == (5, 84)
    np.testing.assert_allclose(q.sum(1), 1.0, atol=1e-6)
    assert all(q[i, x] > 0 for i, x in enumerate(ids))
    # q's first row is the draft's distribution after the context: the same whatever the RNG
    d.reset()
    _, q2 = d.propose(tokens, 1, np.random.default_rng(99), 1.0)
    np.testing.assert_allclose(q2[0], q[0], atol=1e-6)


def test_model_draft_rolls_back_its_cache(target, draft_factory):
    d = draft_factory("int8")
    tokens = corpus.encode("HAMLET:\nTo be, or not to be")
    d.reset()
    d.propose(tokens, 4, np.random.default_rng(0), 1.0)
    assert d.pos == len(tokens) + 3  # the prompt and 3 fed drafts (the 4th is never fed)
    d.rollback(len(tokens) - 2)
    after, q_after = d.propose(tokens, 1, np.random.default_rng(1), 0.0)
    d.reset()
    fresh, q_fresh = d.propose(tokens, 1, np.random.default_rng(1), 0.0)
    assert after == fresh
    np.testing.assert_array_equal(q_after, q_fresh)


def test_weight_bytes_shrink_with_bits(target, draft_factory):
    sizes = {n: draft_factory(n).weight_bytes() for n in ("int8", "int8-dynamic", "int4", "bigram")}
    assert quantize.float32_bytes(target) > sizes["int8"] > sizes["int4"] > sizes["bigram"]
    assert quantize.float32_bytes(target) > sizes["int8-dynamic"] > sizes["int4"]


def test_cpu_only_drafts_are_declared_and_refused_elsewhere(target, draft_factory):
    assert {n for n in specdec.DRAFTS if draft_factory(n).cpu_only} == registry.CPU_ONLY == {"int8-dynamic"}
    assert registry.available_on("cpu") == list(specdec.DRAFTS)
    assert registry.available_on("cuda") == [n for n in specdec.DRAFTS if n != "int8-dynamic"]


def test_a_cpu_only_draft_beside_a_target_elsewhere_is_one_line(target, draft_factory, monkeypatch):
    """No GPU needed: the target reports a CUDA device; the refusal comes before anything runs on it."""
    monkeypatch.setattr(type(target), "device", property(lambda self: torch.device("cuda", 0)))
    with pytest.raises(drafts.DeviceError, match="draft 'int8-dynamic' runs on the CPU only, the target is on cuda"
                       r" \(available there: bigram, int8, int4, ngram, small\)") as info:
        specdec.make_draft("int8-dynamic", target)
    assert "\n" not in str(info.value)
    with pytest.raises(ValueError, match="draft 'int8-dynamic' runs on the CPU only, the target is on cuda"):
        specdec.speculative_generate(target, draft_factory("int8-dynamic"), "ROMEO:", 10, k=2)


def test_ngram_rows_are_distributions_and_back_off():
    index, rows = ngram.build_tables(4)
    np.testing.assert_allclose(rows.sum(1), 1.0, atol=1e-5)
    d = ngram.NgramDraft(4)
    V = 84
    seen = corpus.encode("the")
    h = (seen[0] * V + seen[1]) * V + seen[2]
    assert index[h * 16 + 3] >= 0
    np.testing.assert_allclose(d._dist(corpus.encode("to the")), rows[index[h * 16 + 3]])
    # a context never seen falls back to a shorter one, down to the unigram
    unseen = corpus.encode("}}}")
    assert (h := (unseen[0] * V + unseen[1]) * V + unseen[2]) * 16 + 3 not in index
    assert d._dist(unseen).shape == (V,)


def test_ngram_order_bounds():
    with pytest.raises(ValueError, match="between 1 and 10"):
        ngram.build_tables(11)


def test_ngram_predicts_better_than_bigram(target, draft_factory):
    """Acceptance is what a draft is for: the n-gram is accepted more often at the same k."""
    acc = {n: specdec.speculative_generate(target, draft_factory(n), "ROMEO:", 200, k=2, seed=0).stats.acceptance
           for n in ("bigram", "ngram")}
    assert acc["ngram"] > acc["bigram"]


def test_temperature_is_applied_to_q_like_to_p(draft_factory):
    d = draft_factory("bigram")
    tokens = corpus.encode("KING:")
    _, q1 = d.propose(tokens, 1, np.random.default_rng(0), 1.0)
    _, qh = d.propose(tokens, 1, np.random.default_rng(0), 0.5)
    np.testing.assert_allclose(qh[0], sampling.temper(q1[0], 0.5))


def test_ngram_tables_round_trip_through_the_disk_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("SPECDEC_CACHE", str(tmp_path))
    ngram.build_tables.cache_clear()
    try:
        index, rows = ngram.build_tables(3)  # counted, then written
        assert [p.name for p in tmp_path.iterdir()] == [f"ngram-o3-m{ngram.MIN_COUNT}-{corpus.CORPUS_SHA256[:12]}.npz"]
        ngram.build_tables.cache_clear()
        index2, rows2 = ngram.build_tables(3)  # read back
        assert index2 == index
        np.testing.assert_array_equal(rows2, rows)
    finally:
        ngram.build_tables.cache_clear()
