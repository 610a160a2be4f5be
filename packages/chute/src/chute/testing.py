"""`chute.testing`: the checks chute runs on its own pipelines, for users' pipelines.

- `assert_resumes(make_iterator, ...)`: restoring a state taken anywhere continues
  exactly (see `chute_core.assert_resumes`).
- `assert_reshards(make_pipeline, from_processes, to_processes)`: a pipeline saved on
  some number of processes, each stopped at its own point, continues on other counts
  with every record exactly once (see `chute_checkpoint.assert_reshards`); `rows`
  splits batches into records for it.

Example:
    >>> import chute
    >>> def pipeline(i, n):
    ...     return chute.MapDataset.range(30).seed(0).shuffle().shard(i, n).to_iter_dataset()
    >>> chute.testing.assert_reshards(pipeline, 2, [5, 1]).records
    30
"""

from chute_checkpoint import ReshardRun as ReshardRun
from chute_checkpoint import assert_reshards as assert_reshards
from chute_checkpoint import rows as rows
from chute_core.internal import assert_resumes as assert_resumes
from chute_core.internal import assert_trees_equal as assert_trees_equal

__all__ = ["ReshardRun", "assert_reshards", "assert_resumes", "assert_trees_equal", "rows"]
