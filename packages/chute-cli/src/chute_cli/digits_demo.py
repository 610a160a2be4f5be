"""The digits demo's data, pipeline and model, for benchmarks that measure on the same loop.

`chute demo` trains a small MLP on scikit-learn's handwritten digits (written as
ArrayRecord shards) through a pipeline with worker processes; these are the functions
that make the data, the pipeline and the model (they need the demo's extra:
`pip install 'chute[demo]'`).

Example:
    >>> import tempfile
    >>> from chute_cli.digits_demo import pipeline, write_digits
    >>> paths, _ = write_digits(tempfile.mkdtemp(), shards=2)
    >>> next(iter(pipeline(paths, epochs=1, workers=0)))["x"].shape
    (64, 64)
"""

from ._demo_data import pipeline as pipeline
from ._demo_data import write_digits as write_digits
from ._demo_train import model as model

__all__ = ["model", "pipeline", "write_digits"]
