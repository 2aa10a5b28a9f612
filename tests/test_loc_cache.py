"""nki_lite.loc caches per code object (position tables) and per absolute file name (internal or
not), because loc capture runs once per traced op: the cached answers equal the uncached ones."""
import sys

from nki_lite import loc


def _here():
    return loc.frame_loc(sys._getframe(1))


def test_frame_loc_columns_survive_the_position_cache_filling_up():
    want = []
    for k in range(loc._POSITIONS_MAX + 10):            # more code objects than the cache holds
        src = "\n" * k + "def f():\n    x = 1\n    return  here()\n"
        ns = {"here": _here}
        exec(compile(src, f"<gen{k}>", "exec"), ns)
        want.append((k, ns["f"]()))
    for k, got in want:
        assert (got.file, got.line, got.col, got.end_col) == (f"<gen{k}>", k + 3, 12, 18)
    assert len(loc._POSITIONS) <= loc._POSITIONS_MAX


def test_is_internal_caches_absolute_names_only():
    pkg_file = loc.__file__
    assert loc._is_internal(pkg_file) and loc._is_internal(pkg_file)
    stdlib_kernel = loc._STDLIB_DIR + "softmax_kernels.py"
    assert not loc._is_internal(stdlib_kernel)
    assert not loc._is_internal("<stdin>") and "<stdin>" not in loc._INTERNAL
