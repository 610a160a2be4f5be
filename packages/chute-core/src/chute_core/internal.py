"""What chute's layers share below the user's API: checks, the error ledger, processes.

Stable between chute's own packages of one release; may change between releases. A
user's code should use the names of `chute_core` (or `chute`) instead.

- Argument and state checks: the one home of validation (`check_int` and friends,
  `state_*`, `restore_all`).
- The error ledger behind `ErrorBudget`: `ErrorLedger`, `Key`, `KEEP`, `ledger_scope`
  and `active_ledger` (a context variable carries it; see `chute_core._error_budget`).
- Forking safely: `fork_refusal`, `forking`, `map_in_fork`, `thread_count`, and
  `quiet_during_forks` / `threads_quieted` for chute's own background threads.
- Shared-memory files: their folder, names, owners, creation and clean-up.
- `COUNTERS`: the process's running totals of requests, bytes and cache hits that
  metrics report (`Counters`, and the counters' names).
- `distinct`: the sorted distinct values of an integer array.
- `lazy_attributes`: a package's names loaded on first use (slow imports wait).
- The resume check every checkpointable iterator passes: `assert_resumes`, with
  `collect_with_states` and `assert_trees_equal` (tests reach them through
  `chute_testing`; `chute.grain` offers it as Grain's
  `assert_equal_output_after_checkpoint`).

Example:
    >>> from chute_core.internal import check_int
    >>> check_int(3, "batch_size", "batch", minimum=1)
    3
"""

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
from ._counters import (
    CACHE_HITS,
    CACHE_MISSES,
    COUNTERS,
    DEVICE_BYTES,
    SHM_BYTES,
    STORAGE_BYTES,
    STORAGE_REQUESTS,
    STORAGE_RETRIES,
    CounterKey,
    Counters,
)
from ._distinct import distinct
from ._error_budget import KEEP, ErrorLedger, Key, active_ledger, ledger_scope
from ._fork import (
    UNSAFE_MODULES,
    fork_refusal,
    forking,
    map_in_fork,
    quiet_during_forks,
    thread_count,
    threads_quieted,
)
from ._lazy import lazy_attributes
from ._resume_check import assert_resumes, assert_trees_equal, collect_with_states
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
    "CACHE_HITS",
    "CACHE_MISSES",
    "COUNTERS",
    "DEVICE_BYTES",
    "KEEP",
    "MAX_SEED",
    "SHM_BYTES",
    "SHM_DIR_ENV",
    "SHM_PREFIX",
    "STORAGE_BYTES",
    "STORAGE_REQUESTS",
    "STORAGE_RETRIES",
    "UNSAFE_MODULES",
    "CounterKey",
    "Counters",
    "ErrorLedger",
    "Key",
    "active_ledger",
    "assert_resumes",
    "assert_trees_equal",
    "check_bool",
    "check_count",
    "check_dataset",
    "check_int",
    "check_optional_int",
    "check_seed",
    "check_sequence",
    "check_state",
    "check_weights",
    "collect_with_states",
    "create_segment_file",
    "distinct",
    "fork_refusal",
    "forking",
    "lazy_attributes",
    "ledger_scope",
    "map_in_fork",
    "new_segment_path",
    "no_space_error",
    "owner_tag",
    "quiet_during_forks",
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
]
