"""The package version, in the base layer so any layer may read it without importing the package
facade (`nki_lite/__init__.py` re-exports it as `nki_lite.__version__`)."""
__version__ = "0.1.0"
