"""Tokenize (Hugging Face tokenizers) and the batched `map_many` of map transforms."""

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chute_samplers import SequentialIter
from chute_transforms import MapChain, MapIter, MapMap, MapTransform, Tokenize

tokenizers = pytest.importorskip("tokenizers")  # An extra: `chute-transforms[text]`.

CORPUS = [
    "the quick brown fox jumps over the lazy dog",
    "a stitch in time saves nine",
    "all that glitters is not gold",
    "to be or not to be, that is the question",
] * 20


@pytest.fixture(scope="module")
def bpe():
    """A small byte-level BPE tokenizer trained here, on a few sentences."""
    tok = tokenizers.Tokenizer(tokenizers.models.BPE())
    tok.pre_tokenizer = tokenizers.pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = tokenizers.decoders.ByteLevel()
    trainer = tokenizers.trainers.BpeTrainer(
        vocab_size=300,
        special_tokens=["<eos>"],
        initial_alphabet=tokenizers.pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(CORPUS, trainer)
    return tok


def _ids(tok, text):
    return tok.encode(text, add_special_tokens=False).ids


def test_a_text_becomes_its_int32_ids_and_decodes_back(bpe):
    out = Tokenize(bpe).map("the lazy fox")
    assert out.dtype == np.int32 and out.ndim == 1
    assert out.tolist() == _ids(bpe, "the lazy fox")
    assert bpe.decode(out.tolist()) == "the lazy fox"


def test_dict_fields_are_replaced_and_other_keys_kept(bpe):
    tokenize = Tokenize(bpe, fields=["title", "body"], eos_id=0)
    out = tokenize.map({"title": "gold", "body": b"not gold", "id": 4})
    assert out["id"] == 4
    assert out["title"].tolist() == [*_ids(bpe, "gold"), 0]
    assert out["body"].tolist() == [*_ids(bpe, "not gold"), 0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.text(max_size=30), max_size=12))
def test_map_many_equals_mapping_one_by_one(bpe, texts):
    tokenize = Tokenize(bpe, eos_id=1)
    many = tokenize.map_many(texts)
    assert [a.tolist() for a in many] == [tokenize.map(t).tolist() for t in texts]
    assert all(a.dtype == np.int32 for a in many)


def test_a_tokenizer_file_is_loaded_where_the_transform_lands(bpe, tmp_path):
    path = tmp_path / "tokenizer.json"
    bpe.save(str(path))
    tokenize = Tokenize(path)
    shipped = pickle.dumps(tokenize)
    assert b"merges" not in shipped  # The path travels, not the tokenizer.
    assert pickle.loads(shipped).map("a stitch").tolist() == _ids(bpe, "a stitch")
    assert pickle.loads(pickle.dumps(Tokenize(bpe))).map("nine").tolist() == _ids(bpe, "nine")


def test_bad_arguments_and_elements_are_named(bpe, tmp_path):
    with pytest.raises(TypeError, match=r"^Tokenize: tokenizer must be a tokenizers.Tokenizer"):
        Tokenize(object())
    missing = tmp_path / "none.json"
    with pytest.raises(FileNotFoundError, match=r"^Tokenize: no tokenizer file at "):
        Tokenize(missing)
    with pytest.raises(TypeError, match=r"^Tokenize: fields must be a key or a non-empty"):
        Tokenize(bpe, fields=[])
    with pytest.raises(ValueError, match=r"^Tokenize: eos_id must be >= 0, got -1"):
        Tokenize(bpe, eos_id=-1)
    tokenize = Tokenize(bpe)
    with pytest.raises(
        KeyError, match=r"the element has no key 'text' to tokenize \(its keys: \['body'\]\)"
    ):
        tokenize.map({"body": "x"})
    with pytest.raises(
        TypeError, match=r"^Tokenize: key 'text' must hold str or bytes, got int\.$"
    ):
        tokenize.map({"text": 3})
    with pytest.raises(ValueError, match=r"^Tokenize: the element holds bytes that are not UTF-8"):
        tokenize.map(b"\xff\xfe")
    with pytest.raises(TypeError, match=r"^Tokenize: elements must be all str or all dicts"):
        Tokenize(bpe).map_many([{"text": "a"}, "b"])


class Counted(MapTransform):
    """Doubles; counts its batched calls; its batched call fails on `bad_batch`."""

    def __init__(self, fail_many=False, fail_at=None, short=False):
        self.calls, self.fail_many, self.fail_at, self.short = [], fail_many, fail_at, short

    def map(self, element):
        if element == self.fail_at:
            raise ZeroDivisionError(f"no {element}")
        return 2 * element

    def map_many(self, elements):
        self.calls.append(len(elements))
        if self.fail_many or self.fail_at in elements:
            raise RuntimeError("batched call failed")
        out = [2 * e for e in elements]
        return out[:-1] if self.short else out


def test_map_chain_gives_a_transform_the_whole_list_in_one_call():
    counted = Counted()
    outputs = []
    MapChain([counted, lambda x: x + 1]).run(list(range(10)), 0, outputs)
    assert outputs == [2 * x + 1 for x in range(10)]
    assert counted.calls == [10]


def test_a_failing_batched_call_is_mapped_again_one_by_one():
    outputs = []
    MapChain([Counted(fail_many=True)]).run([1, 2, 3], 0, outputs)
    assert outputs == [2, 4, 6]
    outputs = []
    with pytest.raises(ZeroDivisionError, match="no 5") as caught:
        MapChain([Counted(fail_at=5), abs]).run([3, 4, 5, 6], 20, outputs)
    assert outputs == [6, 8]  # The outputs before the failing element, as one by one.
    assert caught.value.__notes__ == ["chute: raised by map(Counted) on the element at position 22"]


def test_a_batched_call_returning_too_few_outputs_is_an_error():
    with pytest.raises(ValueError) as caught:
        MapChain([Counted(short=True)]).run([1, 2], 0, [])
    assert str(caught.value) == (
        "map(Counted): map_many returned 1 outputs for 2 elements; it must return one "
        "output per element, in order."
    )


def test_random_access_reads_use_the_batched_call_and_streams_map_one_by_one(bpe):
    counted = Counted()
    node = MapMap(list(range(8)), counted)
    assert node.__getitems__([5, 1, 2]) == [10, 2, 4]
    assert counted.calls == [3]
    with pytest.raises(ZeroDivisionError) as caught:
        MapMap(list(range(8)), Counted(fail_at=4)).__getitems__([3, 4])
    assert caught.value.__notes__ == ["chute: raised by map(Counted) on the element at position 4"]
    texts = ["gold", "nine", "dog"]
    streamed = list(MapIter(SequentialIter(texts), Tokenize(bpe)))
    assert [a.tolist() for a in streamed] == [_ids(bpe, t) for t in texts]
