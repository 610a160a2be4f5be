"""Finding the Arrow files of a folder that Hugging Face `datasets` wrote with `save_to_disk`.

`Dataset.save_to_disk(path)` writes `state.json` (which names the data files, in order,
under `_data_files`), `dataset_info.json` (the features) and `data-0000i-of-0000n.arrow`
files in Arrow IPC *stream* format. `DatasetDict.save_to_disk(path)` writes
`dataset_dict.json` (`{"splits": [...]}`) and one such folder per split. This module reads
only those JSON files and the Arrow files' batch headers: it never imports `datasets`.
"""

from __future__ import annotations

import json
import os
from typing import Any, NamedTuple

import pyarrow as pa

from chute_core import InvalidArgumentError, SourceFileError, SourceFileNotFoundError

__all__ = ["ArrowFile", "SavedDataset", "find_saved_dataset", "open_arrow_file"]

OWNER = "HuggingFaceDiskSource"
_STATE = "state.json"
_INFO = "dataset_info.json"
_DICT = "dataset_dict.json"
_READ_ERRORS = (pa.ArrowException, OSError, ValueError)


class SavedDataset(NamedTuple):
    """What `state.json` of one saved `Dataset` says.

    Attributes:
        folder: the absolute path of the folder that holds `state.json`.
        files: the absolute paths of the data files, in the order of `_data_files`.
        fingerprint: `datasets`' fingerprint of the saved data (`_fingerprint`), or None.
        features: the column names `dataset_info.json` lists, or None without that file.
    """

    folder: str
    files: tuple[str, ...]
    fingerprint: str | None
    features: tuple[str, ...] | None


class ArrowFile(NamedTuple):
    """A memory-mapped Arrow stream file: its schema and its record batches (zero-copy)."""

    mapped: Any  # pyarrow.MemoryMappedFile
    schema: Any  # pyarrow.Schema
    batches: list[Any]  # pyarrow.RecordBatch, views of `mapped`


def _load_json(path: str, shown: str) -> Any:
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (ValueError, RecursionError) as error:
        raise SourceFileError(
            f"{OWNER}: {path} is not valid JSON ({error}); the folder {shown!r} is damaged, "
            "save it again with save_to_disk."
        ) from None


def _split_folder(folder: str, shown: str, split: str | None) -> str:
    """The folder of `split` in the `DatasetDict` folder `folder`."""
    listed = _load_json(os.path.join(folder, _DICT), shown)
    splits = listed.get("splits") if isinstance(listed, dict) else None
    if not isinstance(splits, list) or not all(isinstance(name, str) for name in splits):
        raise SourceFileError(
            f"{OWNER}: {os.path.join(folder, _DICT)} does not list the splits as "
            f'{{"splits": ["train", ...]}}; the folder {shown!r} is damaged.'
        )
    if split is None:
        raise InvalidArgumentError(
            f"{OWNER}: {shown!r} holds a DatasetDict with the splits {splits}; choose one "
            f"with split=, e.g. {OWNER}({shown!r}, split={splits[0] if splits else 'train'!r})."
        )
    if split not in splits:
        raise InvalidArgumentError(
            f"{OWNER}: {shown!r} has no split {split!r}; its splits are {splits}."
        )
    return os.path.join(folder, split)


def find_saved_dataset(path: str, split: str | None) -> SavedDataset:
    """Reads `state.json` of the `Dataset` folder `path` (or of its `split`).

    Raises:
        SourceFileNotFoundError: no folder at `path`, or it lacks `state.json` or a data file.
        SourceFileError: `path` is a file, or a JSON file is damaged, or the data set
            keeps an indices mapping.
        InvalidArgumentError: `split` does not fit the folder.
    """
    folder = os.path.abspath(path)
    if not os.path.exists(folder):
        raise SourceFileNotFoundError(
            f"{OWNER}: the folder {path!r} does not exist (working directory {os.getcwd()!r})."
        )
    if not os.path.isdir(folder):
        raise SourceFileError(
            f"{OWNER}: {path!r} is a file; pass the folder that Dataset.save_to_disk wrote "
            f"(it holds {_STATE}, {_INFO} and data-*.arrow files)."
        )
    if os.path.isfile(os.path.join(folder, _DICT)) and not os.path.isfile(
        os.path.join(folder, _STATE)
    ):
        folder = _split_folder(folder, path, split)
    elif split is not None:
        raise InvalidArgumentError(
            f"{OWNER}: split={split!r} was given, but {path!r} holds one Dataset, not a "
            f"DatasetDict (it has no {_DICT}); leave split=None."
        )
    state_path = os.path.join(folder, _STATE)
    if not os.path.isfile(state_path):
        raise SourceFileNotFoundError(
            f"{OWNER}: {folder!r} is not a folder written by Dataset.save_to_disk: it has no "
            f"{_STATE} (such a folder holds {_STATE}, {_INFO} and data-*.arrow files)."
        )
    state = _load_json(state_path, path)
    entries = state.get("_data_files") if isinstance(state, dict) else None
    if not isinstance(entries, list) or not all(
        isinstance(entry, dict) and isinstance(entry.get("filename"), str) for entry in entries
    ):
        raise SourceFileError(
            f"{OWNER}: {state_path} does not list the data files as "
            f'"_data_files": [{{"filename": ...}}, ...]; it was not written by '
            "Dataset.save_to_disk, or is damaged."
        )
    indices = [key for key, value in state.items() if key.startswith("_indices") and value]
    if indices:
        raise SourceFileError(
            f"{OWNER}: {path!r} was saved with an indices mapping ({indices[0]} in "
            f"{_STATE}, from select, shuffle, sort or train_test_split without flattening). "
            "Load it with datasets, call dataset.flatten_indices() and save_to_disk again."
        )
    files = tuple(os.path.join(folder, entry["filename"]) for entry in entries)
    for file in files:
        if not os.path.isfile(file):
            raise SourceFileNotFoundError(
                f"{OWNER}: {state_path} lists the data file {os.path.basename(file)!r}, "
                f"which is missing from {folder!r}; copy the whole folder again."
            )
    fingerprint = state.get("_fingerprint")
    return SavedDataset(
        folder,
        files,
        fingerprint if isinstance(fingerprint, str) else None,
        _features(os.path.join(folder, _INFO), path),
    )


def _features(info_path: str, shown: str) -> tuple[str, ...] | None:
    """The column names of `dataset_info.json`, or None if the file does not say."""
    if not os.path.isfile(info_path):
        return None
    info = _load_json(info_path, shown)
    features = info.get("features") if isinstance(info, dict) else None
    return tuple(features) if isinstance(features, dict) else None


def open_arrow_file(path: str) -> ArrowFile:
    """Memory-maps the Arrow stream file `path` and lists its non-empty record batches.

    Raises:
        SourceFileNotFoundError: the file no longer exists.
        SourceFileError: it is not an Arrow IPC stream.
    """
    try:
        mapped = pa.memory_map(path, "r")
    except FileNotFoundError:
        raise SourceFileNotFoundError(
            f"{OWNER}: {path} no longer exists (it was there when the source was created)."
        ) from None
    try:
        reader = pa.ipc.open_stream(mapped)
        batches = [batch for batch in reader if batch.num_rows]
    except _READ_ERRORS as error:
        mapped.close()
        raise SourceFileError(
            f"{OWNER}: {path} is not an Arrow IPC stream as save_to_disk writes (corrupt, "
            f"truncated, or another format): {error}"
        ) from None
    return ArrowFile(mapped, reader.schema, batches)
