"""Kernel -> LLVM IR text: buffers, the SPMD grid, loops, accesses, masks, bounds checks, status.

Contract:
- `generate(kernel, debug=False) -> Generated` returns the module text of one function
      i32 @nkl_kernel(ptr %args, ptr %arena, ptr %status, ptr %print_cb)
  `args` holds one pointer per *argument buffer* (`Generated.arg_buffers`: the kernel's inputs,
  outputs and constants, in that order); every other buffer (SBUF, PSUM, HBM scratch) lives in the
  caller-provided `arena` at fixed offsets (`Generated.arena_bytes`, 64-byte aligned). The IR holds
  no absolute addresses, so the text is a cache key.
- Programs of the SPMD grid run in row-major order inside the function, like the interpreter.
- Every access is bounds-checked: once per instruction execution with the affine range of each
  index; instructions with a mask fall back to per-element checks of the masked-in elements. A
  violation stores (code, site, operand, dim, lo, hi, loop values...) into `status` and returns 1.
- On x86-64 the function sets MXCSR to the IEEE default (round to nearest, no FTZ/DAZ) on entry and
  restores the caller's value on exit, so results do not depend on the process's FP state.
- Op semantics are emitted by the "llvm" rules (lower/llvm/rules_*.py) through the `Emitter`
  helpers here; they mirror runtime/interpret_*.py step for step.
- `generate` first runs the pipeline's JIT-only passes (lower/passes/pipeline.py `run_backend`).
  How a rule is being emitted (vector width, row-major row, fusion) is the immutable `em.cx`
  (context.py), read through `em.W`, `em.vaxis`, ... and changed only by `with em.context(...)`;
  the function being written is `em.fn` (functions.py frames it).
"""
from __future__ import annotations

import contextlib
import platform
from dataclasses import dataclass, replace

from ...core import dtypes as D
from ...core import ir
from ...core.affine import Affine, Mask, axis_var
from ...core.bits import CANON_NAN
from ...core.ops import OPS
from ..parallel import private_buffers, program_space, regions
from ..passes.pipeline import run_backend
from . import convert as CV
from . import functions as F
from . import launch_plan
from .arena import layout
from .context import EmitContext, Function, LoopEnv, Module
from .fusion import emit_run, plan, read_counts
from .matmul_chain import Chain, group as matmul_chains
from .matmul_chain import emit as emit_chain
from .irbuilder import FnBuilder, f32, f32_bits
from .parts import emit_call, split
from .row_private import loop_extents, touch_counts
from .rowmajor import row_local
from .rules_registers import dynamic_loop
from ..analysis.accesses import roots_with_views

from .abi import (STATUS_DISPATCH, STATUS_LOOP_WORDS, STATUS_LOOPS, STATUS_PHASES,  # noqa: E402,F401
                  STATUS_PRIVATE_ARENA, STATUS_PROG_HI, STATUS_PROG_LO, STATUS_REGION_ARENA, STATUS_REGION_ARGS,
                  STATUS_REGION_ENV, STATUS_STOP, STATUS_WORDS)
ERR_BOUNDS = 1
# Kernels with more (static, non-alloc) instructions than this fence their NaN canonicalisations (canon()):
# LLVM's compile time per op halves; kernels this short keep their best code.
FENCE_MIN_INSTRUCTIONS = 256


@dataclass
class Generated:
    text: str
    arg_buffers: tuple[str, ...]
    arena_bytes: int
    sites: tuple[ir.Instr, ...]
    loop_names: tuple[tuple[str, ...], ...]     # per site: names of the env values stored on error
    needs_print: bool = False
    region_trips: tuple[int, ...] = ()           # per parallel region k (@nkl_region_<k>): its trip count
    plan: object = None                          # the runtime's LaunchPlan (launch_plan.py), set by generate()


class _ModeField:
    """A read-only view of the emitter's current EmitContext field of the same name (em.W is
    em.cx.W); it changes only through `with em.context(...)`."""

    def __set_name__(self, owner, name: str) -> None:
        self.name = name

    def __get__(self, em, owner=None):
        return self if em is None else getattr(em.cx, self.name)

    def __set__(self, em, value) -> None:
        raise AttributeError(f"{self.name} is the emission mode's: change it with `with em.context(...)`")


