"""nki.typing (nt): the tensor annotations, shared with the legacy dialect (nki_lite.typing).

`nt.tensor[128, 512]`, `nt.tensor[[128, 512], nl.float32]` and `nt.mutable_tensor` behave as in
nki_lite.typing.
"""
from ..typing import TensorSpec, is_mutable_annotation, mutable_tensor, tensor  # noqa: F401
