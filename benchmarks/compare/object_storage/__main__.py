"""`python -m benchmarks.compare.object_storage`."""

from ._report import main

if __name__ == "__main__":  # asv imports every module of benchmarks/ to find benchmarks.
    main()
