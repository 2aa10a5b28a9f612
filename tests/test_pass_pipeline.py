"""The pass pipeline (lower/passes/pipeline.py) and the LLVM emitter's explicit context
(lower/llvm/context.py): passes run in the listed order through one list, `inspect_ir(after=...)`
shows the IR after each of them, and rules change the emission mode only through `em.context`."""
import ast
import glob
import os

import numpy as np
import pytest

import nki_lite as nki
import nki_lite.isa as nisa
import nki_lite.language as nl
from nki_lite import errors
from nki_lite.core import ir
from nki_lite.lang.trace import trace
from nki_lite.lower.llvm import codegen
from nki_lite.lower.llvm.target import jit_supported
from nki_lite.lower.passes import pipeline

from .test_jit_differential import run_both

F32 = np.float32


@nki.jit
def _every_pass(x, z):
    """One kernel that each pass rewrites: an empty copy (drop-empty), `r[...] = exp(t)` (fold-copies),
    a mask that always holds (drop-true-masks) on a load its reader can read through (forward-loads),
    `+=` matmul into a fresh nl.ndarray PSUM tile (accumulation-start), a block tensor declared before
    the loop whose blocks each belong to one iteration (compact-blocks)."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    zo = nl.ndarray(z.shape, dtype=z.dtype, buffer=nl.shared_hbm)
    mo = nl.ndarray((64, 64), dtype=x.dtype, buffer=nl.shared_hbm)
    nl.store(zo, nl.load(z))
    ps = nl.ndarray((64, 64), dtype=nl.float32, buffer=nl.psum)
    xs = nl.load(x[0:128, 0:64])
    ps += nisa.nc_matmul(xs, xs)
    nl.store(mo, nl.copy(ps))
    ip, ic = nl.mgrid[0:128, 0:64]
    r = nl.ndarray((2, nl.par_dim(128), 64), dtype=x.dtype, buffer=nl.sbuf)
    for i in nl.affine_range(2):
        valid = i * 128 + ip < 256
        t = nl.load(x[i * 128 + ip, ic], mask=valid)
        r[i] = nl.exp(t)
        nl.store(out[i * 128 + ip, ic], value=r[i], mask=valid)
    return out, zo, mo


def _args():
    return [np.random.default_rng(0).standard_normal((256, 64)).astype(F32), np.zeros((0, 64), F32)]


def _traced(kernel, args):
    return trace(kernel.fn, kernel.bind(args, {}), kernel.grid, "trn2")


def _by_hand(kernel: ir.Kernel, name: str) -> ir.Kernel:
    """The passes of PIPELINE up to `name` that apply to name's backends, applied one by one."""
    last = pipeline.find(name)
    for p in pipeline.PIPELINE:
        if last.backends <= p.backends:
            kernel = p.run(kernel, {})
        if p is last:
            return kernel
    raise AssertionError(name)


def test_pipeline_lists_shared_passes_before_backend_passes():
    assert pipeline.NAMES == tuple(p.name for p in pipeline.PIPELINE)
    assert len(set(pipeline.NAMES)) == len(pipeline.NAMES)
    shared = [p.shared for p in pipeline.PIPELINE]
    assert shared == sorted(shared, reverse=True)           # every shared pass precedes every specific one
    # a backend-specific pass must be run by that backend: the code generator and the interpreter
    # (runtime/interpreter.py through pipeline.prepared) call run_backend; the engine model does not
    assert {b for p in pipeline.PIPELINE if not p.shared for b in p.backends} <= {"llvm", "interpret"}


@pytest.mark.parametrize("name", pipeline.NAMES)
def test_inspect_ir_after_each_pass(name):
    args = _args()
    text = _every_pass.inspect_ir(*args, after=name)
    assert text == ir.format(_by_hand(_traced(_every_pass, args), name))
    k = pipeline.NAMES.index(name)
    before = (ir.format(_traced(_every_pass, args)) if k == 0
              else _every_pass.inspect_ir(*args, after=pipeline.NAMES[k - 1]))
    assert text != before, f"{name} changed nothing in a kernel written for it"


def test_each_pass_does_its_rewrite():
    args = _args()
    raw = _traced(_every_pass, args)
    after = {name: _by_hand(raw, name) for name in pipeline.NAMES}
    count = ir.count_instrs
    assert count(after["drop-empty"]) < count(raw)                     # the empty load and store
    assert len(after["fold-copies"].buffers) < len(after["drop-empty"].buffers)   # exp's temporary
    memsets = [sum(i.op == "memset" for i, _ in ir.walk(after[n].body)) for n in ("fold-copies", "accumulation-start")]
    assert memsets == [0, 1]                                            # the PSUM accumulator starts at zero
    masked = [sum(i.mask is not None for i, _ in ir.walk(after[n].body)) for n in ("fold-copies", "drop-true-masks")]
    assert masked[0] > 0 and masked[1] == 0
    assert any(i.attr("forwarded") for i, _ in ir.walk(after["forward-loads"].body))
    sbuf = [sorted(b.shape for b in after[n].buffers if b.space == ir.Space.SBUF)
            for n in ("accumulation-start", "compact-blocks")]
    assert (2, 128, 64) in sbuf[0] and (2, 128, 64) not in sbuf[1]     # r holds one block at a time


