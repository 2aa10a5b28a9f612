"""nki_lite.typing (nt): tensor placeholders and parameter annotations (defined in lang/tensor_spec.py)."""
from .lang.tensor_spec import TensorSpec, is_mutable_annotation, mutable_tensor, tensor  # noqa: F401
