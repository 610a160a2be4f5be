"""`chute demo --elastic`: hosts preempted at their own steps, resumed on other counts.

Simulated hosts (one iterator each, in this process) read two epochs of an ArrayRecord
file of records, globally shuffled per epoch, sharded by host, filtered (a quality
filter that drops about one record in eleven) and batched. Four hosts run at their own
speeds and are preempted at different steps; their checkpoint is restored on three
hosts, which are preempted in turn; six hosts finish the run. Each restore reads the
states of all the hosts that saved (`chute.checkpoint.restore` with another process
count). At the end the demo counts, per epoch, the records seen, lost and repeated.
"""

from __future__ import annotations

import collections
import json
import random
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["run_elastic_demo"]

RECORDS = 3000
EPOCHS = 2
BATCH = 16
PHASES = (4, 3, 6)  # Hosts of each run; the last runs to the end.


def _kept(record: dict[str, Any]) -> bool:
    """The quality filter: drops records whose id is a multiple of 11."""
    return int(record["id"]) % 11 != 0


def _tagged(index: int, record: dict[str, Any]) -> dict[str, Any]:
    """The record with its epoch (the index counts positions over both epochs)."""
    return {"id": record["id"], "epoch": np.int64(index // RECORDS), "text": record["text"]}


def _pipeline(paths: list[str], host: int, hosts: int) -> Any:
    import chute

    ds = chute.MapDataset.source(chute.ArrayRecordSource(paths)).seed(2026).shuffle()
    ds = ds.repeat(EPOCHS).map_with_index(_tagged).shard(host, hosts)
    return ds.to_iter_dataset().filter(_kept).batch(BATCH)


def _write(folder: Path) -> list[str]:
    import chute

    records = [
        {"id": np.int64(i), "text": f"record {i}: " + "lorem ipsum " * (i % 7)}
        for i in range(RECORDS)
    ]
    return chute.write_array_record(records, folder / "records.array_record", num_shards=4)


def run_elastic_demo(folder: str | None = None, seed: int = 0) -> int:
    """Runs the demo (see the module docs); returns 0 when no record was lost or repeated.

    Example:
        >>> callable(run_elastic_demo)
        True
    """
    import chute

    work = Path(folder or tempfile.mkdtemp(prefix="chute-demo-elastic-")).resolve()
    work.mkdir(parents=True, exist_ok=True)
    paths = _write(work / "data")
    rng = random.Random(seed)
    print(f"chute demo --elastic, in {work}")
    print(
        f"  data: {RECORDS} records in {len(paths)} ArrayRecord shards, {EPOCHS} epochs; "
        f"pipeline: global shuffle per epoch -> shard by host -> quality filter -> "
        f"batch({BATCH})"
    )
    seen: collections.Counter[tuple[int, int]] = collections.Counter()
    saved: Path | None = None
    largest = 0
    for number, hosts in enumerate(PHASES):
        last = number == len(PHASES) - 1
        iterators = [iter(_pipeline(paths, host, hosts)) for host in range(hosts)]
        if saved is not None:
            for host, it in enumerate(iterators):
                chute.checkpoint.restore(it, saved, process_index=host, process_count=hosts)
        steps = []
        for it in iterators:  # Each host at its own speed: preempted at its own step.
            stop = None if last else rng.randint(5, 40)
            taken = 0
            for batch in it:
                seen.update(zip(batch["epoch"].tolist(), batch["id"].tolist(), strict=True))
                taken += 1
                if taken == stop:
                    break
            steps.append(taken)
        what = "batches to the end" if last else "batches until preempted"
        origin = "fresh" if saved is None else f"restored from {PHASES[number - 1]} hosts"
        print(f"  {hosts} hosts, {origin}: {what} {steps}")
        if not last:
            saved = work / f"checkpoint-{number}"
            for host, it in enumerate(iterators):
                path = chute.checkpoint.save(it, saved, process_index=host, process_count=hosts)
                state = json.loads(Path(path).read_text())["state"]
                largest = max(largest, len(json.dumps(state)))
    print()
    print("| epoch | records | seen | lost | repeated |")
    print("|---|---|---|---|---|")
    failed = False
    for epoch in range(EPOCHS):
        expected = {i for i in range(RECORDS) if i % 11 != 0}
        mine = {i: n for (e, i), n in seen.items() if e == epoch}
        lost = len(expected - set(mine))
        repeated = sum(n - 1 for n in mine.values() if n > 1)
        extra = len(set(mine) - expected)
        failed |= bool(lost or repeated or extra)
        print(f"| {epoch} | {len(expected)} | {len(mine)} | {lost} | {repeated} |")
    print(f"largest iterator state saved: {largest} bytes")
    return 1 if failed else 0
