"""pytest plugin for tutorials/check_nkilib.py: the NKI Library's own tests, in their CPU-simulation
mode, on nki_lite.

Loaded with `-p nkilib_pytest_plugin` (tutorials/ on sys.path) in the pytest process check_nkilib.py
starts from the library's root (`pytest test/integration --test-mode simulation -m fast`). Never
imported by nki_lite itself: it changes what the library's test harness imports, for that process only.

At import (before the library's conftest runs its `pytest_configure`) it
- installs nki_lite.compat for both dialects, so `import nki` ... is nki_lite.nki (and the library's
  few `neuronxcc.nki.typing` imports are nki_lite.typing);
- registers a stand-in `nki_cpu_simulator` package whose `nki`, `nki.language`, `nki.isa`, ... are
  nki_lite.nki's modules, so the library's own test/utils/simulation_setup.py aliases `nki` to them and
  its `nki.cpu_simulate(kernel)[lnc](**inputs)` is nki_lite's launch `nki.jit(kernel)[lnc]` (the backend is
  NKI_LITE_MODE: interpret or jit);
- registers a stand-in `neuron_dtypes` (AWS's dtype helper, not on PyPI) built on ml_dtypes:
  `static_cast` (round to nearest even, as numpy/ml_dtypes casts), `is_float_type`, `sizeinbytes`, `finfo`, and the
  packed x4 dtypes as nki_lite.nki.language names them;
- registers `test.utils.scripts.remote_lock_scripts` and `test.utils.perf_analysis_private`, which the
  public repository's harness imports but does not ship (remote hardware locking, profile analysis:
  unused in simulation mode).
With $NKILIB_FAST_MX_INPUTS=1 it replaces the library's MX test-data generator by a vectorised one
(tutorials/nkilib_fast_inputs.py: same distribution, another random stream).
It then writes one JSON line per test (nodeid, outcome, first error line) to $NKI_LITE_CORPUS_RESULTS,
and one per failed collection. It skips nothing itself: the library's conftest skips its large-shape
simulation cases, and `-m fast` picks its manual test vectors.
"""
from __future__ import annotations

import json
import os
import sys
import types

import numpy as np

import nki_lite.compat

nki_lite.compat.install()     # both dialects: router_topk.py imports neuronxcc.nki.typing beside `import nki`

import ml_dtypes  # noqa: E402
import nki_lite.nki as _nki  # noqa: E402
import nki_lite.nki.isa  # noqa: E402,F401
import nki_lite.nki.frontend as _nki_frontend  # noqa: E402
from nki_lite.nki.launch import as_kernel  # noqa: E402  (`cpu_simulate(k)[lnc](**inputs)`: a launchable kernel)


class _Proxy(types.ModuleType):
    """A `nki_cpu_simulator.nki...` module: its own submodule attributes, everything else from nki_lite's
    module (`import a.b.c as x` looks `c` up as an attribute of a.b, so the stand-ins need their own)."""

    def __init__(self, name: str, target=None, **attrs):
        super().__init__(name)
        self.__path__ = []
        self.__dict__.update(attrs)
        object.__setattr__(self, "_target", target)
        sys.modules[name] = self

    def __getattr__(self, name):
        if self._target is None or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self._target, name)


def _module(name: str, **attrs) -> types.ModuleType:
    m = types.ModuleType(name)
    m.__dict__.update(attrs)
    sys.modules[name] = m
    return m


def _install_simulator() -> None:
    root = "nki_cpu_simulator.nki"
    # trace-only tests (test_tensor_view.py) compile through `nki.compiler.frontend`: nki_lite's trace + verify;
    # registered under the aliased name too (the conftest aliases nki.compiler, not its submodules)
    _frontend = _Proxy(root + ".compiler.frontend", _nki_frontend)
    sys.modules["nki.compiler.frontend"] = _frontend
    constants = _Proxy(root + ".isa.constants", _nki.isa.constants)
    dtypes = _Proxy(root + ".language.dtypes", _nki.language)
    sim = _Proxy(root, _nki, cpu_simulate=as_kernel,
                 language=_Proxy(root + ".language", _nki.language, dtypes=dtypes),
                 isa=_Proxy(root + ".isa", _nki.isa, constants=constants),
                 typing=_Proxy(root + ".typing", _nki.typing), compiler=_Proxy(root + ".compiler", _nki.compiler, frontend=_frontend),
                 tensor=_Proxy(root + ".tensor", None, NkiTensor=_nki.language.NkiTensor),
                 builtin=_Proxy(root + ".builtin", None))
    _Proxy("nki_cpu_simulator", None, nki=sim)


def _np_dtype(dtype):
    if isinstance(dtype, str):
        return np.dtype(getattr(ml_dtypes, dtype, dtype))
    return np.dtype(dtype)


def _static_cast(x, dtype):
    """astype, and for the MX x4 dtypes (nki_lite/numerics/mx.py containers) packing / unpacking: values ->
    x4 rounds each value to the element format (RNE) and packs 4 consecutive ones along the last axis; x4 ->
    a float dtype decodes every code exactly (the last axis grows 4x)."""
    from nki_lite.core import dtypes as D
    from nki_lite.numerics import mx as MX
    x = np.asarray(x)
    want = _np_dtype(dtype)
    target, source = _mx_name(want), _mx_name(x.dtype)
    if source is not None and target is None:
        vals = MX.decode(x.view(D.storage(source)), source)
        return vals.reshape(*vals.shape[:-2], -1).astype(want)
    if target is not None and source is None:
        codes = x.astype(getattr(ml_dtypes, MX.X4[target][0])).view(np.uint8)
        return MX.pack(codes.reshape(*codes.shape[:-1], -1, 4), target).view(want)
    return x.astype(want)