class Emitter:
    """The code generator of one kernel. State in three explicit groups (context.py): `cx` the
    emission mode (immutable, `with em.context(...)`), `fn` the function being written, `mod` what
    the functions add to the module; the rest is fixed per kernel (buffers, arena layout)."""

    def __init__(self, kernel: ir.Kernel, debug: bool, vectorize: bool = True, origin: dict | None = None):
        self.k = kernel
        self.debug = debug
        self.vectorize = vectorize
        self.bufs = kernel.buffer_map
        self.fn = Function(FnBuilder(), set())        # the function being written (functions.begin)
        self.cx = EmitContext()                      # the emission mode; changed only by context()
        self.mod = Module()                          # what the functions add to the module
        self.arg_buffers = tuple(b.name for b in kernel.buffers
                                 if b.space == ir.Space.HBM and b.base is None and b.kind in ("input", "output", "const"))
        self.origin = origin if origin is not None else {}   # rewritten -> traced instruction
        self.regions: dict = {}                          # id(loop) -> parallel region index
        self.x86 = platform.machine().lower() in ("x86_64", "amd64")
        self.row_value: str | None = None   # a value function's fp32 value, for a row reduction's lanes
        self.reads = read_counts(kernel)
        self.arg_index = {name: k for k, name in enumerate(self.arg_buffers)}
        self.part_weights: dict = {}
        self.touches, self.viewed_roots = touch_counts(kernel), roots_with_views(kernel)
        self.row_private: dict[str, int] = {}    # root -> partition dim, stored as one row (row_private.py)
        self.placed: dict[str, ir.Access] = {}   # row-private tile -> the HBM store destination holding it
        self.extents = loop_extents(kernel)
        self.offsets, off = layout(self)      # tiles with disjoint live ranges share bytes (arena.py)
        self.scratch_offset = off
        instrs = [i for i, _ in ir.walk(kernel.body)]
        self.scratch_bytes = _align(max([_scratch_need(kernel, i) for i in instrs] + [0]))
        self.fence_canon = sum(i.op != "alloc" for i in instrs) > FENCE_MIN_INSTRUCTIONS   # canon()
        self.arena_bytes = off + self.scratch_bytes

    # ---- the emission mode (context.py): read-only here, changed with `with em.context(...)`
    @contextlib.contextmanager
    def context(self, **changes):
        """Emit the block's code with these EmitContext fields changed; the previous context comes
        back on exit (exceptions included)."""
        saved = self.cx
        self.cx = replace(saved, **changes)
        try:
            yield self.cx
        finally:
            self.cx = saved

    @property
    def b(self) -> FnBuilder:
        return self.fn.b

    # em.W, em.vaxis, ...: the current EmitContext's fields, read-only on the emitter
    W = _ModeField()
    vaxis = _ModeField()
    row = _ModeField()
    capturing = _ModeField()
    fused = _ModeField()

    # ---- vector-width helpers (W = 1: plain scalars)
    def vt(self, base: str) -> str:
        return base if self.W == 1 else f"<{self.W} x {base}>"

    def splat(self, const: str, base: str) -> str:
        return const if self.W == 1 else f"splat ({base} {const})"

    def sfx(self, base: str) -> str:
        """Intrinsic type suffix: f32 / v16f32, i64 / v16i64."""
        s = {"float": "f32", "i64": "i64", "i32": "i32"}[base]
        return s if self.W == 1 else f"v{self.W}{s}"

    def broadcast(self, scalar: str, base: str) -> str:
        if self.W == 1:
            return scalar
        v = self.b.op(f"insertelement <{self.W} x {base}> poison, {base} {scalar}, i64 0")
        return self.b.op(f"shufflevector <{self.W} x {base}> {v}, <{self.W} x {base}> poison, "
                         f"<{self.W} x i32> zeroinitializer")

    def vcoeff(self, acc: ir.Access) -> int:
        """Coefficient of the vector axis in an access's flat index (1 contiguous, 0 broadcast)."""
        return self.flat_index(acc).coeff(self.vaxis) if self.vaxis else 0

    def partitions(self, n: int, hint: str = "p"):
        """Loop over the partition axis (axis 0) of an instruction — or, inside a row-major body
        (lower/llvm/rowmajor.py), just the current row."""
        if self.row is not None:
            return contextlib.nullcontext(self.row)
        return self.b.loop(n, hint) if n > 1 else contextlib.nullcontext("0")

    def entry_alloca(self, ty: str, hint: str = "a") -> str:
        name = f"%{hint}.{len(self.fn.allocas)}"
        self.fn.allocas.append(f"  {name} = alloca {ty}, align 64")
        return name

    # ---------------------------------------------------------------- module pieces
    def use(self, fn_and_text: tuple[str, str]) -> str:
        """Include a helper function once; its `declare` lines join the module's (deduplicated) set."""
        name, text = fn_and_text
        if name not in self.mod.functions:
            body = []
            for line in text.splitlines():
                (self.mod.declares.add(line.strip()) if line.startswith("declare ") else body.append(line))
            self.mod.functions[name] = "\n".join(body) + "\n"
        return name

    def declare(self, line: str) -> None:
        self.mod.declares.add(line)

    # ---------------------------------------------------------------- buffers and addresses
    def root(self, name: str) -> str:
        b = self.bufs[name]
        return b.base or name

    def base_ptr(self, name: str) -> str:
        root = self.root(name)
        p = self.fn.ptrs.get(root)
        if p is None:                             # first use in this function: made in its entry block
            p = self.b.tmp("buf")
            k = self.arg_index.get(root)
            if k is not None:
                q = self.b.tmp()
                self.fn.ptr_lines += [f"  {q} = getelementptr inbounds ptr, ptr %args, i64 {k}",
                                   f"  {p} = load ptr, ptr {q}, align 8"]
            else:
                base = "%parena" if root in self.fn.private else "%arena"
                self.fn.ptr_lines.append(f"  {p} = getelementptr inbounds i8, ptr {base}, i64 {self.offsets[root]}")
            self.fn.ptrs[root] = p
        return p

    def storage(self, name: str) -> str:
        return CV.STORAGE_LLVM[self.bufs[name].dtype]

    def dtype(self, acc) -> str:
        return self.bufs[acc.buffer].dtype if isinstance(acc, ir.Access) else acc.dtype

    def affine(self, e: Affine, env: dict) -> str:
        """i64 SSA value of an affine expression (constants fold)."""
        val = None
        for k, c in e.terms:
            v = env[k]
            term = v if c == 1 else self.b.op(f"mul nsw i64 {v}, {c}")
            val = term if val is None else self.b.op(f"add nsw i64 {val}, {term}")
        if val is None:
            return str(e.const)
        if e.const:
            val = self.b.op(f"add nsw i64 {val}, {e.const}")
        return val

    def flat_index(self, acc: ir.Access) -> Affine:
        acc = self.placed.get(acc.buffer, acc)         # a tile held in its store's destination row
        shape = self.bufs[acc.buffer].shape
        skip = self.row_private.get(acc.buffer)        # stored as one partition row: no partition term
        off, stride = Affine(0), 1
        for d in reversed(range(len(shape))):
            if d != skip:
                off = off + acc.index[d].scale(stride)
                stride *= shape[d]
        return off

    def stored_elements(self, name: str) -> int:
        """Elements of storage a root buffer takes (one partition row for a row-private tile)."""
        b = self.bufs[name]
        dim = self.row_private.get(name)
        return b.size if dim is None else b.size // b.shape[dim]

    def elem_ptr(self, acc: ir.Access, env: dict) -> str:
        off = self.affine(self.flat_index(acc), env)
        acc = self.placed.get(acc.buffer, acc)
        return self.b.op(f"getelementptr inbounds {self.storage(acc.buffer)}, ptr {self.base_ptr(acc.buffer)}, i64 {off}")

    def scratch_ptr(self, byte_offset: int = 0) -> str:
        """Per-instruction scratch: in the thread's own (private) arena."""
        return self.b.op(f"getelementptr inbounds i8, ptr %parena, i64 {self.scratch_offset + byte_offset}")

    def load_raw(self, acc: ir.Access, env: dict) -> str:
        if self.fused is not None and acc in self.fused:     # produced earlier in a fused run
            return self.fused[acc]
        ty = self.storage(acc.buffer)
        p = self.elem_ptr(acc, env)
        align = D.itemsize(self.bufs[acc.buffer].dtype)
        if self.W > 1 and self.vcoeff(acc) == 1:
            return self.b.op(f"load <{self.W} x {ty}>, ptr {p}, align {align}")
        if self.W > 1 and self.vcoeff(acc) != 0:
            raise AssertionError(f"vector load of an access strided along the vector axis: {acc}")
        v = self.b.op(f"load {ty}, ptr {p}, align {align}")
        return self.broadcast(v, ty)

    def store_raw(self, acc: ir.Access, env: dict, val: str) -> None:
        ty = self.storage(acc.buffer)
        if self.W > 1 and self.vcoeff(acc) != 1:
            raise AssertionError(f"vector store to an access not contiguous along the vector axis: {acc}")
        p = self.elem_ptr(acc, env)
        self.b.emit(f"store {self.vt(ty)} {val}, ptr {p}, align {D.itemsize(self.bufs[acc.buffer].dtype)}")

    # ---------------------------------------------------------------- values
    def _cv(self, gen, dtype: str, ret: str, arg: str, val: str) -> str:
        fn = self.use(gen(dtype, self.W))
        return self.b.op(f"call {self.vt(ret)} @{fn}({self.vt(arg)} {val})")

    def to_f32(self, raw: str, dtype: str) -> str:
        info = D.INFO[dtype]
        if dtype == "float32":
            return raw
        st = CV.STORAGE_LLVM[dtype]
        return self._cv(CV.decode if info.kind == "f" else CV.f32_from_int, dtype, "float", st, raw)

    def to_i64(self, raw: str, dtype: str) -> str:
        return self._cv(CV.i64_from_int, dtype, "i64", CV.STORAGE_LLVM[dtype], raw)

    def from_f32(self, val: str, dtype: str) -> str:
        info = D.INFO[dtype]
        if dtype == "float32":
            return val
        st = CV.STORAGE_LLVM[dtype]
        return self._cv(CV.encode if info.kind == "f" else CV.int_from_f32, dtype, st, "float", val)

    def from_i64(self, val: str, dtype: str) -> str:
        info = D.INFO[dtype]
        if info.kind in "iub":
            return self._cv(CV.int_from_i64, dtype, CV.STORAGE_LLVM[dtype], "i64", val)
        f = self.b.op(f"sitofp {self.vt('i64')} {val} to {self.vt('float')}")
        return self.from_f32(f, dtype)

    def canon(self, val: str) -> str:
        """NaN -> +qNaN 0x7FC00000 (the contract for arithmetic results)."""
        isnan = self.b.op(f"fcmp uno {self.vt('float')} {val}, zeroinitializer" if self.W > 1
                          else f"fcmp uno float {val}, 0.0")
        out = self.b.op(f"select {self.vt('i1')} {isnan}, {self.vt('float')} "
                        f"{self.splat(f32_bits(CANON_NAN), 'float')}, {self.vt('float')} {val}")
        # Compile time of long kernels (fence_canon, see FENCE_MIN_INSTRUCTIONS): behind a chain of
        # fused ops, each `fcmp uno` makes LLVM's floating-point class analysis (instcombine,
        # EarlyCSE, GVN, instsimplify) walk back through the previous selects, both arms and the
        # condition (exponential up to its depth limit): ~0.6 ms of -O2 per op. An arithmetic fence
        # is an identity that emits no machine code and stops that walk (10^4 chained adds: -O2
        # 6.7 s -> 3.3 s). Bits are unchanged (the fence returns its operand); the price is that
        # LLVM no longer drops a canonicalisation it can prove redundant (chain5 of benchmarks/
        # jit.py: one more compare per 16 elements), so short kernels keep the plain form.
        if not self.fence_canon:
            return out
        fence = f"llvm.arithmetic.fence.{self.sfx('float')}"
        self.declare(f"declare {self.vt('float')} @{fence}({self.vt('float')})")
        return self.b.op(f"call {self.vt('float')} @{fence}({self.vt('float')} {out})")

    def operand(self, o, env: dict, domain: str) -> str:
        """An operand (Access or Imm) as an f32 or i64 compute value (vector when W > 1)."""
        if isinstance(o, ir.Imm):
            if domain == "i64":
                return self.splat(str(int(o.value)), "i64")
            return self.splat(f32(float(o.value)), "float")
        raw = self.load_raw(o, env)
        dt = self.dtype(o)
        return self.to_i64(raw, dt) if domain == "i64" else self.to_f32(raw, dt)

    def store_result(self, acc: ir.Access, env: dict, val: str, domain: str, canon: bool = True) -> None:
        dt = self.dtype(acc)
        if domain == "i64":
            self.store_raw(acc, env, self.from_i64(val, dt))
        else:
            self.store_raw(acc, env, self.from_f32(self.canon(val) if canon else val, dt))

    def convert_raw(self, raw: str, src: str, dst: str) -> str:
        """Data-movement conversion (interpreter `convert`): bits if equal dtypes, int->int wraps,
        otherwise exact widening to fp32 then rounding (no NaN canonicalisation)."""
        if src == dst:
            return raw
        if D.INFO[src].is_int and D.INFO[dst].is_int:
            return self.from_i64(self.to_i64(raw, src), dst)
        return self.from_f32(self.to_f32(raw, src), dst)

    # ---------------------------------------------------------------- masks, loops, bounds
    def mask_value(self, mask: Mask | None, env: dict) -> str | None:
        if mask is None:
            return None
        pred = "true"
        for c in mask.terms:
            v = self.affine(c.expr, env)
            cmp = {"<": "slt", "<=": "sle", ">": "sgt", ">=": "sge", "==": "eq", "!=": "ne"}[c.op]
            t = self.b.op(f"icmp {cmp} i64 {v}, 0")
            pred = t if pred == "true" else self.b.op(f"and i1 {pred}, {t}")
        return pred

    @contextlib.contextmanager
    def elements(self, shape: tuple[int, ...], env: dict, start: int = 0, stop: int | None = None):
        """Nested loops over axes start..stop-1 of `shape` (row-major); yields env with the axis variables."""
        inner = dict(env)
        stop = len(shape) if stop is None else stop
        with contextlib.ExitStack() as stack:
            for a, n in enumerate(shape):
                if a < start or a >= stop:
                    continue
                if n == 1:
                    inner[axis_var(a)] = "0"
                    continue
                inner[axis_var(a)] = stack.enter_context(self.b.loop(n, f"e{a}_"))
            yield inner

    def site(self, instr: ir.Instr, ctx: LoopEnv) -> int:
        self.mod.sites.append(self.origin.get(id(instr), instr))     # the traced instruction (passes/origin.py)
        self.mod.site_names.append(tuple(ctx.names))
        return len(self.mod.sites) - 1

    def fail(self, site: int, ctx: LoopEnv, operand: int, dim: int, lo: str, hi: str,
             code: int = ERR_BOUNDS) -> None:
        """Store a run-time error report into status and return 1 (from any depth): the error
        code, site, operand, dim, two code-specific words (the index range for ERR_BOUNDS) and the
        loop values."""
        vals = [str(code), str(site), str(operand), str(dim), lo, hi]
        for k, v in enumerate(vals):
            p = self.b.op(f"getelementptr inbounds i64, ptr %status, i64 {k}")
            self.b.emit(f"store i64 {v}, ptr {p}, align 8")
        for k, name in enumerate(ctx.names[:STATUS_LOOP_WORDS]):
            p = self.b.op(f"getelementptr inbounds i64, ptr %status, i64 {STATUS_LOOPS + k}")
            self.b.emit(f"store i64 {ctx.env[name]}, ptr {p}, align 8")
        self.b.br("fail_exit")
        self.b.block(self.b.new_label("dead"))

    def check_bounds(self, instr: ir.Instr, ctx: LoopEnv, accesses, shape_of) -> str | None:
        """Range check of every access at instruction entry. Returns an i1 'needs per-element checks'
        flag for masked instructions (None when none can be needed), and fails otherwise."""
        site = self.site(instr, ctx)
        slow = None
        for k, acc in enumerate(accesses):
            if not isinstance(acc, ir.Access):
                continue
            buf = self.bufs[acc.buffer]
            shape = acc.shape
            if 0 in shape:                          # an empty access touches nothing: vacuously in bounds
                continue
            ext = {axis_var(a): n for a, n in enumerate(shape)}
            for d, e in enumerate(acc.index):
                base = Affine(e.const, tuple((v, c) for v, c in e.terms if not v.startswith("@")))
                lo_off = sum(min(0, c * (ext[v] - 1)) for v, c in e.terms if v.startswith("@"))
                hi_off = sum(max(0, c * (ext[v] - 1)) for v, c in e.terms if v.startswith("@"))
                if not base.terms and 0 <= e.const + lo_off and e.const + hi_off < buf.shape[d]:
                    continue       # in bounds whatever the loop values: no code (unrolled kernels have many)
                bv = self.affine(base, ctx.env)
                lo = self.b.op(f"add nsw i64 {bv}, {lo_off}")
                hi = self.b.op(f"add nsw i64 {bv}, {hi_off}")
                bad_lo = self.b.op(f"icmp slt i64 {lo}, 0")
                bad_hi = self.b.op(f"icmp sge i64 {hi}, {buf.shape[d]}")
                bad = self.b.op(f"or i1 {bad_lo}, {bad_hi}")
                if instr.mask is None:
                    with self.b.if_(bad, "oob"):
                        self.fail(site, ctx, k, d, lo, hi)
                else:
                    slow = bad if slow is None else self.b.op(f"or i1 {slow}, {bad}")
        self._last_site = site
        return slow

    def check_element(self, slow: str | None, live: str | None, ctx: LoopEnv, env: dict, accesses) -> None:
        """Per-element bounds check of masked-in elements (only runs when `slow` is true)."""
        if slow is None:
            return
        cond = slow if live is None else self.b.op(f"and i1 {slow}, {live}")
        with self.b.if_(cond, "ec"):
            for k, acc in enumerate(accesses):
                if not isinstance(acc, ir.Access):
                    continue
                buf = self.bufs[acc.buffer]
                for d, e in enumerate(acc.index):
                    v = self.affine(e, env)
                    bad_lo = self.b.op(f"icmp slt i64 {v}, 0")
                    bad_hi = self.b.op(f"icmp sge i64 {v}, {buf.shape[d]}")
                    bad = self.b.op(f"or i1 {bad_lo}, {bad_hi}")
                    with self.b.if_(bad, "eoob"):
                        self.fail(self._last_site, ctx, k, d, v, v)

    # ---------------------------------------------------------------- kernel structure
    def schedule(self, nodes) -> tuple:
        """How `run_nodes` emits a body (shared with the arena layout, arena.py): (P, nodes) for a
        row-major body of P partitions, else (None, items) with items nodes and fused runs (lists)."""
        P = row_local(self, list(nodes)) if self.vectorize and self.row is None else None
        if P is not None:
            return P, list(nodes)
        if not self.vectorize:
            return None, list(nodes)
        return None, matmul_chains(self, plan(list(nodes), self.root))   # PSUM k-chains: matmul_chain.py

    def run_nodes(self, nodes, ctx: LoopEnv) -> None:
        if self.row is None:
            parts = split(self, nodes)
            if len(parts) > 1:                   # a long body: one LLVM function per part (parts.py)
                for part in parts:
                    emit_call(self, part, ctx)
                return
        P, items = self.schedule(nodes)
        if P is not None:
            # every instruction works on its own partition row: run the whole body row by row, so a
            # row's intermediates stay in cache (same per-element computations, same bits)
            # (a row-private tile's debug fill runs at each row: row_private.py)
            def per_row(n) -> bool:
                return not (isinstance(n, ir.Instr) and n.op == "alloc") or n.out.buffer in self.row_private
            for a in nodes:
                if not per_row(a):
                    OPS["alloc"].rules["llvm"](self, a, ctx)
            with self.b.loop(P, "row") as r, self.context(row=r):
                self.run_nodes([n for n in nodes if per_row(n)], ctx)
            return
        for n in items:
            if isinstance(n, Chain):
                emit_chain(self, n, ctx)
                continue
            if isinstance(n, list):
                emit_run(self, n, ctx, self.reads)
                continue
            if isinstance(n, ir.Loop):
                if id(n) in self.regions and not self.cx.in_region:
                    F.dispatch_region(self, n, ctx)
                    continue
                self.serial_loop(n, ctx)
            else:
                rule = OPS[n.op].rules.get("llvm")
                if rule is None:
                    raise NotImplementedError(f"no llvm rule for op {n.op}")
                rule(self, n, ctx)

    def serial_loop(self, n: ir.Loop, ctx: LoopEnv) -> None:
        if n.dynamic:                    # a run-time trip count (rules_registers.py); the variable is 0
            def body(_k):
                F.stop_check(self)
                self.run_nodes(n.body, LoopEnv({**ctx.env, n.var: "0"}, ctx.names + [n.var]))
            dynamic_loop(self, n, ctx, body)
            return
        with self.b.loop(n.trip, "l") as i:
            F.stop_check(self)
            self.run_nodes(n.body, LoopEnv({**ctx.env, n.var: i}, ctx.names + [n.var]))

    def generate(self) -> Generated:
        region_loops = regions(self.k)
        self.regions = {id(lp): k for k, lp in enumerate(region_loops)}
        pvars, extents, pbody, prologue, epilogue = program_space(self.k)
        words = F.begin(self, private_buffers(self.k))
        b = self.b
        # phases (lower/parallel.py): prologue; programs [lo, hi) in row-major linear order — SPMD
        # instances, or the iterations of the kernel's last top-level affine_range loop (the runtime
        # may split the range over threads); epilogue. A set stop flag (another thread failed, or
        # Ctrl-C) ends the run at the next program or loop iteration.
        phases = words["phases"]

        def phase(bit: int):
            masked = b.op(f"and i64 {phases}, {bit}")
            return b.if_(b.op(f"icmp ne i64 {masked}, 0"), f"ph{bit}_")
        with phase(1):
            self.run_nodes(prologue, LoopEnv({}, []))
        count = b.op(f"sub nsw i64 {words['hi']}, {words['lo']}")
        with phase(2), b.loop(count, "g") as i:
            lin = b.op(f"add nsw i64 {i}, {words['lo']}")
            F.stop_check(self)
            env, rem = {}, lin
            for g in reversed(range(len(pvars))):
                env[pvars[g]] = b.op(f"urem i64 {rem}, {extents[g]}") if g > 0 else rem
                if g > 0:
                    rem = b.op(f"udiv i64 {rem}, {extents[g]}")
            self.run_nodes(pbody, LoopEnv(env, list(pvars)))
        with phase(4):
            self.run_nodes(epilogue, LoopEnv({}, []))
        text = ["; nki_lite kernel " + self.k.name, F.end(self, "nkl_kernel", args_noalias=True)]
        trips = []
        for k, loop in enumerate(region_loops):
            if k not in self.mod.region_names:         # not reached by the code generator: never dispatched
                trips.append(0)
                continue
            text.append(F.region_function(self, k, loop))
            trips.append(loop.trip)
        text += self.mod.part_texts
        text += sorted(self.mod.declares)
        text += list(self.mod.functions.values())
        return Generated("\n".join(text) + "\n", self.arg_buffers, self.arena_bytes, tuple(self.mod.sites),
                         tuple(self.mod.site_names), self.mod.needs_print, tuple(trips))


