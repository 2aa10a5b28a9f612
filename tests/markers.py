"""Helpers for tests that check an error names the right source line: a test marks the offending
statement with a trailing `# MARK-NAME` comment and asks for its line number."""
import os

import numpy as np
import pytest

import nki_lite.typing as nt
from nki_lite import errors


def line_of(path: str, marker: str) -> int:
    """Line number in `path` of the unique line ending with `# marker`."""
    src = open(path).read().splitlines()
    hits = [i + 1 for i, s in enumerate(src) if s.rstrip().endswith("# " + marker)]
    assert len(hits) == 1, (marker, hits)
    return hits[0]


def spec(shape, dt=np.float32):
    return nt.tensor[list(shape), dt]


def marker_helpers(test_file: str):
    """(HERE, line_of(marker), expect(kernel, args, cls, name, marker, target)) bound to one test file."""
    here = os.path.abspath(test_file)

    def line(marker: str) -> int:
        return line_of(here, marker)

    def expect(kernel, args, cls, name, marker, target="trn2"):
        with pytest.raises(cls) as ei:
            kernel.trace(*args, target=target)
        e = ei.value
        assert e.name == name and e.code == errors.ERRORS[name].code, str(e)
        assert f"{here}:{line(marker)}:" in str(e), str(e)
        return e
    return here, line, expect