def _mx_name(dt):
    from nki_lite.core import dtypes as D
    try:
        name = D.name_of(dt)
    except D.UnknownDType:
        return None
    return name if name in D.MX_X4 else None


def _sizeinbytes(dtype) -> int:
    return _np_dtype(dtype).itemsize


def _finfo(dtype):
    try:
        return np.finfo(_np_dtype(dtype))
    except ValueError:
        return ml_dtypes.finfo(_np_dtype(dtype))


def _is_float_type(dtype) -> bool:
    dt = _np_dtype(dtype)
    return dt.kind == "f" or dt.kind == "V" and dt.itemsize <= 2   # ml_dtypes' floats are kind 'V'


def _install_neuron_dtypes() -> None:
    if "neuron_dtypes" in sys.modules:
        return
    nl = _nki.language
    _module("neuron_dtypes", static_cast=_static_cast, is_float_type=_is_float_type, sizeinbytes=_sizeinbytes, finfo=_finfo,
            bfloat16=ml_dtypes.bfloat16, float8_e4m3fn=ml_dtypes.float8_e4m3fn, float8_e5m2=ml_dtypes.float8_e5m2,
            **{n: getattr(nl, n) for n in ("float8_e4m3fn_x4", "float8_e5m2_x4", "float4_e2m1fn_x4")})
    # test_qkv_cte.py's references import the compiler's copy of the same cast
    for name in ("neuronxcc.starfish", "neuronxcc.starfish.support"):
        _module(name, __path__=[])
    _module("neuronxcc.starfish.support.dtype", static_cast=_static_cast)


def _install_lock_scripts() -> None:
    """The library's test/utils/core_lock_client.py imports test/utils/scripts/remote_lock_scripts.py, which
    the public repository does not ship (remote hardware locking; unused in simulation mode): a stand-in
    with the two names it imports."""
    import enum

    class LockStatus(enum.Enum):
        ALLOCATED = 0
        DRAINED = 1
        FLOCK_TIMEOUT = 2

        @property
        def exit_code(self) -> int:
            return self.value

        @classmethod
        def from_exit_code(cls, rc):
            return cls(rc)

    class LockResult:
        def __init__(self, status=None, **kwargs):
            self.status = status
            self.__dict__.update(kwargs)

        @classmethod
        def from_json(cls, text):
            return cls(**json.loads(text))

    _module("test.utils.scripts", __path__=[])
    _module("test.utils.scripts.remote_lock_scripts", LockStatus=LockStatus, LockResult=LockResult)
    # test/utils/test_orchestrator.py imports the unshipped perf_analysis_private (profile traces, hardware only)
    _module("test.utils.perf_analysis_private", analyze_trace=lambda *a, **k: None)


_install_simulator()
_install_neuron_dtypes()
_install_lock_scripts()


# One JSON line per test and per failed collection, as for the legacy corpus (same format and variable).
from nki_lite.tools.corpus_plugin import pytest_collectreport, pytest_runtest_logreport  # noqa: E402,F401


def pytest_collection(session):
    """The library's Orchestrator (test/utils/test_orchestrator.py at d2ad3a5) reads `self._compiled_kernel`
    after every inference, but sets it only when it compiles, which simulation mode skips: every simulated
    run would end in AttributeError after the kernel ran. A class-level None (nothing compiled) is what
    that code checks for."""
    from test.utils.test_orchestrator import Orchestrator
    if not hasattr(Orchestrator, "_compiled_kernel"):
        Orchestrator._compiled_kernel = None
    if os.environ.get("NKILIB_FAST_MX_INPUTS") == "1":    # before the test modules bind the generator
        import nkilib_fast_inputs
        nkilib_fast_inputs.install()


import pytest  # noqa: E402


SLOW_SKIP = "slow simulation"     # the reason the library's conftest gives (test/utils/simulation_setup.py)


def _is_slow_skip(mark) -> bool:
    return mark.name == "skip" and SLOW_SKIP in str(mark.kwargs.get("reason", (mark.args or [""])[0]))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config, items):
    """$NKILIB_MAX_CASES=K keeps, per test file, its first K `fast` cases that the library does not skip
    (the documented small subset check_nkilib.py runs by default: the full fast set takes hours on
    two shared cores); the rest are deselected. Unset or 0: every case.
    A file whose fast cases the library skips, every one, as too large for AWS's CPU simulator (its
    "slow simulation" skip; NKILIB_SIMULATION_RUN_ALL=1 lifts it for every file) keeps its first K
    of them unskipped when $NKILIB_UNSKIP_SLOW_FILES=1: the skip is about that simulator's speed,
    and otherwise the kernel would not be checked at all."""
    k = int(os.environ.get("NKILIB_MAX_CASES", "0") or 0)
    if k <= 0:
        return
    fast = [it for it in items if it.get_closest_marker("fast") is not None]
    runnable_files = {it.fspath for it in fast if it.get_closest_marker("skip") is None}
    if os.environ.get("NKILIB_UNSKIP_SLOW_FILES") == "1":
        unskipped: dict = {}
        for it in fast:
            slow = any(_is_slow_skip(m) for m in it.own_markers)
            if it.fspath not in runnable_files and slow and unskipped.get(it.fspath, 0) < k:
                it.own_markers[:] = [m for m in it.own_markers if not _is_slow_skip(m)]
                unskipped[it.fspath] = unskipped.get(it.fspath, 0) + 1
    kept, dropped, per_file = [], [], {}
    for item in items:
        runnable = item.get_closest_marker("fast") is not None and item.get_closest_marker("skip") is None
        n = per_file.get(item.fspath, 0)
        if runnable and n < k:
            per_file[item.fspath] = n + 1
            kept.append(item)
        else:
            dropped.append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
    items[:] = kept