def _align(n: int, a: int = 64) -> int:
    return (n + a - 1) // a * a


def _scratch_need(kernel: ir.Kernel, instr: ir.Instr) -> int:
    """Bytes of per-instruction scratch (fp32 matmul accumulators, two-phase temporaries)."""
    from .rules_common import scratch_bytes
    return scratch_bytes(kernel, instr)


def layout_of(kernel: ir.Kernel, debug: bool = False) -> tuple[tuple[str, ...], int]:
    """(argument buffers, arena bytes) that `generate(kernel, debug)` produces, without emitting code
    (the disk cache checks a stored entry's metadata against them)."""
    from . import rules_common, rules_compute, rules_data, rules_gather, rules_matmul, rules_reduce  # noqa: F401
    from . import rules_partition, rules_rng, rules_select  # noqa: F401 - issue #13 batch 1
    from . import rules_indirect, rules_mx  # noqa: F401 - indirect DMA, dynamic copies; MX formats
    em = Emitter(run_backend(kernel, "llvm")[0], debug)
    return em.arg_buffers, em.arena_bytes


def generate(kernel: ir.Kernel, debug: bool = False, vectorize: bool = True) -> Generated:
    from . import rules_common, rules_compute, rules_data, rules_gather, rules_matmul, rules_reduce  # noqa: F401
    from . import rules_partition, rules_rng, rules_select  # noqa: F401 - issue #13 batch 1
    from . import rules_indirect, rules_mx  # noqa: F401 - indirect DMA, dynamic copies; MX formats
    prepared, origin = run_backend(kernel, "llvm")
    gen = Emitter(prepared, debug, vectorize, origin).generate()
    gen.plan = launch_plan.build(kernel, debug, gen)     # what the runtime executes (never re-derives)
    return gen
