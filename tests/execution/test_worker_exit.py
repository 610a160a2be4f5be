"""`sys.exit()` in a worker's transform: an error naming the worker, never a silent exit.

Re-raised as is in the training process, a worker's `SystemExit` would end it with the
worker's exit code and no traceback (Python exits quietly on `SystemExit`). Grain
reports a worker's end as an exception in the consumer; so does chute: a
`WorkerDiedError` naming the worker and what it ran, caused by the `SystemExit`. With
no workers the transform runs in the training process, and `sys.exit()` exits it, as
it would in any loop.
"""

import re
import subprocess
import sys
import textwrap

import pytest

import chute
import chute.grain as grain


def exit_at_five(x):
    if x == 5:
        sys.exit(3)
    return x


class ExitAtFive(grain.transforms.Map):
    def map(self, x):
        return exit_at_five(x)


def _loader(workers):
    return grain.DataLoader(
        data_source=grain.sources.RangeDataSource(0, 20, 1),
        sampler=grain.samplers.IndexSampler(
            20, shard_options=grain.sharding.NoSharding(), num_epochs=1
        ),
        operations=[ExitAtFive()],
        worker_count=workers,
    )


def test_a_data_loader_worker_that_exits_is_an_error_naming_it():
    with pytest.raises(chute.WorkerDiedError) as raised:
        list(_loader(2))
    message = str(raised.value)
    # Which worker, and how far its unit reaches, depends on the timing (adaptive units).
    assert re.match(r"worker [01] ended while running positions \d+\.\.\d+: ", message)
    assert "SystemExit('3')" in message and "sys.exit()" in message
    assert isinstance(raised.value.__cause__, SystemExit)
    assert raised.value.__cause__.code == 3


def test_mp_prefetch_reports_it_the_same_way():
    ds = chute.MapDataset.range(20).to_iter_dataset().map(exit_at_five)
    it = iter(ds.mp_prefetch(chute.MultiprocessingOptions(num_workers=2), chunk_size=4))
    with pytest.raises(chute.WorkerDiedError, match=r"worker [01] ended while running chunk 1 "):
        list(it)


def test_without_workers_sys_exit_exits_as_in_any_loop():
    with pytest.raises(SystemExit) as raised:
        list(_loader(0))
    assert raised.value.code == 3


SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, {here!r})
    from test_worker_exit import _loader
    for batch in _loader(2):
        pass
    """
)


def test_a_training_script_fails_loudly_instead_of_exiting_with_the_workers_code(tmp_path):
    from pathlib import Path

    code = SCRIPT.format(here=str(Path(__file__).parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert re.search(r"_worker_pool.WorkerDiedError: worker [01] ended", done.stderr)
    assert re.search(r"chute: raised in worker [01] while running positions", done.stderr)
