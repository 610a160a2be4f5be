"""What the other chute packages build on: deliberate seams, not the user's API.

Names here are stable between chute's own packages of one release, and may change
between releases; a user's code should use the names of `chute_sources` itself. Every
other chute package imports from the sources layer only through `chute_sources` and
this module (an import-linter contract forbids reaching into `chute_sources._x`).

- Argument and state checks (the one home of validation: `check_int` and friends).
- The error ledger behind `ErrorBudget`: `ErrorLedger`, `SkippedElement`, `Key`,
  `ledger_scope` and `active_ledger` (see `chute_sources._error_budget` for why a
  context variable carries it, and which constructors read it).
- Shared-memory files: their folder, naming, owners (`owner_tag`, `release_owner`),
  creation and clean-up.
- Forking safely: `fork_refusal`, `forking`, `map_in_fork`, and `quiet_during_forks` /
  `threads_quieted` for chute's own background threads, which never rule out a fork.
- `PositionLayout`, `WrapperLayout`: the protocols by which the layers that own a
  state's layout tell where a stream is (resharding reads states only through them).
- `distinct`, the record codec's `MAGIC`.
- The manifest of `chute convert`: its name and version, and `unfinished_conversions`,
  which `ArrayRecordSource` and `chute inspect` ask before reading shards.

Example:
    >>> from chute_sources.internal import check_int
    >>> check_int(3, "batch_size", "batch", minimum=1)
    3
"""

from ._array_record import read_one_by_one, reading_one_by_one
from ._checks import (
    MAX_SEED,
    check_bool,
    check_count,
    check_dataset,
    check_int,
    check_optional_int,
    check_seed,
    check_sequence,
    check_state,
    check_weights,
    restore_all,
    state_bool,
    state_dict,
    state_dicts,
    state_int,
    state_int_lists,
    state_parent,
    state_position,
    state_value,
)
from ._codec import MAGIC
from ._conversion_manifest import (
    MANIFEST_SUFFIX,
    MANIFEST_VERSION,
    UnfinishedConversion,
    unfinished_conversions,
)
from ._distinct import distinct
from ._error_budget import KEEP, ErrorLedger, Key, SkippedElement, active_ledger, ledger_scope
from ._fork import (
    UNSAFE_MODULES,
    fork_refusal,
    forking,
    map_in_fork,
    quiet_during_forks,
    thread_count,
    threads_quieted,
)
from ._pipeline import PositionLayout, WrapperLayout
from ._shm import (
    SHM_DIR_ENV,
    SHM_PREFIX,
    create_segment_file,
    new_segment_path,
    no_space_error,
    owner_tag,
    reclaim_orphaned_segments,
    release_owner,
    remove_own_segments,
    shm_dir,
)

__all__ = [
    "ErrorLedger",
    "KEEP",
    "Key",
    "MAGIC",
    "MANIFEST_SUFFIX",
    "MANIFEST_VERSION",
    "MAX_SEED",
    "PositionLayout",
    "SHM_DIR_ENV",
    "SHM_PREFIX",
    "SkippedElement",
    "UNSAFE_MODULES",
    "UnfinishedConversion",
    "WrapperLayout",
    "active_ledger",
    "check_bool",
    "check_count",
    "check_dataset",
    "check_int",
    "check_optional_int",
    "check_seed",
    "check_sequence",
    "check_state",
    "check_weights",
    "create_segment_file",
    "distinct",
    "fork_refusal",
    "forking",
    "ledger_scope",
    "map_in_fork",
    "new_segment_path",
    "no_space_error",
    "owner_tag",
    "quiet_during_forks",
    "read_one_by_one",
    "reading_one_by_one",
    "reclaim_orphaned_segments",
    "release_owner",
    "remove_own_segments",
    "restore_all",
    "shm_dir",
    "state_bool",
    "state_dict",
    "state_dicts",
    "state_int",
    "state_int_lists",
    "state_parent",
    "state_position",
    "state_value",
    "thread_count",
    "threads_quieted",
    "unfinished_conversions",
]
