"""Language-model data: tokens/s of JSON Lines -> tokenize -> best-fit pack -> batch.

The texts are the standard library's docstrings (the text demo's corpus, 2000 of them),
the tokenizer a byte-level BPE of 1024 tokens trained on them. Figures: real (not
padding) tokens per second with 0 and 2 worker processes (worker start included), and
the ratio of the 0-worker pipeline to a plain loop that reads the same lines and
encodes them with `encode_batch` in groups of 64 (tokenizing alone, no packing).
`encode_batch` runs on every core already, so on 2 cores 2 workers add little.
"""

from __future__ import annotations

import json
import os
import tempfile
import timeit

import numpy as np
from tokenizers import Tokenizer

import chute
from chute_cli.text_corpus import EOS, docstrings, train_tokenizer

from ._timing import median_ratio, median_seconds

TEXTS = 2000
ROW = 128
BATCH = 16


def _corpus() -> tuple[str, str]:
    folder = tempfile.mkdtemp(prefix="chute-bench-text-")
    corpus = os.path.join(folder, "train.jsonl")
    with open(corpus, "w") as file:
        for text in docstrings(limit=TEXTS):
            file.write(json.dumps({"text": text}) + "\n")
    return corpus, train_tokenizer(corpus, os.path.join(folder, "tokenizer.json"))


def pipeline(corpus: str, tokenizer: str, workers: int) -> chute.IterDataset:
    """The benchmark's pipeline, with `workers` worker processes tokenizing.

    With 0 workers, `mp_prefetch` runs the map a chunk at a time in this process: one
    `encode_batch` per chunk, as in workers, instead of one call per text.
    """
    return (
        chute.MapDataset.source(chute.JsonLinesSource(corpus))
        .to_iter_dataset()
        .map(chute.Tokenize(tokenizer, eos_id=EOS))
        .mp_prefetch(num_workers=workers)
        .pack(ROW, method="best_fit")
        .batch(BATCH)
    )


class TokenizePackBatch:
    """2000 docstrings -> tokenize -> best-fit pack(128) -> batch(16)."""

    timer = timeit.default_timer
    number = 1
    repeat = 3

    def setup(self) -> None:
        self.corpus, self.tokenizer = _corpus()
        self.tokens = sum(
            int(np.count_nonzero(b["text_segment_ids"]))
            for b in pipeline(self.corpus, self.tokenizer, 0)
        )

    def _run(self, workers: int) -> None:
        for _ in pipeline(self.corpus, self.tokenizer, workers):
            pass

    def time_no_workers(self) -> None:
        self._run(0)

    def time_two_workers(self) -> None:
        self._run(2)

    def track_tokens_per_second_no_workers(self) -> float:
        return self.tokens / median_seconds(self.time_no_workers, repeats=3)

    track_tokens_per_second_no_workers.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_tokens_per_second_two_workers(self) -> float:
        return self.tokens / median_seconds(self.time_two_workers, repeats=3)

    track_tokens_per_second_two_workers.unit = "tokens/s"  # type: ignore[attr-defined]

    def _plain_tokenize(self) -> None:
        tokenizer = Tokenizer.from_file(self.tokenizer)
        with open(self.corpus) as file:
            texts = [json.loads(line)["text"] for line in file]
        for start in range(0, len(texts), 64):
            tokenizer.encode_batch(texts[start : start + 64], add_special_tokens=False)

    def track_ratio_no_workers_to_plain_tokenize(self) -> float:
        """The whole pipeline (0 workers) over reading and tokenizing alone, in a loop."""
        return median_ratio(self.time_no_workers, self._plain_tokenize, repeats=3)

    track_ratio_no_workers_to_plain_tokenize.unit = "ratio"  # type: ignore[attr-defined]