def test_inspect_ir_without_after_is_what_every_backend_sees():
    args = _args()
    last_shared = [p.name for p in pipeline.PIPELINE if p.shared][-1]
    assert _every_pass.inspect_ir(*args) == _every_pass.inspect_ir(*args, after=last_shared)


def test_unknown_pass_name_is_a_clear_error():
    with pytest.raises(errors.NkiLiteError) as e:
        _every_pass.inspect_ir(*_args(), after="fold-copy")
    assert e.value.name == "argument"
    for name in pipeline.NAMES:
        assert name in str(e.value)
    assert os.path.basename(e.value.loc.file) == os.path.basename(__file__)


def test_unknown_pass_name_fails_before_tracing():
    with pytest.raises(errors.NkiLiteError) as e:
        _every_pass.inspect_ir(after="nope")              # no arguments: tracing would fail differently
    assert "unknown pass 'nope'" in str(e.value)


@pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")
def test_runtime_and_codegen_run_the_pipeline_in_its_order(monkeypatch):
    calls = []

    def recording(p):
        def run(kernel, origin):
            calls.append(p.name)
            return p.run(kernel, origin)
        return pipeline.Pass(p.name, run, p.backends, p.doc)
    monkeypatch.setattr(pipeline, "PIPELINE", tuple(recording(p) for p in pipeline.PIPELINE))
    monkeypatch.setenv("NKI_LITE_DISK_CACHE", "0")

    @nki.jit
    def fresh(x, z):                          # a kernel no cache has seen
        return _every_pass.fn(x, z)
    run_both(fresh, _args())
    # the trace runs the shared passes once; the interpreter its own (once per traced kernel), the JIT
    # compile the llvm passes (the disk cache's layout check, when on, runs them too): each in the
    # list's order
    of = lambda backend: [p.name for p in pipeline.PIPELINE if not p.shared and backend in p.backends]  # noqa: E731
    want = [p.name for p in pipeline.PIPELINE if p.shared] + of("interpret") + of("llvm")
    assert calls[:len(want)] == want
    shared = [p.name for p in pipeline.PIPELINE if p.shared]
    assert calls.count(shared[0]) == 1


@pytest.mark.skipif(not jit_supported(), reason="the LLVM JIT does not run on this platform")
def test_every_pass_kernel_jit_matches_interpreter():
    x, z = _args()
    out, zo, mo = run_both(_every_pass, [x, z])      # JIT (every pass) == interpreter, bit for bit
    assert zo.shape == (0, 64)
    np.testing.assert_allclose(out, np.exp(x), rtol=1e-6)
    xs = x[:128, :64].astype(np.float64)
    np.testing.assert_allclose(mo, xs.T @ xs, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- the emitter's context
def _emitter():
    return codegen.Emitter(_traced(_every_pass, _args()), debug=False)


def test_context_changes_and_restores_the_mode():
    em = _emitter()
    assert (em.W, em.vaxis, em.row) == (1, None, None)
    with em.context(W=16, vaxis="@1"):
        assert (em.W, em.vaxis) == (16, "@1")
        with em.context(row="%r"):
            assert (em.W, em.vaxis, em.row) == (16, "@1", "%r")
        assert em.row is None
    assert (em.W, em.vaxis) == (1, None)
    with pytest.raises(RuntimeError):
        with em.context(W=16):
            raise RuntimeError("boom")
    assert em.W == 1


def test_mode_is_read_only_outside_context():
    em = _emitter()
    for attr in ("W", "vaxis", "row", "capturing", "fused"):
        with pytest.raises(AttributeError):
            setattr(em, attr, None)
    with pytest.raises(Exception):
        em.cx.W = 16                                  # EmitContext is frozen


MODE = {"W", "vaxis", "row", "capturing", "fused", "in_region", "cx"}


def test_no_llvm_module_assigns_the_mode_by_hand():
    """Rules and helpers change the emission mode only through `em.context(...)` (codegen.py's
    `context` is the one place that swaps `cx`)."""
    root = os.path.dirname(codegen.__file__)
    found = []
    for path in sorted(glob.glob(os.path.join(root, "*.py"))):
        tree = ast.parse(open(path, encoding="utf-8").read())
        for fn in ast.walk(tree):
            if not isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if os.path.basename(path) == "codegen.py" and fn.name in ("context", "__init__"):
                continue
            for node in ast.walk(fn):
                targets = (node.targets if isinstance(node, ast.Assign) else
                           [node.target] if isinstance(node, (ast.AugAssign, ast.AnnAssign)) else [])
                for t in targets:
                    for el in (t.elts if isinstance(t, ast.Tuple) else [t]):
                        if isinstance(el, ast.Attribute) and el.attr in MODE:
                            found.append(f"{os.path.basename(path)}:{node.lineno} {fn.name} sets .{el.attr}")
    assert not found, found
