"""LLVM lowering: IR text generation per op (codegen, mathlib, convert) and the one module that owns
llvmlite objects (target.py)."""
