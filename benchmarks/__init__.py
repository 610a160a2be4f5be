"""chute's asv benchmark suite (see asv.conf.json).

Worker processes (fork server or spawn) import the functions a benchmark's pipeline
uses by module name, `benchmarks.bench_...`, with the parent's `sys.path`. asv imports
this package without putting its parent folder on `sys.path`, so it is added here.
"""

import os
import sys

_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ROOT not in sys.path:
    sys.path.append(_ROOT)
