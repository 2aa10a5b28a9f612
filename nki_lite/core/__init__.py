"""The core every layer shares: the IR, affine expressions, the op registry with each op's traits,
dtypes, the hardware targets (every hardware fact in one table) and the bit patterns several
backends agree on (canonical NaN, the uninitialised-memory sentinel).

Contract: core imports nothing of nki_lite but the base modules (errors, loc, config); lang, lower,
runtime and the rest build on it (tests/test_layering.py enforces the order)."""
