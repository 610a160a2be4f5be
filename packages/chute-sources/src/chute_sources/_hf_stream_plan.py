"""What a Hugging Face `datasets.IterableDataset` reads: its format, local files, features.

`load_dataset("parquet" | "json", data_files=..., streaming=True)` returns an
`IterableDataset` whose chain of examples iterables ends in an `ArrowExamplesIterable`
whose `generate_tables_fn` is the builder's `_generate_tables`, bound to the builder (and
so its config), with the files in its keyword arguments. This module reads that chain,
and refuses, naming them, whatever chute cannot replay exactly: operations applied on
the Hugging Face side, formats other than Parquet and JSON Lines, files that are not
local, feature types whose values chute would give differently. `datasets` is imported
only here, and only when a source is created.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

from chute_core import InvalidArgumentError, SourceFileNotFoundError

__all__ = ["OWNER", "StreamPlan", "plan_stream"]

OWNER = "HuggingFaceStreamSource"

_BASE = "ArrowExamplesIterable"
_SELECT = "SelectColumnsIterable"
_FORMATS = {"Parquet": "parquet", "Json": "json"}
_PLAIN_FEATURES = {"Value", "ClassLabel", "Translation", "Array2D", "Array3D", "Array4D"}
_PLAIN_FEATURES |= {"Array5D"}
_COMPRESSED = (".gz", ".bz2", ".xz", ".zst", ".zstd", ".lz4", ".zip", ".tar", ".7z")

# The examples iterable an operation leaves in the chain: (the operation, its chute op).
_OPERATIONS = {
    "BufferShuffledExamplesIterable": (
        ".shuffle(buffer_size=...)",
        ".seed(...).shuffle() (a global shuffle whose checkpoint is exact)",
    ),
    "MappedExamplesIterable": (
        ".map() (also .remove_columns(), .rename_column(), .cast(), .add_column())",
        ".map(...)",
    ),
    "FilteredExamplesIterable": (".filter()", ".filter(...)"),
    "SkipExamplesIterable": (".skip(n)", ".slice(slice(n, None))"),
    "TakeExamplesIterable": (".take(n)", ".slice(slice(None, n)) or .limit(n)"),
    "StepExamplesIterable": (
        "split_dataset_by_node()",
        ".shard(chute.ShardOptions(...)) or the DataLoader's shard_options",
    ),
    "RepeatExamplesIterable": (".repeat()", ".repeat()"),
    "VerticallyConcatenatedMultiSourcesExamplesIterable": (
        "concatenate_datasets()",
        "chute.MapDataset.concatenate([...]) of one source per data set",
    ),
    "HorizontallyConcatenatedMultiSourcesExamplesIterable": (
        "concatenate_datasets(axis=1)",
        "chute.MapDataset.zip([...]) of one source per data set",
    ),
    "CyclingMultiSourcesExamplesIterable": (
        "interleave_datasets()",
        "chute.MapDataset.mix([...]) of one source per data set",
    ),
    "RandomlyCyclingMultiSourcesExamplesIterable": (
        "interleave_datasets(probabilities=...)",
        "chute.MapDataset.mix([...], weights=...) of one source per data set",
    ),
}


class StreamPlan(NamedTuple):
    """What to read, and how to type it as `datasets` does.

    Attributes:
        format: "parquet" or "json".
        files: the absolute paths of the data files, in the order `datasets` reads them.
        columns: the columns, in the order of the rows `datasets` gives, or None if the
            data set does not know its features.
        features: the `datasets.Features` of the rows, or None.
        schema: the Arrow schema of `features` (the columns chosen), or None.
        file_schema: the Arrow schema of all the features (what a JSON line may hold).
        decode: whether some feature decodes its stored value (`Image`, `Audio`, ...).
        split: the split's name.
    """

    format: str
    files: tuple[str, ...]
    columns: tuple[str, ...] | None
    features: Any
    schema: Any
    file_schema: Any
    decode: bool
    split: str | None


def plan_stream(dataset: Any, split: str | None) -> StreamPlan:
    """Reads what `dataset` (an `IterableDataset`, or a dict of them with `split`) reads.

    Raises:
        TypeError: `dataset` is neither an `IterableDataset` nor an `IterableDatasetDict`.
        InvalidArgumentError: the split does not fit, or the data set is not one that
            chute reads exactly (see `HuggingFaceStreamSource`).
        SourceFileNotFoundError: a data file is missing.
    """
    try:
        import datasets
    except ImportError:  # pragma: no cover - an IterableDataset needs datasets
        raise ImportError(
            f"{OWNER} reads data sets of Hugging Face `datasets`, which is not installed; "
            "install it with `pip install chute-sources[huggingface]`."
        ) from None
    dataset = _choose_split(datasets, dataset, split)
    _check_iteration_settings(dataset)
    chain = dataset._ex_iterable
    columns: tuple[str, ...] | None = None
    while type(chain).__name__ == _SELECT:
        columns = tuple(chain.column_names) if columns is None else columns
        chain = chain.ex_iterable
    builder = _builder(chain)
    form = _FORMATS[type(builder).__name__]
    _check_config(form, builder.config)
    files = _files(form, chain.kwargs)
    features = dataset.features
    if features is None:
        raise InvalidArgumentError(
            f"{OWNER}: the data set does not know its features (datasets could not infer "
            "them from the first rows), so chute cannot type the rows as datasets would; "
            "pass features=datasets.Features({...}) to load_dataset."
        )
    for name, feature in features.items():
        _check_feature(feature, name)
    # The builder's features are all the files' columns, also after select_columns.
    file_features = getattr(builder.info, "features", None) or features
    file_schema = file_features.arrow_schema
    if columns is not None:
        features = datasets.Features({name: features[name] for name in columns})
    from datasets.features.features import require_decoding

    decode = any(require_decoding(feature) for feature in features.values())
    return StreamPlan(
        form,
        files,
        tuple(features),
        features,
        features.arrow_schema,
        file_schema,
        decode,
        None if dataset.split is None else str(dataset.split),
    )


def _choose_split(datasets: Any, dataset: Any, split: str | None) -> Any:
    if isinstance(dataset, datasets.IterableDatasetDict):
        splits = list(dataset)
        if split is None:
            raise InvalidArgumentError(
                f"{OWNER}: the IterableDatasetDict holds the splits {splits}; choose one with "
                f"split=, e.g. {OWNER}(dataset, split={splits[0] if splits else 'train'!r}) "
                "(or pass split= to load_dataset)."
            )
        if split not in dataset:
            raise InvalidArgumentError(
                f"{OWNER}: the IterableDatasetDict has no split {split!r}; its splits are {splits}."
            )
        return dataset[split]
    if not isinstance(dataset, datasets.IterableDataset):
        kind = "a Dataset (not streaming)" if isinstance(dataset, datasets.Dataset) else None
        raise TypeError(
            f"{OWNER}: expected a datasets.IterableDataset, as load_dataset(..., "
            f"streaming=True) returns, or an IterableDatasetDict; got "
            f"{kind or type(dataset).__name__}"
            + (
                "; read a Dataset with chute.MapDataset.source(dataset), or a folder that "
                "save_to_disk wrote with HuggingFaceDiskSource."
                if kind
                else "."
            )
        )
    if split is not None:
        raise InvalidArgumentError(
            f"{OWNER}: split={split!r} was given, but the dataset is one IterableDataset "
            f"(split {str(dataset.split)!r}), not an IterableDatasetDict; leave split=None."
        )
    return dataset


def _check_iteration_settings(dataset: Any) -> None:
    """Refuses settings of the `IterableDataset` itself that change what it yields."""
    refused = []
    if dataset._formatting is not None:
        refused.append(
            (f".with_format({dataset._formatting.format_type!r})", ".batch(...) for arrays")
        )
    if dataset._distributed is not None:
        refused.append(_OPERATIONS["StepExamplesIterable"])
    if dataset._starting_state_dict is not None:
        refused.append((".load_state_dict()", "the chute iterator's set_state()"))
    if refused:
        operation, chute_op = refused[0]
        raise InvalidArgumentError(
            f"{OWNER}: the dataset has {operation} applied on the Hugging Face side, which "
            "chute does not replay; load the files without it and apply the chute op "
            f"instead: chute.MapDataset.source(source){chute_op}."
        )


def _builder(chain: Any) -> Any:
    """The Parquet or JSON builder whose tables `chain` (the chain's end) yields."""
    name = type(chain).__name__
    if name in _OPERATIONS:
        operation, chute_op = _OPERATIONS[name]
        raise InvalidArgumentError(
            f"{OWNER}: the dataset has {operation} applied on the Hugging Face side "
            f"({name}), which chute does not replay exactly; load the files without it "
            f"and apply the chute op instead: chute.MapDataset.source(source){chute_op}."
        )
    builder = getattr(getattr(chain, "generate_tables_fn", None), "__self__", None)
    if name != _BASE or builder is None or not hasattr(chain, "kwargs"):
        raise InvalidArgumentError(
            f"{OWNER}: the dataset is not files read by load_dataset('parquet' or 'json', "
            f"data_files=..., streaming=True) (its examples come from {name}); read a "
            "Dataset with chute.MapDataset.source(dataset), or write the rows to Parquet."
        )
    kind = type(builder).__name__
    if kind not in _FORMATS:
        raise InvalidArgumentError(
            f"{OWNER}: the dataset reads {kind.lower()!r} files; chute reads Hugging Face "
            "streams of Parquet and JSON Lines files (load_dataset('parquet' or 'json', "
            "data_files=..., streaming=True)). Convert the files, or use the chute source "
            "of the format (e.g. TFRecordSource, WebDatasetSource)."
        )
    return builder


def _check_config(form: str, config: Any) -> None:
    """Refuses builder options whose effect chute does not replay."""
    if getattr(config, "on_bad_files", "error") != "error":
        raise InvalidArgumentError(
            f"{OWNER}: load_dataset was given on_bad_files={config.on_bad_files!r}; chute "
            "reads every file and raises on a bad one. Leave on_bad_files='error'."
        )
    if form == "parquet" and config.filters is not None:
        raise InvalidArgumentError(
            f"{OWNER}: load_dataset was given filters={config.filters!r}, which chute does "
            "not replay; load the files without filters and apply "
            "chute.MapDataset.source(source).filter(...) instead."
        )
    if form == "json" and config.field is not None:
        raise InvalidArgumentError(
            f"{OWNER}: load_dataset was given field={config.field!r} (rows in one JSON "
            "document); chute reads JSON Lines files (one object a line)."
        )
    if form == "json" and (config.encoding or "utf-8").lower().replace("_", "-") not in (
        "utf-8",
        "utf8",
    ):
        raise InvalidArgumentError(
            f"{OWNER}: load_dataset was given encoding={config.encoding!r}; chute reads "
            "JSON Lines files in UTF-8. Convert the files to UTF-8."
        )


def _files(form: str, kwargs: dict[str, Any]) -> tuple[str, ...]:
    """The data files of the builder's keyword arguments, checked to be local files."""
    if form == "parquet":
        if any(groups is not None for groups in kwargs.get("row_groups_list") or ()):
            raise InvalidArgumentError(
                f"{OWNER}: the dataset reads chosen row groups of its files (a reshard by "
                "datasets); load the files again and use chute's sharding instead."
            )
        named = [str(file) for file in kwargs["files"]]
    else:
        named = [str(file) for files in kwargs["files_iterables"] for file in files]
    paths = []
    for name in named:
        if "::" in name:  # Chained URLs: a file inside a compressed file or an archive.
            name = name.rsplit("::", 1)[1]
            if "://" not in name:
                raise InvalidArgumentError(_compressed(name))
        if "://" in name or name.startswith("hf:"):
            raise InvalidArgumentError(
                f"{OWNER}: the data file {name!r} is not a local file; chute reads Hugging "
                "Face streams of local files only (the Hub is not read). Download the files "
                "(e.g. huggingface_hub.snapshot_download) and call load_dataset(..., "
                "data_files=<local files>, streaming=True), or read files in buckets with "
                "ParquetSource or JsonLinesSource."
            )
        if name.lower().endswith(_COMPRESSED):
            raise InvalidArgumentError(_compressed(name))
        if not os.path.isfile(name):
            raise SourceFileNotFoundError(f"{OWNER}: the data file {name!r} does not exist.")
        paths.append(os.path.abspath(name))
    return tuple(paths)


def _compressed(name: str) -> str:
    return (
        f"{OWNER}: the data file {name!r} is compressed or an archive, which chute does "
        "not read by position; decompress it first."
    )


def _check_feature(feature: Any, name: str) -> None:
    """Refuses a feature type whose values chute would not give as `datasets` does."""
    if isinstance(feature, dict):
        for key, inner in feature.items():
            _check_feature(inner, f"{name}.{key}")
        return
    if isinstance(feature, list | tuple):
        _check_feature(feature[0], f"{name}[]")
        return
    kind = type(feature).__name__
    if kind in ("List", "LargeList", "Sequence"):
        _check_feature(feature.feature, f"{name}[]")
    elif kind == "Json" or (kind not in _PLAIN_FEATURES and not hasattr(feature, "decode_example")):
        raise InvalidArgumentError(
            f"{OWNER}: the feature {name!r} is of type {kind}, which chute does not read "
            "as datasets does; cast it to a plain type (Value, List, ClassLabel) on the "
            "files, or pass features= to load_dataset with a plain type for it."
        )
