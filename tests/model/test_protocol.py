"""The target protocol, draft registration and the prompt-lookup draft (no transformers needed)."""

import numpy as np
import pytest
import torch

import specdec
from specdec.decoding import drafts, ngram, registry
from specdec.decoding.drafts import Draft
from specdec.decoding.prompt_lookup import PromptLookupDraft, lookup
from specdec.model import corpus, protocol


class Counter5:
    """A toy target over the letters 'abcde': the next letter is always the one after the last (cyclic), so
    greedy text is known by hand. It keeps its own cache as a list of the tokens it has seen, and records
    every rollback, so the tests see what the loop asks of a target."""

    LETTERS = "abcde"

    def __init__(self):
        self.config = protocol.TargetConfig(vocab_size=5, context=64)
        self.seen: list[int] = []
        self.rollbacks: list[int] = []
        self.fed = 0  # tokens passed to forward in all

    device = torch.device("cpu")
    vocab_size = property(lambda self: self.config.vocab_size)
    context = property(lambda self: self.config.context)

    def tokenize(self, text):
        return [self.LETTERS.index(c) for c in text]

    def detokenize(self, ids):
        return "".join(self.LETTERS[i] for i in ids)

    def ids(self, tokens):
        return torch.tensor([tokens])

    def setup_cache(self, batch=1):
        pass

    def rollback(self, n_valid):
        self.rollbacks.append(n_valid)
        del self.seen[n_valid:]

    def __call__(self, idx, pos=None, tree=None):
        toks = idx[0].tolist()
        assert pos is not None and pos <= len(self.seen)  # never a pass past what the cache holds
        del self.seen[pos:]
        self.seen.extend(toks)
        self.fed += len(toks)
        logits = torch.full((1, len(toks), 5), -10.0)
        for i, t in enumerate(toks):
            logits[0, i, (t + 1) % 5] = 10.0
        return logits


def test_the_shipped_gpt_implements_the_target_and_tree_protocols(target):
    assert isinstance(target, protocol.Target) and isinstance(target, protocol.TreeTarget)
    assert protocol.tree_support(target) is None
    assert (target.vocab_size, target.context) == (84, 256)
    assert target.tokenize("Ay, me!\n") == corpus.encode("Ay, me!\n")
    assert target.detokenize(corpus.encode("Ay, me!\n")) == "Ay, me!\n"
    assert target.corpus_vocabulary is True


def test_a_toy_target_runs_target_only_and_speculative_generation_in_its_own_units():
    t = Counter5()
    assert isinstance(t, protocol.Target) and not isinstance(t, protocol.TreeTarget)
    out = specdec.generate(t, "ab", 6, temperature=0)
    assert out.text == "cdeabc" and out.stats.target_passes == 6
    # prompt lookup finds nothing in "ab" (round 1), then copies the cycle once it has been seen
    t2 = Counter5()
    spec = specdec.speculative_generate(t2, PromptLookupDraft(5), "ab", 12, k=3, seed=0, temperature=0)
    assert spec.text == "cdeabcdeabcd"
    assert t2.rollbacks[-1] == len("ab") + 12 - 1  # after the last round: all but the emitted token valid


def test_prompt_lookup_on_a_toy_target_counts_by_hand():
    """Rounds over "ab" + the cycle: ab->c, abc->d, abcd->e, abcde->a find no earlier occurrence of the last
    token (nothing drafted, 4 passes); abcdea: "a" at 0 -> drafts bcd, all accepted, bonus e; abcdeabcde:
    "cde" at 2 -> drafts abc (3 still wanted besides the bonus), all accepted, bonus d: 12 tokens, 6 passes."""
    t = Counter5()
    out = specdec.speculative_generate(t, PromptLookupDraft(5), "ab", 12, k=3, seed=0, temperature=0)
    s = out.stats
    assert (s.target_passes, s.draft_calls, s.drafted, s.accepted) == (6, 2, 6, 6)
    assert t.fed == 2 + 1 + 1 + 1 + 4 + 4  # the prompt once, then each round's pending token and drafts


def test_trees_need_a_tree_target_and_say_so():
    t = Counter5()
    with pytest.raises(ValueError, match="token trees need a target with keep_path"):
        specdec.speculative_generate(t, specdec.make_draft("bigram", specdec.load_target()), "ab", 4, k=1,
                                     tree=specdec.TreeSpec.parse("2x1"))


def test_table_drafts_for_another_target_are_counted_in_its_tokens(monkeypatch):
    """corpus_ids: None for the shipped characters; another target's tokenize over the corpus otherwise."""
    assert drafts.corpus_ids(specdec.load_target()) is None
    calls = []

    class Upper(Counter5):
        def tokenize(self, text):
            calls.append(text)
            return [0] * len(text)

    monkeypatch.setattr(corpus, "paragraphs", lambda split: ["ab\n\n", "", "cde"])
    assert drafts.corpus_ids(Upper()).tolist() == [0, 0, 0, 0, 0, 0, 0]
    assert calls == ["ab\n\n", "cde"]  # empty pieces skipped


def test_sparse_bigram_over_the_corpus_ids_is_the_shipped_table():
    d = drafts.BigramDraft(corpus.split_ids("train"), 84)
    q, u = corpus.encode("qu")
    np.testing.assert_allclose(d._dist([q]), drafts._bigram_table()[q], rtol=1e-12)
    np.testing.assert_allclose(d._dist([u]), drafts._bigram_table()[u], rtol=1e-12)
    ids, qs = d.propose([q], 3, np.random.default_rng(0), 1.0)
    assert qs.shape == (3, 84) and d.vocab_size == 84


