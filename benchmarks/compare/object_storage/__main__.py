"""`python -m benchmarks.compare.object_storage`."""

from ._report import main

main()
