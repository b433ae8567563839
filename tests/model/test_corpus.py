import numpy as np
import pytest

from specdec.model import corpus


def test_vocabulary_is_the_84_sorted_characters_of_the_corpus():
    vocab = corpus.vocabulary()
    assert len(vocab) == 84
    assert vocab == "".join(sorted(vocab))
    assert vocab[0] == "\n" and vocab[1] == " " and vocab[-1] == "}"


def test_corpus_is_the_documented_text():
    text = corpus.load_text()
    assert len(text) == 5_052_231
    assert text.startswith("\ufeff") is False


def test_encode_decode_round_trip():
    s = "ROMEO:\nBut soft, what light?"
    ids = corpus.encode(s)
    assert corpus.decode(ids) == s
    assert ids[:2] == [corpus.vocabulary().index("R"), corpus.vocabulary().index("O")]


@pytest.mark.parametrize("bad", ["é", "~", "\t", "ROMEO: ♥"])
def test_encode_names_the_character_outside_the_vocabulary(bad):
    with pytest.raises(corpus.VocabularyError, match="not in the vocabulary") as info:
        corpus.encode(bad)
    offending = next(ch for ch in bad if ch not in corpus.vocabulary())
    assert repr(offending) in str(info.value)


def test_split_is_first_90_percent_train_last_10_percent_val():
    train, val = corpus.split_ids("train"), corpus.split_ids("val")
    assert len(train) == int(5_052_231 * 0.9)
    assert len(train) + len(val) == 5_052_231
    whole = np.asarray(corpus.encode(corpus.load_text()[:100]), dtype=np.uint8)
    assert np.array_equal(train[:100], whole)
    assert corpus.decode(val[-20:]) == corpus.load_text()[-20:]


def test_unknown_split_is_rejected():
    with pytest.raises(ValueError, match="'test'"):
        corpus.split_ids("test")