def test_sparse_bigram_by_hand():
    # corpus 0 1 0 1 2 over V=3: after 0: {1: 2} -> (1, 3, 1) / 5; after 2: nothing -> uniform
    d = drafts.BigramDraft(np.array([0, 1, 0, 1, 2]), 3)
    np.testing.assert_allclose(d._dist([0]), [0.2, 0.6, 0.2])
    np.testing.assert_allclose(d._dist([1]), [2 / 5, 1 / 5, 2 / 5])  # after 1: 0 once, 2 once
    np.testing.assert_allclose(d._dist([2]), [1 / 3] * 3)
    with pytest.raises(ValueError, match="0..2"):
        drafts.BigramDraft(np.array([0, 3]), 3)


def test_token_ngram_tables_equal_the_shipped_ones_on_the_corpus_ids():
    a_index, a_rows = ngram.build_tables(3)
    b_index, b_rows = ngram.token_tables(3, ngram.MIN_COUNT, corpus.split_ids("train"), 84)
    assert a_index == b_index
    np.testing.assert_array_equal(a_rows, b_rows)


def test_token_ngram_refuses_an_order_whose_keys_overflow():
    # an order-m key holds m - 1 base-V digits: 50,000 ** 3 * 16 < 2**63 <= 50,000 ** 4 * 16, so order 4 at most
    with pytest.raises(ValueError, match=r"order 6 over a 50000-token vocabulary .* 1 <= order <= 4$"):
        ngram.token_tables(6, 8, np.zeros(10, dtype=np.int64), 50_000)


@pytest.mark.parametrize("tokens,k,want", [
    ([1, 2, 3, 9, 1, 2, 3], 3, [9, 1, 2]),  # 3-gram "1 2 3" matched at 0
    ([1, 2, 3, 9, 1, 2, 3], 9, [9, 1, 2, 3]),  # never past the end of the sequence
    ([5, 6, 7], 2, []),  # no earlier occurrence of any tail
    ([1, 2, 1, 3, 1], 4, [2, 1, 3, 1]),  # no 3- or 2-gram match: the 1-gram "1" at 0
    ([4, 1, 2, 7, 1, 2, 8, 1, 2], 2, [7, 1]),  # the earliest match wins, as in transformers
    ([3], 2, []),
])
def test_prompt_lookup_by_hand(tokens, k, want):
    assert lookup(tokens, k) == want


def test_prompt_lookup_q_is_one_hot_and_it_is_exact(target):
    d = specdec.make_draft("prompt-lookup", target)
    toks = corpus.encode("Romeo, Romeo")
    ids, q = d.propose(toks, 4, np.random.default_rng(0), 1.0)
    assert ids == corpus.encode(", Ro") and q.shape == (4, 84)
    assert q.sum() == 4 and all(q[i, x] == 1 for i, x in enumerate(ids))
    (row,) = specdec.verify(target, {"prompt-lookup": d}, k=4, samples=20_000, seed=0)
    assert row["verdict"] == "exact"


def test_prompt_lookup_greedy_equals_greedy_target_and_its_counts(target):
    greedy = specdec.generate(target, "ROMEO:", 100, seed=0, temperature=0).text
    out = specdec.speculative_generate(target, specdec.make_draft("prompt-lookup", target), "ROMEO:", 100, k=4,
                                       seed=1, temperature=0)
    assert out.text == greedy
    assert (out.stats.target_passes, out.stats.accepted) == (56, 44)


class Fixed(Draft):
    name = "fixed"

    def propose(self, tokens, k, rng, temperature):
        q = np.zeros((k, 84))
        q[:, 0] = 1.0
        return [0] * k, q

    def weight_bytes(self):
        return 0


def test_register_draft_and_draft_objects(target, monkeypatch):
    monkeypatch.setattr(registry, "REGISTERED", dict(registry.REGISTERED))
    specdec.register_draft("fixed", lambda t, **o: Fixed())
    assert "fixed" in specdec.draft_names() and "fixed" not in specdec.DRAFTS  # not in a report's defaults
    assert isinstance(specdec.make_draft("fixed", target), Fixed)
    obj = Fixed()
    assert specdec.make_draft(obj, target) is obj
    with pytest.raises(ValueError, match="'fixed' is taken"):
        specdec.register_draft("fixed", lambda t, **o: Fixed())
    with pytest.raises(ValueError, match="'bigram' is taken"):
        specdec.register_draft("bigram", lambda t, **o: Fixed())
    specdec.register_draft("fixed", lambda t, **o: Fixed(), replace=True)
    with pytest.raises(ValueError, match="got 'a b'"):
        specdec.register_draft("a b", lambda t, **o: Fixed())
    specdec.register_draft("not-a-draft", lambda t, **o: 3)
    with pytest.raises(specdec.UnknownDraftError, match="returned a int, not a Draft"):
        specdec.make_draft("not-a-draft", target)


def test_unknown_draft_lists_every_name_and_hf(target):
    with pytest.raises(specdec.UnknownDraftError) as info:
        specdec.make_draft("int3", target)
    assert str(info.value) == ("unknown draft 'int3' (available: bigram, int8, int4, ngram, small, int8-dynamic, "
                               "prompt-lookup, shipped, medusa, eagle, hf:PATH, eagle3:PATH)")


def test_quantized_drafts_refuse_another_target():
    with pytest.raises(specdec.UnknownDraftError, match="'int8' is a quantized copy of the shipped GPT"):
        specdec.make_draft("int8", Counter5())
    with pytest.raises(specdec.UnknownDraftError, match="'small' reads the corpus's characters"):
        specdec.make_draft("small", Counter5())
