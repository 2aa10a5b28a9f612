"""nki_lite's version (re-exported as `nki_lite.__version__`; part of every JIT disk-cache key)."""
__version__ = "0.1.0"
