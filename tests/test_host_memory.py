"""Host allocations beyond NKI_LITE_MAX_ALLOC_BYTES (or beyond what the host can give) are NL-E403 at
the line that creates the tensor, in both modes — not numpy's raw MemoryError/ValueError (issue 10)."""
import numpy as np
import pytest

import nki_lite as nki
import nki_lite.language as nl
from nki_lite import errors, hostmem

from .markers import marker_helpers

HERE, line, _ = marker_helpers(__file__)
MODES = ["interpret", "jit"]
pytestmark = pytest.mark.filterwarnings("ignore:.*only partly written")


def _kernel(rows, cols):
    @nki.jit
    def k(a):
        out = nl.ndarray((rows, cols), nl.float32, buffer=nl.shared_hbm)  # MARK-BIG
        nl.store(out[0:128, 0:512], nl.load(a))
        return out
    return k


A = np.ones((128, 512), np.float32)


def _raises(k, mode):
    with pytest.raises(errors.MemoryCapacityError) as ei:
        k(A, mode=mode)
    e = ei.value
    assert e.code == "NL-E403" and e.loc.line == line("MARK-BIG") and e.loc.file == HERE
    return str(e)


@pytest.mark.parametrize("mode", MODES)
def test_terabyte_tensor_is_a_coded_error_at_its_line(mode):
    msg = _raises(_kernel(1 << 20, 1 << 18), mode)
    assert "1.00 TiB" in msg and "NKI_LITE_MAX_ALLOC_BYTES" in msg


@pytest.mark.parametrize("mode", MODES)
def test_the_knob_sets_the_limit(monkeypatch, mode):
    monkeypatch.setenv("NKI_LITE_MAX_ALLOC_BYTES", str(1 << 20))
    msg = _raises(_kernel(1024, 512), mode)                 # 2 MiB > 1 MiB
    assert "2.00 MiB" in msg and "1.00 MiB" in msg and "NKI_LITE_MAX_ALLOC_BYTES=1048576" in msg
    monkeypatch.setenv("NKI_LITE_MAX_ALLOC_BYTES", str(4 << 20))
    out = _kernel(1024, 512)(A, mode=mode)                  # 2 MiB < 4 MiB: runs
    np.testing.assert_array_equal(out[:128, :512], A)


@pytest.mark.parametrize("mode", MODES)
def test_a_failed_allocation_within_the_limit_is_converted(monkeypatch, mode):
    """Allowed by the knob but impossible for the host (2^62 bytes): numpy's error becomes NL-E403."""
    monkeypatch.setenv("NKI_LITE_MAX_ALLOC_BYTES", str(1 << 62))
    msg = _raises(_kernel(1 << 31, 1 << 29), mode)
    assert "allocation failed" in msg


def test_default_limit_is_a_fraction_of_physical_memory(monkeypatch):
    monkeypatch.delenv("NKI_LITE_MAX_ALLOC_BYTES", raising=False)
    phys = hostmem._physical()
    assert hostmem.limit() == (phys * 3 // 4 if phys else 1 << 62)
