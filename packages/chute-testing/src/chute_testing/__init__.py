"""What chute's tests share: the resume check, loopback object storage, test iterators.

Not part of any chute package users install: the test suites and benchmarks depend on
it (the workspace's dev group), and no chute package imports it.

- `assert_resumes` (with `collect_with_states`, `assert_trees_equal`): the resume check
  every checkpointable iterator passes (`chute_core`'s, for tests).
- `LoopbackS3` (moto) and `LoopbackGCS` (gcp-storage-emulator, completed to answer like
  GCS) run real servers in child processes; `FaultProxy` sits between a client and one
  of them, adding latency, error statuses, connection resets and stalls;
  `loopback_s3_fixture` and `loopback_gcs_fixture` are the bodies of session-scoped
  pytest fixtures that skip, saying what to install, when the servers are missing.
- `png_bytes` and `png` write small PNG images (no Pillow); `corrupt` damages bytes the
  way the fuzz tests do, drawn from a seeded generator.
- `ListIterator`: a checkpointable iterator over a list, for tests of iterators that
  take a parent.
- `chute_testing.execution`: transforms that fail, sleep or kill their worker on
  purpose, and leak checks (threads, shared memory); `chute_testing.device`: several
  JAX processes on one machine.

Example:
    >>> from chute_testing import ListIterator, assert_resumes
    >>> assert_resumes(lambda: ListIterator([1, 2, 3]))  # The whole run, checked.
    [1, 2, 3]
"""

from chute_core.internal import assert_resumes, assert_trees_equal, collect_with_states

from ._fault_proxy import FaultProxy, ProxiedRequest
from ._files import corrupt, png, png_bytes
from ._fixtures import loopback_gcs_fixture, loopback_s3_fixture
from ._list_iterator import ListIterator
from ._loopback import LoopbackS3, LoopbackServerError
from ._loopback_gcs import LoopbackGCS

__all__ = [
    "FaultProxy",
    "ListIterator",
    "LoopbackGCS",
    "LoopbackS3",
    "LoopbackServerError",
    "ProxiedRequest",
    "assert_resumes",
    "assert_trees_equal",
    "collect_with_states",
    "corrupt",
    "loopback_gcs_fixture",
    "loopback_s3_fixture",
    "png",
    "png_bytes",
]
