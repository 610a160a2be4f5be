"""chute's asv benchmark suite (see asv.conf.json).

Worker processes (fork server or spawn) import the functions a benchmark's pipeline
uses by module name, `benchmarks.bench_...`; asv puts this folder's parent on its own
`sys.path` only, so it is added to `PYTHONPATH` here, which new interpreters inherit.
"""

import os

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
    os.environ["PYTHONPATH"] = os.pathsep.join(
        part for part in (_ROOT, os.environ.get("PYTHONPATH")) if part
    )
