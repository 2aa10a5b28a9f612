"""nki_lite.stdlib: kernels written in the DSL itself (elementwise, matmul, softmax, norms)."""
