"""Checkpoint folders as others may leave them: stray names, huge counts, folders, FIFOs.

A folder on a shared machine (or a bucket) may hold anything. Listing it costs work in
proportion to the files there, never to a number written in a name, and every file
that is no chute state file is refused with a `CheckpointFormatError` naming it.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import tracemalloc
from pathlib import Path

import pytest

from chute_checkpoint import (
    CheckpointFormatError,
    CheckpointNotFoundError,
    make_document,
    read_document,
    reshard_directory,
    restore,
    save,
)
from chute_checkpoint._format import MAX_PROCESS_COUNT
from chute_core import ArgumentTypeError, InvalidArgumentError
from chute_samplers import SequentialIter


def _iterator() -> SequentialIter:
    return SequentialIter(range(10))


def _state_text(process_index: int = 0, process_count: int = 1) -> str:
    it = _iterator()
    next(it)
    return json.dumps(make_document(it, process_index, process_count))


def test_a_huge_process_count_in_a_name_costs_no_memory_per_process(tmp_path: Path) -> None:
    (tmp_path / f"process_0-of-{MAX_PROCESS_COUNT}.json").write_text(_state_text())
    tracemalloc.start()
    try:
        with pytest.raises(CheckpointNotFoundError) as caught:
            restore(_iterator(), tmp_path, process_index=0, process_count=1)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert str(caught.value) == (
        f"{tmp_path} has no process_0-of-1.json: it holds the states of processes [0] of "
        f"{MAX_PROCESS_COUNT}, and this is process 0 of 1; continuing on another number of "
        f"processes needs the states of all {MAX_PROCESS_COUNT}."
    )
    assert peak < 1 << 20  # A list of a million positions would take ~36 MiB.


@pytest.mark.parametrize("count", [str(MAX_PROCESS_COUNT + 1), "1" + "0" * 29])
def test_a_process_count_over_the_bound_is_refused_naming_the_file_and_the_bound(
    tmp_path: Path, count: str
) -> None:
    path = tmp_path / f"process_0-of-{count}.json"
    path.write_text(_state_text())
    shown = count if len(count) <= 20 else count[:20] + "..."
    expected = (
        f"{path}: not a chute state file: its process count {shown} is over 1,000,000 "
        "(more processes than any JAX cluster runs; the bound keeps a stray name from "
        "costing work or memory); remove or rename the file."
    )
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), tmp_path, process_index=0, process_count=1)
    assert str(caught.value) == expected
    with pytest.raises(CheckpointFormatError) as caught:
        reshard_directory(tmp_path, tmp_path / "out", 2)
    assert str(caught.value) == expected


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("process_00-of-2.json", "a number with a leading zero"),
        ("process_0-of-02.json", "a number with a leading zero"),
        ("process_a-of-2.json", "not of the form process_<i>-of-<n>.json"),
        ("process_0-of-1 (copy).json", "not of the form process_<i>-of-<n>.json"),
        ("process_\u0660-of-\u0661.json", "not of the form process_<i>-of-<n>.json"),
        ("process_2-of-2.json", "process index 2 is not below its process count 2"),
        ("process_0-of-0.json", "process index 0 is not below its process count 0"),
    ],
)
def test_stray_state_file_names_are_refused_naming_the_file(
    tmp_path: Path, name: str, reason: str
) -> None:
    save(_iterator(), tmp_path, process_index=0, process_count=2)
    save(_iterator(), tmp_path, process_index=1, process_count=2)
    path = tmp_path / name
    path.write_text(_state_text())
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), tmp_path, process_index=0, process_count=1)
    assert str(caught.value) == (
        f"{path}: not a chute state file: {reason}; remove or rename the file."
    )
    with pytest.raises(CheckpointFormatError, match="not a chute state file"):
        reshard_directory(tmp_path, tmp_path / "out", 1)


def test_a_state_path_that_is_a_folder_is_a_format_error(tmp_path: Path) -> None:
    (tmp_path / "process_0-of-1.json").mkdir()
    expected = (
        f"{tmp_path / 'process_0-of-1.json'}: a folder, not a state file; restore from "
        "the folder that holds the process_<i>-of-<n>.json files."
    )
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), tmp_path, process_index=0, process_count=1)
    assert str(caught.value) == expected
    with pytest.raises(CheckpointFormatError) as caught:
        read_document(tmp_path / "process_0-of-1.json")
    assert str(caught.value) == expected
    two = tmp_path / "two"  # Another process's state file, read to reshard, is a folder.
    (two / "process_0-of-2.json").mkdir(parents=True)
    (two / "process_1-of-2.json").write_text(_state_text(1, 2))
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), two, process_index=0, process_count=1)
    assert str(caught.value) == (
        f"{two / 'process_0-of-2.json'}: a folder, not a state file; restore from the folder "
        "that holds the process_<i>-of-<n>.json files."
    )


def test_a_file_given_as_the_folder_is_refused_not_taken_for_no_checkpoint(
    tmp_path: Path,
) -> None:
    path = save(_iterator(), tmp_path, process_index=0, process_count=1)
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), path, process_index=0, process_count=1)
    assert str(caught.value) == (
        f"{path} is a file, not a checkpoint folder: pass the folder that holds the "
        f"process_<i>-of-<n>.json files ({tmp_path})."
    )
    with pytest.raises(CheckpointNotFoundError) as caught:
        read_document(path / "process_0-of-1.json")
    assert str(caught.value) == (
        f"no checkpoint file at {path / 'process_0-of-1.json'}: {path} is a file, not a folder."
    )


def test_a_fifo_at_a_state_path_is_refused_without_blocking(tmp_path: Path) -> None:
    path = tmp_path / "process_0-of-1.json"
    os.mkfifo(path)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            restore(_iterator(), tmp_path, process_index=0, process_count=1)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(60)  # A hang guard only: the restore itself never waits on the FIFO.
    if thread.is_alive():  # Unblock the reader (a writer that closes gives it EOF).
        os.close(os.open(path, os.O_WRONLY))
        thread.join()
        pytest.fail("restore blocked reading a FIFO named like a state file")
    (error,) = outcome
    assert isinstance(error, CheckpointFormatError)
    assert str(error) == (
        f"{path}: not a regular file (a FIFO, socket or device); a state file is a plain "
        "JSON file: remove or rename it."
    )


def test_a_state_whose_content_names_another_process_is_refused(tmp_path: Path) -> None:
    (tmp_path / "process_0-of-2.json").write_text(_state_text(1, 2))
    (tmp_path / "process_1-of-2.json").write_text(_state_text(1, 2))
    expected = (
        f"{tmp_path / 'process_0-of-2.json'}: holds the state of process 1 of 2, but its "
        "name says process 0 of 2: the file was copied or renamed; restore from the files "
        "as save wrote them."
    )
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), tmp_path, process_index=0, process_count=2)
    assert str(caught.value) == expected
    with pytest.raises(CheckpointFormatError) as caught:
        restore(_iterator(), tmp_path, process_index=0, process_count=1)
    assert str(caught.value) == expected
    with pytest.raises(CheckpointFormatError) as caught:
        reshard_directory(tmp_path, tmp_path / "out", 1)
    assert str(caught.value) == expected


def test_a_process_count_over_the_bound_is_refused_when_saving(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError) as caught:
        save(_iterator(), tmp_path, process_index=0, process_count=MAX_PROCESS_COUNT + 1)
    assert str(caught.value) == (
        "process_count must be at most 1,000,000 (more processes than any JAX cluster "
        f"runs), got {MAX_PROCESS_COUNT + 1}."
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(("index", "count"), [("0", 1), (0, 1.0), (True, 2), ([0], 1)])
def test_a_process_position_that_is_no_integer_is_refused_when_saving(
    tmp_path: Path, index: object, count: object
) -> None:
    with pytest.raises(ArgumentTypeError) as caught:
        save(_iterator(), tmp_path, process_index=index, process_count=count)  # type: ignore[arg-type]
    assert str(caught.value) == (
        f"process_index and process_count must be integers, got {index!r} and {count!r}."
    )
    assert list(tmp_path.iterdir()) == []


def test_a_folder_missing_many_states_lists_the_first_few_and_how_many(tmp_path: Path) -> None:
    for index in range(11):
        save(_iterator(), tmp_path, process_index=index, process_count=20)
    with pytest.raises(CheckpointNotFoundError) as caught:
        restore(_iterator(), tmp_path, process_index=0, process_count=1)
    assert str(caught.value) == (
        f"{tmp_path} has no process_0-of-1.json: it holds the states of processes "
        "[0, 1, 2, 3, 4, 5, 6, 7, 8, 9, ...] (11 in all) of 20, and this is process 0 of 1; "
        "continuing on another number of processes needs the states of all 20."
    )


def test_a_socket_at_a_state_path_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "process_0-of-1.json"
    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(os.fspath(path))
        with pytest.raises(CheckpointFormatError) as caught:
            read_document(path)
    assert str(caught.value) == (
        f"{path}: not a regular file (a FIFO, socket or device); a state file is a plain "
        "JSON file: remove or rename it."
    )
