"""asv benchmarks of the transforms layer: batching (pytree stacking) and sequence packing.

Each `track_ratio_*` divides chute's throughput by a plain baseline doing the same work
in the same call (alternating, median of 7): 1.0 is parity, above 1 chute is faster.
The batching baseline is the fastest plain code we know for the same stacking,
`{key: np.asarray([e[key] for e in elements])}` written inline (`np.asarray` of a list
beats `np.stack`); chute does more (type, dtype and structure checks, any pytree).
"""

from __future__ import annotations

from typing import ClassVar

import numpy as np

from chute_testing import ListIterator
from chute_transforms import (
    BatchIter,
    BestFitPackIter,
    ConcatSplitIter,
    FirstFitPackIter,
    batch_elements,
)

from ._timing import median_ratio, median_seconds

BATCH = 128
ITER_ELEMENTS = 4096
DOCUMENTS = 2000
ROW_LENGTH = 2048


def _elements(kind: str, count: int) -> list[dict[str, object]]:
    rng = np.random.default_rng(0)
    if kind == "scalars":
        return [
            {"label": i % 10, "weight": i / 7, "keep": i % 3 == 0, "score": np.float32(i)}
            for i in range(count)
        ]
    images = rng.integers(0, 256, (count, 32, 32, 3), dtype=np.uint8)
    return [{"image": images[i], "label": i % 10} for i in range(count)]


class Batching:
    """Stacking 128 dicts into one batch: (a) 4 small scalars, (b) a 32x32x3 uint8 image
    and a label."""

    params: ClassVar[list[str]] = ["scalars", "images"]
    param_names: ClassVar[list[str]] = ["elements"]

    def setup(self, kind: str) -> None:
        self.elements = _elements(kind, BATCH)
        self.keys = list(self.elements[0])
        self.stream = _elements(kind, ITER_ELEMENTS)

    def _baseline(self) -> dict[str, np.ndarray]:
        elements = self.elements
        return {key: np.asarray([e[key] for e in elements]) for key in self.keys}

    def _ours(self) -> object:
        return batch_elements(self.elements)

    def time_batch_elements(self, kind: str) -> None:
        batch_elements(self.elements)

    def track_batch_us_per_element(self, kind: str) -> float:
        """Microseconds per element of `batch_elements` (median of 7)."""
        return median_seconds(self._ours) / BATCH * 1e6

    track_batch_us_per_element.unit = "µs/element"  # type: ignore[attr-defined]

    def track_ratio_to_plain_loop(self, kind: str) -> float:
        """Elements/s of `batch_elements` over the inline NumPy loop (see module doc)."""
        return median_ratio(self._ours, self._baseline)

    track_ratio_to_plain_loop.unit = "ratio"  # type: ignore[attr-defined]

    def track_batch_iter_us_per_element(self, kind: str) -> float:
        """Microseconds per element of `BatchIter` over an in-memory list (4096 elements)."""

        def run() -> None:
            for _ in BatchIter(ListIterator(self.stream), BATCH):
                pass

        return median_seconds(run, repeats=5) / ITER_ELEMENTS * 1e6

    track_batch_iter_us_per_element.unit = "µs/element"  # type: ignore[attr-defined]


def _documents() -> list[dict[str, np.ndarray]]:
    """2000 documents with log-normal lengths (median 200 tokens, seed 0)."""
    rng = np.random.default_rng(0)
    lengths = np.clip(rng.lognormal(np.log(200), 1.0, DOCUMENTS).astype(int), 1, None)
    return [{"tokens": np.arange(n, dtype=np.int32)} for n in lengths]


