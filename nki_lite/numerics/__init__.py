"""Numerics shared by every backend: conversions, exact fp32 FMA, fp32 transcendentals.

Each function here is the *definition* of the corresponding operation in nki_lite; the numpy
interpreter calls it directly and the LLVM JIT re-implements the same steps bit for bit.
"""
