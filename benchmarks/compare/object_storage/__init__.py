"""Object-storage libraries for chute's `s3://` and `gs://` URLs, measured side by side.

Run: `uv run --frozen python -m benchmarks.compare.object_storage [--markdown FILE]`
(options: `--repeats 5`, `--reads 512`, `--range-mib 16`, `--no-features`; ~8 minutes on
2 cores).

Starts a moto S3 server itself (a subprocess on a free loopback port), uploads random
objects, and measures obstore, s3fs (fsspec) and pyarrow.fs against it, together with two
references measured in the same run: raw `http.client` GETs with no library (what the
server itself costs) and `os.pread` of local copies of the same objects (a yardstick that
does not depend on the server, so that figures of noisy runs can be compared):

1. random range reads (16 KiB and 256 KiB, from one object and from 16 objects), each
   library with its idiomatic concurrency;
2. whole-object reads (1, 16 and 64 MiB; 8 objects one after another, and 8 at once);
3. time to first byte (HEAD + the first 16 KiB) with a fresh client, in this process and
   in a fresh process (imports included);
4. process CPU seconds (`time.process_time`, all threads) per GiB delivered, for 1 and 2;
5. the GIL: how much a CPU-bound Python thread slows the reads, and the reads slow it.

Every figure is the median of `--repeats` runs, the libraries taking turns in an order
rotated from run to run. Feature checks follow: conditional reads (an object replaced
mid-read), retries and timeouts (against a local endpoint that fails or stalls on
purpose), credentials and endpoint from the environment, fork safety, and which libraries
work as-is against the GCS emulator (gcp-storage-emulator).

moto is slow, and every range GET costs it a copy of the whole object, so its cost per
request grows with the object's size (the "server" table shows it); that is why the range
reads use 16 MiB objects by default (`--range-mib 64` works, at ~35 ms a request). The
`http.client` column is the server's share; what a library adds is the rest, and its
CPU seconds per GiB, which the server does not affect.
"""

from ._features import env_check, retry_check
from ._fork_gcs import fork_check, gcs_check
from ._libraries import LIBRARIES
from ._report import main
from ._setup import Endpoint

__all__ = ["LIBRARIES", "Endpoint", "env_check", "fork_check", "gcs_check", "main", "retry_check"]