class Packing:
    """Packing 2000 documents with log-normal lengths (median 200 tokens, mean ~330)
    into rows of 2048 tokens."""

    def setup(self) -> None:
        self.documents = _documents()
        lengths = np.array([len(d["tokens"]) for d in self.documents])
        self.arrays = [d["tokens"] for d in self.documents]
        self.tokens = int(lengths.sum())

    def _first_fit(self) -> list[dict[str, np.ndarray]]:
        return list(FirstFitPackIter(ListIterator(self.documents), ROW_LENGTH, 16))

    def _best_fit(self) -> list[dict[str, np.ndarray]]:
        return list(BestFitPackIter(ListIterator(self.documents), ROW_LENGTH, 16))

    def _concat_split(self) -> list[dict[str, np.ndarray]]:
        return list(ConcatSplitIter(ListIterator(self.documents), ROW_LENGTH))

    def _concatenate(self) -> np.ndarray:
        return np.concatenate(self.arrays)

    def time_first_fit(self) -> None:
        self._first_fit()

    def time_best_fit(self) -> None:
        self._best_fit()

    def time_concat_split(self) -> None:
        self._concat_split()

    def track_best_fit_us_per_element(self) -> float:
        """Microseconds per input document of best-fit packing (16 open rows)."""
        return median_seconds(self._best_fit, repeats=5) / len(self.documents) * 1e6

    track_best_fit_us_per_element.unit = "µs/element"  # type: ignore[attr-defined]

    def track_first_fit_us_per_element(self) -> float:
        """Microseconds per input document of first-fit packing, beside best fit's."""
        return median_seconds(self._first_fit, repeats=5) / len(self.documents) * 1e6

    track_first_fit_us_per_element.unit = "µs/element"  # type: ignore[attr-defined]

    def track_first_fit_tokens_per_second(self) -> float:
        """Input tokens/s of first-fit packing (16 open rows)."""
        return self.tokens / median_seconds(self._first_fit, repeats=5)

    track_first_fit_tokens_per_second.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_concat_split_tokens_per_second(self) -> float:
        """Input tokens/s of concatenate-then-split."""
        return self.tokens / median_seconds(self._concat_split, repeats=5)

    track_concat_split_tokens_per_second.unit = "tokens/s"  # type: ignore[attr-defined]

    def track_first_fit_ratio_to_concatenate(self) -> float:
        """Tokens/s of first-fit packing over one `np.concatenate` of the same tokens."""
        return median_ratio(self._first_fit, self._concatenate)

    track_first_fit_ratio_to_concatenate.unit = "ratio"  # type: ignore[attr-defined]

    def track_concat_split_ratio_to_concatenate(self) -> float:
        """Tokens/s of concatenate-then-split over one `np.concatenate` of the tokens."""
        return median_ratio(self._concat_split, self._concatenate)

    track_concat_split_ratio_to_concatenate.unit = "ratio"  # type: ignore[attr-defined]

    def track_first_fit_efficiency(self) -> float:
        """Fraction of row slots holding tokens (not padding); informational."""
        rows = self._first_fit()
        real = sum(int(np.count_nonzero(row["tokens_segment_ids"])) for row in rows)
        return real / (len(rows) * ROW_LENGTH)

    track_first_fit_efficiency.unit = "fraction"  # type: ignore[attr-defined]


PACKERS = {
    "first_fit": lambda it: FirstFitPackIter(it, ROW_LENGTH, 16),
    "best_fit": lambda it: BestFitPackIter(it, ROW_LENGTH, 16),
    "concat_split": lambda it: ConcatSplitIter(it, ROW_LENGTH),
}


class PackingFill:
    """How full the rows are, per packing method, on `Packing`'s documents (16 open rows
    for the fit methods)."""

    params: ClassVar[list[str]] = list(PACKERS)
    param_names: ClassVar[list[str]] = ["method"]

    def setup(self, method: str) -> None:
        self.documents = _documents()

    def track_non_padding_fraction(self, method: str) -> float:
        """Fraction of the row slots holding tokens; informational (higher is better).

        Measured here: first fit 0.9921, best fit 0.9954, concat-split 0.99999 (the
        fit methods also truncate the tokens beyond a row; concat-split keeps them).
        """
        packer = PACKERS[method](ListIterator(self.documents))
        for _ in packer:
            pass
        return 1.0 - float(packer.padding_fraction)

    track_non_padding_fraction.unit = "fraction"  # type: ignore[attr-defined]
