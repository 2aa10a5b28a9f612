"""Tensor placeholders and parameter annotations (public as nki_lite.typing, `nt`).

Contract:
- `nt.tensor[[8192, 4096], nl.bfloat16]` is a `TensorSpec` placeholder: pass it instead of an
  array to trace (and later estimate) a kernel without data; as an annotation it documents the
  expected shape/dtype and the call is checked against it.
- `nt.mutable_tensor` (optionally `nt.mutable_tensor[shape, dtype]`) marks a parameter the kernel
  may write; the kernel must return it, and the caller's array receives the writes.
- Lives in lang because tracing (lang/trace.py) and the runtime read TensorSpec; nki_lite.typing
  re-exports it.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...] | None
    dtype: object = None
    mutable: bool = False

    @property
    def ndim(self) -> int:
        return len(self.shape or ())


def _spec(item, mutable: bool) -> TensorSpec:
    if not isinstance(item, tuple) or (len(item) == 2 and not isinstance(item[0], int)):
        item = item if isinstance(item, tuple) else (item,)
    else:
        item = (item,)
    shape = tuple(int(s) for s in item[0]) if item and item[0] is not None else None
    dtype = item[1] if len(item) > 1 else None
    return TensorSpec(shape, dtype, mutable)


class tensor:  # noqa: N801 - NKI's spelling
    """nt.tensor[shape, dtype]: a placeholder / annotation for an HBM tensor."""

    def __class_getitem__(cls, item) -> TensorSpec:
        return _spec(item, False)


class mutable_tensor:  # noqa: N801
    """nt.mutable_tensor: annotation for a parameter the kernel writes (and returns)."""

    def __class_getitem__(cls, item) -> TensorSpec:
        return _spec(item, True)


def is_mutable_annotation(ann) -> bool:
    return ann is mutable_tensor or (isinstance(ann, TensorSpec) and ann.mutable) or \
        (isinstance(ann, str) and "mutable_tensor" in ann)
