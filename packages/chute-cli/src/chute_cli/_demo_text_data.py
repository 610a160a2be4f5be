"""The text demo's data: the standard library's docstrings, a BPE tokenizer, the pipeline.

The text ships with every Python installation (the docstrings of the standard
library's modules, classes and functions), so nothing is downloaded. Functions here
run in worker processes, so they live in an importable module.
"""

from __future__ import annotations

import ast
import json
import os
import sysconfig
from typing import Any

__all__ = [
    "BATCH",
    "EOS",
    "SEQUENCE",
    "VOCAB",
    "docstrings",
    "text_pipeline",
    "train_tokenizer",
    "write_corpus",
]

BATCH = 16
SEQUENCE = 128
VOCAB = 1024
EOS = 0
"""The id of `<eos>`, the tokenizer's first special token, appended to every text."""
_MIN_CHARS = 40
_HELD_OUT_EVERY = 20  # Every 20th docstring is held out.


def docstrings(limit: int | None = None) -> list[str]:
    """The docstrings (of 40 characters or more) of the standard library's modules.

    The top-level `.py` files of the library, by name; in each, its module, classes and
    functions, in the order `ast.walk` gives.

    Example:
        >>> texts = docstrings(limit=5)
        >>> len(texts), all(len(text) >= 40 for text in texts)
        (5, True)
    """
    root = sysconfig.get_paths()["stdlib"]
    texts: list[str] = []
    for name in sorted(os.listdir(root)):
        if not name.endswith(".py"):
            continue
        try:
            with open(os.path.join(root, name), encoding="utf-8") as file:
                tree = ast.parse(file.read())
        except (SyntaxError, UnicodeDecodeError, OSError):
            continue  # A file this Python cannot parse (e.g. a test fixture).
        kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
        for node in ast.walk(tree):
            if isinstance(node, kinds):
                text = ast.get_docstring(node)
                if text and len(text) >= _MIN_CHARS:
                    texts.append(text)
                    if limit is not None and len(texts) >= limit:
                        return texts
    return texts


def write_corpus(folder: str, limit: int | None = None) -> tuple[str, str, int]:
    """Writes the training and held-out docstrings as JSON Lines; their paths and count.

    Example:
        >>> import tempfile
        >>> train, held_out, count = write_corpus(tempfile.mkdtemp(), limit=40)
        >>> with open(held_out) as file:
        ...     count, len(file.readlines())
        (38, 2)
    """
    texts = docstrings(limit)
    os.makedirs(folder, exist_ok=True)
    train = os.path.join(folder, "train.jsonl")
    held_out = os.path.join(folder, "held_out.jsonl")
    count = 0
    with open(train, "w") as train_file, open(held_out, "w") as held_out_file:
        for i, text in enumerate(texts):
            target = held_out_file if i % _HELD_OUT_EVERY == _HELD_OUT_EVERY - 1 else train_file
            target.write(json.dumps({"text": text}) + "\n")
            count += target is train_file
    return train, held_out, count


def train_tokenizer(corpus: str, path: str, vocab_size: int = VOCAB) -> str:
    """Trains a byte-level BPE tokenizer on a JSON Lines corpus; saves it at `path`.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> train, _, _ = write_corpus(folder, limit=40)
        >>> saved = train_tokenizer(train, os.path.join(folder, "tokenizer.json"), 300)
        >>> from tokenizers import Tokenizer
        >>> Tokenizer.from_file(saved).token_to_id("<eos>")
        0
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=["<eos>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    with open(corpus) as file:
        tokenizer.train_from_iterator((json.loads(line)["text"] for line in file), trainer)
    tokenizer.save(path)
    return path


def text_pipeline(corpus: str, tokenizer: str, epochs: int, workers: int) -> Any:
    """Shuffled docstrings -> tokens (in workers) -> best-fit packed rows -> batches.

    Example:
        >>> import os, tempfile
        >>> folder = tempfile.mkdtemp()
        >>> train, _, _ = write_corpus(folder, limit=200)
        >>> path = train_tokenizer(train, os.path.join(folder, "tokenizer.json"), 300)
        >>> batch = next(iter(text_pipeline(train, path, epochs=1, workers=0)))
        >>> batch["text"].shape, batch["text_segment_ids"].shape
        ((16, 128), (16, 128))
    """
    import chute

    return (
        chute.MapDataset.source(chute.JsonLinesSource(corpus))
        .seed(2026)
        .shuffle()
        .repeat(epochs)
        .to_iter_dataset()
        .map(chute.Tokenize(tokenizer, fields="text", eos_id=EOS))
        .mp_prefetch(num_workers=workers)
        .pack(SEQUENCE, method="best_fit")
        .batch(BATCH, drop_remainder=True)
    )
