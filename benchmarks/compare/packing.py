"""Packing efficiency of chute's and Grain's packers on the same sequence lengths.

Run: `uv run --group compare python -m benchmarks.compare.packing [--markdown FILE]`.

Two length distributions, rows of 256 tokens, 16 open rows for the fit methods:
- log-normal lengths (median 50 tokens, sigma 1; 5000 sequences, seeded), and
- real tokenized lengths: the standard library's docstrings through the text demo's
  byte-level BPE tokenizer (1024 tokens, trained on them), `<eos>` included.
Lengths above the row are clipped to it, so no packer truncates. The figure is the
non-padding fraction of the rows (real tokens / row slots); concat-then-split has no
padding but in its last row, and cuts sequences across rows. Grain runs with
`shuffle_bins=False`, so neither library reorders rows.
"""

from __future__ import annotations

import argparse
import os
import tempfile
from collections.abc import Callable, Iterable
from typing import Any

import numpy as np

ROW = 256
BINS = 16


def lognormal_lengths(count: int = 5000, seed: int = 0) -> list[int]:
    """Log-normal lengths, median 50, clipped to [1, ROW]."""
    rng = np.random.default_rng(seed)
    raw = np.exp(rng.normal(np.log(50.0), 1.0, count))
    return [int(n) for n in np.clip(np.round(raw), 1, ROW)]


def docstring_lengths() -> list[int]:
    """The standard library's docstrings, tokenized as in `chute demo --text`."""
    import json

    import chute
    from chute_cli.text_corpus import EOS, train_tokenizer, write_corpus

    folder = tempfile.mkdtemp(prefix="chute-packing-")
    corpus, _, _ = write_corpus(folder)
    tokenizer = train_tokenizer(corpus, os.path.join(folder, "tokenizer.json"))
    tokenize = chute.Tokenize(tokenizer, eos_id=EOS)
    with open(corpus) as file:
        texts = [json.loads(line)["text"] for line in file]
    return [min(len(ids), ROW) for ids in tokenize.map_many(texts)]


def _sequences(lengths: Iterable[int]) -> list[dict[str, np.ndarray]]:
    return [{"t": np.arange(1, n + 1, dtype=np.int32)} for n in lengths]


def _fraction(rows: Iterable[dict[str, Any]]) -> float:
    real = slots = 0
    for row in rows:
        ids = np.asarray(row["t_segment_ids"])
        real += int(np.count_nonzero(ids))
        slots += ids.size
    return real / slots


def chute_packers() -> dict[str, Callable[[list[int]], float]]:
    import chute

    def run(method: str) -> Callable[[list[int]], float]:
        def pack(lengths: list[int]) -> float:
            ds = chute.MapDataset.source(_sequences(lengths)).to_iter_dataset()
            options: dict[str, Any] = {} if method == "concat_split" else {"num_packing_bins": BINS}
            return _fraction(ds.pack(ROW, method=method, **options))

        return pack

    return {f"chute {m}": run(m) for m in ("first_fit", "best_fit", "concat_split")}


def grain_packers() -> dict[str, Callable[[list[int]], float]]:
    import grain
    import grain.experimental as ge

    def fit(kind: type) -> Callable[[list[int]], float]:
        def pack(lengths: list[int]) -> float:
            ds = grain.MapDataset.source(_sequences(lengths)).to_iter_dataset()
            packed = kind(ds, length_struct={"t": ROW}, num_packing_bins=BINS, shuffle_bins=False)
            return _fraction(packed)

        return pack

    def concat(lengths: list[int]) -> float:
        ds = grain.MapDataset.source(_sequences(lengths)).to_iter_dataset()
        return _fraction(ge.ConcatThenSplitIterDataset(ds, length_struct={"t": ROW}))

    return {
        "grain FirstFitPackIterDataset": fit(ge.FirstFitPackIterDataset),
        "grain BestFitPackIterDataset": fit(ge.BestFitPackIterDataset),
        "grain ConcatThenSplitIterDataset": concat,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--markdown", default=None, help="also write the table here")
    args = parser.parse_args(argv)
    distributions = {"log-normal": lognormal_lengths(), "docstrings": docstring_lengths()}
    packers = {**chute_packers(), **grain_packers()}
    lines = [
        "| packer | " + " | ".join(f"{name} (non-padding)" for name in distributions) + " |",
        "|---|" + "---|" * len(distributions),
    ]
    for name, pack in packers.items():
        figures = [f"{pack(lengths):.2%}" for lengths in distributions.values()]
        lines.append(f"| {name} | " + " | ".join(figures) + " |")
    counts = ", ".join(
        f"{name}: {len(lengths)} sequences" for name, lengths in distributions.items()
    )
    lines.append("")
    lines.append(f"Rows of {ROW} tokens, {BINS} open rows for the fit methods; {counts}.")
    table = "\n".join(lines)
    print(table)
    if args.markdown:
        with open(args.markdown, "w") as file:
            file.write(table + "\n")


if __name__ == "__main__":
    main()
