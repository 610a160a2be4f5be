"""`Tokenize`: text to int32 token ids with a Hugging Face `tokenizers.Tokenizer`.

A `MapTransform` whose `map_many` encodes many texts in one `encode_batch` call (Rust,
without the GIL, on several threads), so a worker's chunk or a random-access read of
several positions costs one call per text field. The tokenizer is pickled with the
pipeline: it reaches each worker process once, with the plan, never per element.
Needs `tokenizers` (`pip install chute-transforms[text]`), imported only when used.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from chute_core.internal import check_bool

from ._transforms import MapTransform

__all__ = ["Tokenize"]


class Tokenize(MapTransform[Any, Any]):
    """Replaces text by its token ids (1-D int32 arrays), one element at a time or many.

    A `str` (or UTF-8 `bytes`) element becomes its array of ids; in a dict element,
    each key of `fields` is replaced by the ids of its text and the other keys are kept
    as they are.

    Args:
        tokenizer: a `tokenizers.Tokenizer`, the path of its `tokenizer.json`, or a
            `transformers` fast tokenizer (its `backend_tokenizer` is used).
        fields: the keys to tokenize in dict elements (a key or a sequence of keys).
        add_special_tokens: whether the tokenizer's post-processor adds its special
            tokens (e.g. a BOS/EOS template).
        eos_id: a token id appended to every text's ids (None: nothing appended).

    Example:
        >>> from tokenizers import Tokenizer, models, pre_tokenizers
        >>> vocab = {"[UNK]": 0, "hello": 1, "world": 2}
        >>> tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
        >>> tok.pre_tokenizer = pre_tokenizers.Whitespace()
        >>> tokenize = Tokenize(tok, eos_id=3)
        >>> tokenize.map({"text": "hello world", "id": 7})
        {'text': array([1, 2, 3], dtype=int32), 'id': 7}
        >>> [ids.tolist() for ids in tokenize.map_many(["world", "hello there"])]
        [[2, 3], [1, 0, 3]]
    """

    def __init__(
        self,
        tokenizer: Any,
        fields: str | Sequence[str] = "text",
        *,
        add_special_tokens: bool = False,
        eos_id: int | None = None,
    ) -> None:
        owner = "Tokenize"
        self._path: str | None = None
        self._tokenizer: Any = None
        if isinstance(tokenizer, str | os.PathLike):
            self._path = os.fspath(tokenizer)
            if not os.path.isfile(self._path):
                raise FileNotFoundError(
                    f"{owner}: no tokenizer file at {self._path!r} (expected the path of a "
                    "Hugging Face tokenizer.json)."
                )
        else:
            backend = getattr(tokenizer, "backend_tokenizer", tokenizer)
            if not callable(getattr(backend, "encode_batch", None)):
                raise TypeError(
                    f"{owner}: tokenizer must be a tokenizers.Tokenizer, the path of its "
                    f"tokenizer.json or a transformers fast tokenizer, got "
                    f"{type(tokenizer).__name__}."
                )
            self._tokenizer = backend
        keys = (fields,) if isinstance(fields, str) else tuple(fields)
        if not keys or not all(isinstance(key, str) for key in keys):
            raise TypeError(
                f"{owner}: fields must be a key or a non-empty sequence of keys, got {fields!r}."
            )
        self._fields = keys
        self._special = check_bool(add_special_tokens, "add_special_tokens", owner)
        if eos_id is not None and (isinstance(eos_id, bool) or not isinstance(eos_id, int)):
            raise TypeError(f"{owner}: eos_id must be an int or None, got {eos_id!r}.")
        if eos_id is not None and eos_id < 0:
            raise ValueError(f"{owner}: eos_id must be >= 0, got {eos_id}.")
        self._eos = eos_id

    @property
    def tokenizer(self) -> Any:
        """The `tokenizers.Tokenizer` (loaded from its file on first use, if a path)."""
        if self._tokenizer is None:
            from tokenizers import Tokenizer

            assert self._path is not None
            self._tokenizer = Tokenizer.from_file(self._path)
        return self._tokenizer

    def map(self, element: Any) -> Any:
        """The element with its text replaced by token ids."""
        return self.map_many([element])[0]

    def map_many(self, elements: Sequence[Any]) -> list[Any]:
        """The elements with their text replaced by token ids: one `encode_batch` per field."""
        if not elements:
            return []
        dicts = sum(isinstance(e, Mapping) for e in elements)
        if 0 < dicts < len(elements):
            raise TypeError(
                f"Tokenize: elements must be all str or all dicts, got {dicts} dicts among "
                f"{len(elements)} elements."
            )
        if dicts:
            outputs = [dict(e) for e in elements]
            for key in self._fields:
                texts = [self._text(e, key) for e in elements]
                for output, ids in zip(outputs, self._encode(texts), strict=True):
                    output[key] = ids
            return outputs
        return self._encode([self._text(e, None) for e in elements])

    def _text(self, element: Any, key: str | None) -> str:
        value = element
        if key is not None:
            if key not in element:
                raise KeyError(
                    f"Tokenize: the element has no key {key!r} to tokenize (its keys: "
                    f"{sorted(map(str, element))})."
                )
            value = element[key]
        if isinstance(value, bytes):
            try:
                return value.decode("utf-8")
            except UnicodeDecodeError as error:
                raise ValueError(
                    f"Tokenize: {'the element' if key is None else repr(key)} holds bytes "
                    f"that are not UTF-8 text ({error})."
                ) from error
        if not isinstance(value, str):
            where = "an element" if key is None else f"key {key!r}"
            raise TypeError(
                f"Tokenize: {where} must hold str or bytes, got {type(value).__name__}."
            )
        return value

    def _encode(self, texts: list[str]) -> list[npt.NDArray[np.int32]]:
        encodings = self.tokenizer.encode_batch(texts, add_special_tokens=self._special)
        if self._eos is None:
            return [np.asarray(e.ids, dtype=np.int32) for e in encodings]
        eos = [self._eos]
        return [np.asarray(e.ids + eos, dtype=np.int32) for e in encodings]

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        if self._path is not None:
            state["_tokenizer"] = None  # Loaded again from its file where it lands.
        return state

    def __repr__(self) -> str:
        source = repr(self._path) if self._path is not None else type(self.tokenizer).__name__
        return f"Tokenize({source}, fields={self._fields!r})"
