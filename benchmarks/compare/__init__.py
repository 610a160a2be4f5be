"""Side-by-side comparisons of chute with Grain and the PyTorch DataLoader.

`uv run python -m benchmarks.compare` runs the same workloads with each loader, every
run in a fresh process, and prints one table (see `__main__.py`). Grain comes from the
workspace's `compare` dependency group; PyTorch from a separate virtual environment
(through uv it would resolve to a ~5 GB CUDA build), created on first use.
"""
