"""The version shared by every chute package."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["__version__"]

try:
    __version__ = version("chute")
except PackageNotFoundError:  # Running from a source tree without installing.
    __version__ = "0.0.0+unknown"
