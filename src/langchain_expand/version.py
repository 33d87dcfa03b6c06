"""The installed package's version, read once from its metadata."""

from importlib.metadata import PackageNotFoundError, version

__all__ = ["VERSION"]

try:
    VERSION = version("langchain-expand")
except PackageNotFoundError:  # run from a source tree that was never installed
    VERSION = "0+unknown"
