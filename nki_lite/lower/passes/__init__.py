"""Kernel -> Kernel transforms, run in the order of `pipeline.PIPELINE` (pipeline.py holds the list,
which backends each pass applies to, and the functions the runtime and the code generator call).

Contract: each pass preserves the kernel's results bit for bit on every backend it applies to (tests
compare the interpreter before and after).
"""
