"""Framework tensors in, the caller's type out (nki_lite/interop.py): a fake DLPack / array-API type
always exercises the path; torch and jax round-trips run where they are installed."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
import nki_lite.typing as nt
from nki_lite.interop import FrameworkResultWarning


@nki.jit
def add(a, b):
    out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(out, value=nl.add(nl.load(a), nl.load(b)))
    return out


@nki.jit
def add_and_copy(a, b):
    s = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    c = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
    nl.store(s, value=nl.add(nl.load(a), nl.load(b)))
    nl.store(c, value=nl.load(a))
    return s, c


@nki.jit
def scale_in_place(x: nt.mutable_tensor):
    nl.store(x, value=nl.multiply(nl.load(x), 2.0))
    return x


class FakeNamespace:
    """The array-API namespace of FakeTensor: from_dlpack wraps without copying."""
    calls = 0

    @classmethod
    def from_dlpack(cls, x):
        cls.calls += 1
        return FakeTensor(np.from_dlpack(x))


class FakeTensor:
    """A CPU tensor that speaks only DLPack (no __array__), like a framework tensor."""

    def __init__(self, data: np.ndarray, device: int = 1):
        self.data = data
        self._device = device

    def __dlpack__(self, stream=None, **kw):
        return self.data.__dlpack__(**kw)

    def __dlpack_device__(self):
        return (self._device, 0)

    def __array_namespace__(self, api_version=None):
        return FakeNamespace


@pytest.fixture
def fakefw(monkeypatch):
    """A framework module with a module-level from_dlpack and an __array__-only tensor type."""
    mod = types.ModuleType("fakefw")

    class Tensor:
        def __init__(self, data):
            self.data = data

        def __array__(self, dtype=None, copy=None):
            return self.data

    Tensor.__module__ = "fakefw"
    mod.Tensor = Tensor
    mod.from_dlpack = lambda x: Tensor(np.from_dlpack(x))
    monkeypatch.setitem(sys.modules, "fakefw", mod)
    return mod


MODES = ["jit", "interpret"]


@pytest.mark.parametrize("mode", MODES)
def test_dlpack_tensors_in_and_the_callers_type_out(mode):
    a, b = np.arange(128 * 8, dtype=np.float32).reshape(128, 8), np.ones((128, 8), np.float32)
    r = add(FakeTensor(a), FakeTensor(b), mode=mode)
    assert isinstance(r, FakeTensor)
    np.testing.assert_array_equal(r.data, a + b)
    s, c = add_and_copy(FakeTensor(a), b, mode=mode)            # a tuple result, mixed arguments
    assert isinstance(s, FakeTensor) and isinstance(c, FakeTensor)
    np.testing.assert_array_equal(c.data, a)


@pytest.mark.parametrize("mode", MODES)
def test_inputs_are_not_copied(mode):
    """A mutable parameter written by the kernel reaches the caller's own tensor memory."""
    x = np.ones((128, 4), np.float32)
    t = FakeTensor(x)
    r = scale_in_place(t, mode=mode)
    np.testing.assert_array_equal(x, 2.0)                       # written through the DLPack view
    assert isinstance(r, FakeTensor)
    np.testing.assert_array_equal(r.data, x)


def test_array_only_types_come_back_through_their_module(fakefw):
    a = np.full((128, 8), 3, np.float32)
    r = add(fakefw.Tensor(a), fakefw.Tensor(a))
    assert isinstance(r, fakefw.Tensor)
    np.testing.assert_array_equal(r.data, a + a)


def test_numpy_calls_stay_numpy():
    a = np.ones((128, 8), np.float32)
    assert type(add(a, a)) is np.ndarray


def test_device_tensors_are_refused():
    t = FakeTensor(np.ones((128, 8), np.float32), device=2)      # kDLCUDA
    with pytest.raises(nki.NkiLiteError, match="NL-E901.*GPU/accelerator"):
        add(t, t)


def test_a_result_the_framework_cannot_take_is_numpy_with_a_warning():
    def refuse(x):
        raise BufferError(f"no {x.dtype}")

    class Picky(FakeTensor):
        def __array_namespace__(self, api_version=None):
            return types.SimpleNamespace(from_dlpack=refuse)

    a = np.ones((128, 8), np.float32)
    with pytest.warns(FrameworkResultWarning, match="returned as a numpy array, not as Picky"):
        r = add(Picky(a), Picky(a))
    assert type(r) is np.ndarray
    np.testing.assert_array_equal(r, a + a)


def test_a_dtype_dlpack_cannot_carry_comes_back_through_asarray():
    import ml_dtypes

    def refuse(x):
        raise BufferError(f"no {x.dtype}")

    class Bf16(FakeTensor):
        def __array__(self, dtype=None, copy=None):
            return self.data

        def __array_namespace__(self, api_version=None):
            return types.SimpleNamespace(from_dlpack=refuse, asarray=lambda a: Bf16(np.array(a)))

    h = np.ones((128, 8), ml_dtypes.bfloat16)
    r = add(Bf16(h), Bf16(h))       # in: DLPack refuses bfloat16, __array__ reads it without a copy
    assert isinstance(r, Bf16) and r.data.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(r.data.astype(np.float32), 2.0)


def test_an_unreadable_tensor_is_nl_e901_naming_the_argument():
    class Grad(FakeTensor):
        def __dlpack__(self, stream=None, **kw):
            raise RuntimeError("Can't export tensors that require gradient")

    a = np.ones((128, 8), np.float32)
    with pytest.raises(nki.NkiLiteError, match="NL-E901.*Grad argument at position 1.*require gradient"):
        add(a, Grad(a))


def test_torch_round_trip():
    torch = pytest.importorskip("torch", reason="torch is not installed (optional; too big for the CI install)")
    a = torch.arange(128 * 8, dtype=torch.float32).reshape(128, 8)
    r = add(a, a)
    assert isinstance(r, torch.Tensor)
    assert torch.equal(r, a + a)
    x = torch.ones(128, 4)
    scale_in_place(x)
    assert torch.equal(x, torch.full((128, 4), 2.0))


def test_jax_round_trip():
    jax = pytest.importorskip("jax", reason="jax is not installed (the frameworks extra: make test installs it)")
    import jax.numpy as jnp
    a = jnp.arange(128 * 8, dtype=jnp.float32).reshape(128, 8)
    r = add(a, a)
    assert isinstance(r, jax.Array)
    assert bool(jnp.array_equal(r, a + a))
    h = a.astype(jnp.bfloat16)                     # DLPack cannot carry bfloat16 out of numpy: a copy
    r = add(h, h)
    assert isinstance(r, jax.Array) and r.dtype == jnp.bfloat16
    assert bool(jnp.array_equal(r, h + h))
