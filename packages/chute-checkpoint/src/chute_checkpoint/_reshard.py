"""Elastic restore across process counts, for index-based pipelines sharded by stride.

A `MapDataset ... .shard(i, n)` stream on process `i` reads the positions `i, i + n,
i + 2n, ...` of the unsharded dataset. When all `n` processes are at local position `j`
(in lockstep, as data-parallel training keeps them), they have together consumed exactly
the first `j * n` positions; `m` processes continue that sequence from local position
`j * n / m` with `.shard(k, m)`. `reshard` rewrites the `n` state documents into those
`m`, when the arithmetic allows it, and says why not otherwise.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ._describe import fingerprint
from ._errors import ReshardError
from ._files import read_document, state_file_name, write_atomic
from ._format import dumps_document, validate_document

__all__ = ["reshard", "reshard_directory"]

_KEEP_POSITIONS = frozenset({"filter", "map", "mp_prefetch", "prefetch", "seed", "to_iter_dataset"})
"""Stages after `shard` that keep the positions of the stream (element i of the shard)."""
_DROPPING = frozenset({"filter", "flat_map"})


def reshard(documents: Sequence[Mapping[str, Any]], process_count: int) -> list[dict[str, Any]]:
    """The state documents of `process_count` processes that continue `documents`' stream.

    `documents` are the states of all `n` processes of a pipeline that has one
    `.shard(shard_index, n)` stage followed only by `map`, `filter`, `to_iter_dataset`,
    `prefetch` and `mp_prefetch` (stages that keep positions), all at the same local
    position `j`. Process `k` of the result runs the same pipeline with `.shard(k,
    process_count)` from local position `j * n / process_count`, so the global sequence
    continues with nothing lost or repeated.

    Raises:
        ReshardError: the pipeline or positions do not allow it (the message says why,
            e.g. `j * n` not divisible by `process_count`).

    Example:
        >>> import chute
        >>> from chute_checkpoint import make_document
        >>> def pipeline(i, n):
        ...     return chute.MapDataset.range(12).shard(i, n).to_iter_dataset()
        >>> iterators = [iter(pipeline(i, 2)) for i in range(2)]
        >>> seen = sorted(next(it) for it in iterators for _ in range(3))
        >>> docs = [make_document(it, i, 2) for i, it in enumerate(iterators)]
        >>> [d["state"] for d in reshard(docs, 3)]
        [{'position': 2}, {'position': 2}, {'position': 2}]
        >>> seen, [x for x in range(12) if x not in seen]
        ([0, 1, 2, 3, 4, 5], [6, 7, 8, 9, 10, 11])
    """
    if isinstance(process_count, bool) or not isinstance(process_count, int) or process_count < 1:
        raise ReshardError(f"process_count must be a positive int, got {process_count!r}.")
    if not documents:
        raise ReshardError("reshard needs the state documents of all processes, got none.")
    checked = [
        validate_document(copy.deepcopy(dict(d)), f"state {number}")
        for number, d in enumerate(documents)
    ]
    count = len(checked)
    shard_at, shard_indices = _shard_stage(checked, count)
    ordered = [doc for _, doc in sorted(zip(shard_indices, checked, strict=True))]
    chunk_size = _check_later_stages(ordered[0]["pipeline"]["stages"], shard_at)
    positions = [_position(doc["state"], chunk_size, doc["pipeline"]) for doc in ordered]
    if len(set(positions)) != 1:
        raise ReshardError(
            f"the processes are at different local positions {positions} (by shard index); "
            "resharding needs them in lockstep: save every process at the same step."
        )
    consumed = positions[0] * count
    if consumed % process_count:
        raise ReshardError(
            f"{count} processes at local position {positions[0]} consumed {consumed} elements "
            f"together, which {process_count} processes cannot split evenly ({consumed} % "
            f"{process_count} = {consumed % process_count}); restore from a step where the "
            f"total is divisible by {process_count}, or use a process count that divides it."
        )
    local = consumed // process_count
    result = []
    for index in range(process_count):
        document = copy.deepcopy(ordered[0])
        params = document["pipeline"]["stages"][shard_at]["params"]
        params["shard_index"], params["shard_count"] = index, process_count
        document["fingerprint"] = fingerprint(document["pipeline"])
        document["state"] = _moved(document["state"], local, count, process_count, chunk_size)
        document["process_index"], document["process_count"] = index, process_count
        result.append(document)
    return result


def reshard_directory(
    source: str | os.PathLike[str], target: str | os.PathLike[str], process_count: int
) -> list[Path]:
    """`reshard` on files: reads every `process_*-of-n.json` in `source`, writes to `target`.

    Example:
        >>> import chute, tempfile
        >>> from chute_checkpoint import restore, save
        >>> ds = chute.MapDataset.range(8).shard(0, 1).to_iter_dataset()
        >>> it = iter(ds)
        >>> _ = [next(it) for _ in range(4)]
        >>> old, new = tempfile.mkdtemp(), tempfile.mkdtemp()
        >>> _ = save(it, old)
        >>> [p.name for p in reshard_directory(old, new, 2)]
        ['process_0-of-2.json', 'process_1-of-2.json']
        >>> ds1 = chute.MapDataset.range(8).shard(1, 2).to_iter_dataset()
        >>> list(restore(iter(ds1), new, process_index=1, process_count=2))
        [5, 7]
    """
    folder = Path(source)
    names = sorted(p.name for p in folder.glob("process_*-of-*.json"))
    if not names:
        raise ReshardError(f"{folder} holds no process_*-of-*.json state files.")
    documents = [read_document(folder / name) for name in names]
    counts = {doc["process_count"] for doc in documents}
    if len(counts) != 1:
        raise ReshardError(f"{folder} mixes states of different process counts {sorted(counts)}.")
    out = Path(target)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for document in reshard(documents, process_count):
        path = out / state_file_name(document["process_index"], process_count)
        write_atomic(path, dumps_document(document))
        written.append(path)
    return written


def _shard_stage(documents: list[dict[str, Any]], count: int) -> tuple[int, list[int]]:
    stages = documents[0]["pipeline"]["stages"]
    found = [number for number, item in enumerate(stages) if item["op"] == "shard"]
    if documents[0]["pipeline"].get("kind") != "IterDataset" or len(found) != 1:
        raise ReshardError(
            "reshard needs a chute.IterDataset pipeline with exactly one shard stage "
            f"(MapDataset...shard(i, n)...to_iter_dataset()); found {len(found)} shard stages "
            f"in a {documents[0]['pipeline'].get('kind')} pipeline."
        )
    at = found[0]
    indices: list[int] = []
    for number, document in enumerate(documents):
        params = dict(document["pipeline"]["stages"][at]["params"])
        if document["process_count"] != count or params.get("shard_count") != count:
            raise ReshardError(
                f"state {number} is of process {document['process_index']} of "
                f"{document['process_count']} with shard_count={params.get('shard_count')}, "
                f"but {count} states were given: pass the states of all processes."
            )
        indices.append(int(params.get("shard_index", -1)))
        params["shard_index"] = None
        other = dict(documents[0]["pipeline"]["stages"][at]["params"], shard_index=None)
        same = [*stages[:at], {**stages[at], "params": other}, *stages[at + 1 :]]
        mine = document["pipeline"]["stages"]
        if [*mine[:at], {**mine[at], "params": params}, *mine[at + 1 :]] != same:
            raise ReshardError(
                f"state {number} is of a different pipeline than state 0 (beyond the shard "
                "index); reshard only the states of one training run."
            )
    if sorted(indices) != list(range(count)):
        raise ReshardError(f"the shard indices {indices} are not each of 0..{count - 1} once.")
    return at, indices


def _check_later_stages(stages: list[dict[str, Any]], shard_at: int) -> int | None:
    chunk_size = None
    for number, item in enumerate(stages[shard_at + 1 :], start=shard_at + 1):
        if item["op"] not in _KEEP_POSITIONS:
            raise ReshardError(
                f"stage {number} ({item['op']}) follows the shard stage and changes which "
                "position of the shard an element is (or keeps state across elements), so "
                "the global sequence cannot be re-cut; put it before .shard(...), or "
                f"restore with the same process count. Stages allowed after shard: "
                f"{sorted(_KEEP_POSITIONS)}."
            )
        if item["op"] == "mp_prefetch":
            chunk_size = item["params"].get("chunk_size")
    return chunk_size


def _position(state: Any, chunk_size: int | None, pipeline: Mapping[str, Any]) -> int:
    leaf = _leaf(state)
    if set(leaf) == {"position"}:
        return int(leaf["position"])
    if set(leaf) == {"chunk", "offset"} and isinstance(chunk_size, int):
        dropping = any(item["op"] in _DROPPING for item in pipeline["stages"])
        if leaf["offset"] and dropping:
            raise ReshardError(
                f"the worker state {leaf} is inside a chunk of a filtered stream, where the "
                "offset counts kept elements, not positions; save at a chunk boundary."
            )
        return int(leaf["chunk"]) * chunk_size + int(leaf["offset"])
    raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")


def _leaf(state: Any) -> dict[str, Any]:
    while isinstance(state, dict) and "parent" in state:
        if not set(state) <= {"parent", "index"}:
            raise ReshardError(f"unexpected keys in the state {state!r:.200}.")
        state = state["parent"]
    if not isinstance(state, dict):
        raise ReshardError(f"cannot find the stream position in the state {state!r:.200}.")
    return state


def _moved(state: Any, local: int, old: int, new: int, chunk_size: int | None) -> Any:
    if isinstance(state, dict) and "parent" in state:
        moved = {"parent": _moved(state["parent"], local, old, new, chunk_size)}
        if "index" in state:
            moved["index"] = int(state["index"]) * old // new
        return moved
    if "position" in state:
        return {"position": local}
    assert chunk_size is not None
    chunk, offset = divmod(local, chunk_size)
    return {"chunk": chunk, "offset": offset}
