"""The error registry: every diagnosable mistake has a code, a class and a default hint.

Contract:
- Every exception nki_lite raises on purpose derives from `NkiLiteError` and from the builtin a
  caller would expect (`ValueError`, `TypeError`, `IndexError`, `MemoryError`, ...), so generic
  `except ValueError` keeps working.
- `make(code_name, message, loc=..., hint=...)` builds the registered class for a code; the text
  names the code, the kernel's file:line:col, an excerpt with a caret, the hint and a docs anchor.
- `ERRORS` is the single table the docs page (docs/errors.md) is generated from
  (`python -m nki_lite.errors > docs/errors.md`), so code and docs cannot drift.
"""
from __future__ import annotations

from dataclasses import dataclass

from .loc import Loc, UNKNOWN_LOC


class NkiLiteError(Exception):
    """Base of every nki_lite error. Attributes: code, name, loc, hint, summary."""

    code = "NL-E000"
    name = "error"

    def __init__(self, message: str, *, loc: Loc | None = None, hint: str | None = None,
                 code: str | None = None, name: str | None = None, notes: tuple[str, ...] = ()):
        self.message = message
        self.loc = loc or UNKNOWN_LOC
        self.hint = hint
        self.notes = tuple(notes)
        if code:
            self.code = code
        if name:
            self.name = name
        super().__init__(self._render())

    def _render(self) -> str:
        out = [f"[{self.code} {self.name}] {self.message}"]
        if self.loc is not UNKNOWN_LOC and self.loc.line > 0:
            out.append(f"  --> {self.loc}")
            src = self.loc.source_line()
            if src:
                gutter = " " * len(str(self.loc.line))
                width = max(1, (self.loc.end_col - self.loc.col) if self.loc.end_col > self.loc.col else 1)
                out.append(f"{gutter} |")
                out.append(f"{self.loc.line} | {src}")
                out.append(f"{gutter} | {' ' * self.loc.col}{'^' * width}")
        out.extend(self.notes)
        if self.hint:
            out.append(f"hint: {self.hint}")
        out.append(f"docs: docs/errors.md#{self.code.lower()}")
        return "\n".join(out)

    def __str__(self) -> str:  # SyntaxError overrides __str__; keep ours everywhere
        return self._render()


class ShapeError(NkiLiteError, ValueError):
    pass


class KernelDTypeError(NkiLiteError, TypeError):
    pass


class MemorySpaceError(NkiLiteError, TypeError):
    pass


class MemoryCapacityError(NkiLiteError, MemoryError):
    pass


class IndexOutOfBoundsError(NkiLiteError, IndexError):
    pass


class DependencyError(NkiLiteError, ValueError):
    pass


class ImmutableParameterError(NkiLiteError, TypeError):
    pass


class OutputNotWrittenError(NkiLiteError, ValueError):
    pass


class KernelSyntaxError(NkiLiteError, SyntaxError, TypeError):
    pass


class ArgumentError(NkiLiteError, TypeError):
    pass


class UninitializedReadError(NkiLiteError, ValueError):
    pass


class UnsupportedError(NkiLiteError, NotImplementedError):
    pass


class KernelFloatingPointError(NkiLiteError, FloatingPointError):
    pass


@dataclass(frozen=True)
class ErrorCode:
    code: str
    name: str
    cls: type
    summary: str
    hint: str


_TABLE = [
    # code, name, class, summary, default hint
    ("NL-E101", "partition_limit", ShapeError, "a tile's partition dimension exceeds the target's partition count",
     "split the partition axis into a loop over 128-row tiles (nl.affine_range) and index x[i*128 + ip, ...]"),
    ("NL-E102", "free_size_limit", ShapeError, "an instruction's free size exceeds its per-instruction limit",
     "tile the free dimension into chunks within the limit"),
    ("NL-E103", "shape_mismatch", ShapeError, "operand shapes are incompatible for this operation",
     "make the shapes agree; for a partition broadcast call nl.broadcast_to explicitly"),
    ("NL-E104", "rank", ShapeError, "a tile or index has too few or too many dimensions",
     "on-chip tiles are at least 2-D: use nl.arange(n)[:, None] for the partition index"),
    ("NL-E105", "matmul_shape", ShapeError, "matmul operand shapes violate the Tensor Engine rules",
     "stationary is [K<=128, M<=128], moving is [K<=128, N<=512], the output is [M, N] in PSUM"),
    ("NL-E106", "reshape", ShapeError, "a reshape changes the element count or is not allowed here",
     "reshape HBM tensors only, keeping the element count"),
    ("NL-E201", "dtype", KernelDTypeError, "an operand's dtype is not allowed for this operation",
     "cast with nl.copy(x, dtype=...) or pass dtype= to the op"),
    ("NL-E202", "unknown_dtype", KernelDTypeError, "a value is not a dtype nki_lite knows",
     "use nl.float32, nl.bfloat16, nl.float16, nl.float8_e4m3, nl.int32, ... or the numpy/ml_dtypes equivalents"),
    ("NL-E301", "memory_space", MemorySpaceError, "an operand is in the wrong memory (HBM/SBUF/PSUM)",
     "DMA (nl.load / nl.store) moves data between HBM and SBUF; compute reads SBUF or PSUM"),
    ("NL-E401", "sbuf_capacity", MemoryCapacityError, "live SBUF tiles exceed the per-partition capacity",
     "shrink tiles, reuse buffers across iterations or split the work"),
    ("NL-E402", "psum_capacity", MemoryCapacityError, "live PSUM tiles exceed capacity or a tile spans banks",
     "a PSUM tile holds at most 2 KiB per partition (512 fp32); evict results to SBUF early"),
    ("NL-E403", "host_memory", MemoryCapacityError, "an allocation exceeds the configured host memory limit",
     "raise NKI_LITE_MAX_ALLOC_BYTES or use smaller inputs"),
    ("NL-E501", "out_of_bounds", IndexOutOfBoundsError, "an access reaches outside its tensor",
     "add mask= to the access (e.g. mask=(i*128 + ip < n)) or shrink the tile"),
    ("NL-E502", "ragged_tail", IndexOutOfBoundsError, "the last tile runs past the end of the tensor and is not masked",
     "add a mask such as mask=(i * TILE + ip < N)"),
    ("NL-E503", "indirect_out_of_bounds", IndexOutOfBoundsError,
     "an index read from a tile at run time (indirect DMA, oob_mode=error) is outside its dimension",
     "check the index values, or pass oob_mode=nisa.oob_mode.skip to leave such elements untransferred"),
    ("NL-E504", "indirect_use", KernelSyntaxError,
     "a view indexed by a tile is used by an operation other than a DMA or dynamic copy",
     "move it with nl.load / nl.store / nisa.dma_copy / nl.atomic_rmw / nisa.tensor_copy_dynamic_src first"),
    ("NL-E505", "allocation_overlap", MemoryCapacityError,
     "two directly allocated tiles (nki.compiler alloc / mod_alloc) occupy the same SBUF/PSUM addresses while both hold "
     "a value still needed",
     "place the tiles at disjoint addresses, or give a rotating tensor as many physical tiles as it has blocks alive "
     "at once"),
    ("NL-E506", "allocation_capacity", MemoryCapacityError,
     "a directly allocated tile (nki.compiler alloc / mod_alloc) lies past the SBUF partition bytes or PSUM banks",
     "lower base_addr / base_bank or the tile counts so every physical tile ends inside the target's memory"),
    ("NL-E601", "loop_dependency", DependencyError, "iterations of an affine_range loop depend on each other",
     "use nl.sequential_range for loops that carry values, or index by the loop variable"),
    ("NL-E602", "program_dependency", DependencyError, "programs of an SPMD grid access the same HBM elements",
     "let each program write its own region (index by nl.program_id) and read only inputs or its own writes"),
    ("NL-E701", "immutable_parameter", ImmutableParameterError, "a kernel writes to an input parameter",
     "create the output with nl.ndarray(..., buffer=nl.shared_hbm), or annotate the parameter nt.mutable_tensor and return it"),
    ("NL-E702", "output_not_written", OutputNotWrittenError, "a returned tensor is (partly) never written",
     "check loop trip counts (math.ceil for ragged sizes) and masks"),
    ("NL-E703", "mutable_not_returned", ImmutableParameterError, "an nt.mutable_tensor parameter is not returned",
     "return the mutable parameter from the kernel"),
    ("NL-E801", "control_flow_on_tile", KernelSyntaxError, "Python control flow depends on a tile's value",
     "use nl.where(cond, a, b) or mask= instead of if/while on tile values"),
    ("NL-E802", "control_flow_on_index", KernelSyntaxError, "Python control flow depends on a loop variable or index expression",
     "use mask= with a comparison of the index, e.g. mask=(i*128 + ip < n)"),
    ("NL-E803", "unsupported_syntax", KernelSyntaxError, "a Python construct is not supported inside a kernel",
     "keep kernels to assignments, loops over nl ranges, calls and returns"),
    ("NL-E804", "mixed_indexing", KernelSyntaxError, "basic (slice/int) and advanced (arange) indexing are mixed",
     "index every dimension with nl.arange expressions, or every dimension with slices"),
    ("NL-E805", "outside_kernel", KernelSyntaxError, "an NKI API was called outside a kernel",
     "call nl/nisa functions only inside a function decorated with @nki.jit"),
    ("NL-E806", "bad_mask", KernelSyntaxError, "a mask is not a comparison of affine index expressions",
     "build masks from nl.arange / loop variables / program ids compared with constants, combined with &"),
    ("NL-E807", "bad_index", KernelSyntaxError, "an index expression is not supported",
     "use integers, slices, nl.ds(start, size), nl.arange expressions or affine expressions of loop variables"),
    ("NL-E808", "bad_loop", KernelSyntaxError, "a loop construct is not supported",
     "loop bounds must be Python ints; break/continue are not allowed inside nl.affine_range/sequential_range"),
    ("NL-E809", "recursion", KernelSyntaxError, "Python recursion while tracing a kernel did not end",
     "recursion in a kernel runs at trace time: give the helper a base case on a trace-time constant, or "
     "write the repetition as a loop (nl.static_range / nl.sequential_range)"),
    ("NL-E810", "recursive_kernel", KernelSyntaxError, "a kernel calls itself",
     "write the repetition as a loop (nl.affine_range / nl.sequential_range / range), or recurse in an undecorated "
     "helper with a trace-time bound"),
    ("NL-E901", "argument", ArgumentError, "the kernel was called with wrong arguments",
     "pass numpy arrays (C-contiguous) matching the kernel's parameters"),
    ("NL-E902", "uninitialized_read", UninitializedReadError, "a tile is read before it was written",
     "initialise the tile (nl.zeros, memset) or write it before reading"),
    ("NL-E903", "nan_created", KernelFloatingPointError, "an instruction created a NaN from non-NaN inputs",
     "inspect the inputs of this instruction; unset NKI_LITE_DEBUG_NANS to propagate NaNs silently"),
    ("NL-E904", "unsupported", UnsupportedError, "this feature is not built in nki_lite yet",
     "see docs/status.md for what is and is not built"),
    ("NL-E905", "consumed_value", KernelSyntaxError, "a matmul result that was accumulated into PSUM is used again",
     "read the PSUM tile it was accumulated into"),
    ("NL-E107", "partition_axis", ShapeError, "a compute instruction's operand does not have its partition dimension first",
     "index the block dimensions in front of the partition dimension away first (x[i] in a loop over the blocks)"),
    ("NL-E404", "psum_bank", MemoryCapacityError, "a matmul output in PSUM does not fit in one 2 KiB bank per partition",
     "start each matmul output at a 2 KiB boundary (a multiple of 512 fp32 elements) and keep N <= 512 fp32"),
    ("NL-E906", "unknown_keyword", ArgumentError, "an nl/nisa API was called with a keyword it does not take",
     "check the spelling; docs/api_keywords.md lists the keywords of every API (and the ones it ignores)"),
    ("NL-E907", "call_signature", ArgumentError,
     "an nl/nisa API was called with the wrong number of positional arguments, or an argument missing or "
     "given twice",
     "call it as its signature says (docs/api_keywords.md)"),
    # the current `nki` dialect (nki_lite/nki/, docs/nki_dialect.md)
    ("NL-E913", "nki_not_built", UnsupportedError, "an API of the current nki dialect is not built in nki_lite yet",
     "docs/compat_nki.md lists what the nki dialect supports; the legacy form of the API may exist"),
    ("NL-E914", "dst_operand", ArgumentError, "a dst-first nisa instruction's dst is not an on-chip or HBM tensor",
     "allocate dst with nl.ndarray(shape, dtype, buffer=nl.sbuf) (or nl.psum) and pass it first"),
    ("NL-E915", "lnc", ArgumentError, "a kernel was launched on more logical NeuronCores than the target has",
     "launch with kernel[1] or kernel[2] (LNC=2 needs trn2 or trn3)"),
    ("NL-E917", "lnc_deadlock", DependencyError, "the two logical NeuronCores of an LNC=2 kernel wait at "
     "synchronisation points that can never meet (core_barrier against sendrecv, different pipe_id, unpaired ranks)",
     "make both cores reach the same core_barrier / sendrecv sequence; branches on nl.program_id must keep them paired"),
    ("NL-E918", "lnc_unmatched", DependencyError, "a core_barrier or sendrecv has no partner: the other core finished "
     "its program, the kernel runs on one core, or the exchanged tiles differ in shape",
     "launch with kernel[2] and give every core the same number of barriers and matching sendrecv tiles"),
    ("NL-E916", "nki_argument_not_built", UnsupportedError,
     "a documented argument value of a built nki instruction is not implemented in nki_lite yet",
     "leave the argument at its default; docs/compat_nki.md lists what each instruction is missing"),

    ("NL-E909", "malformed_allocation", ArgumentError,
     "an nki.compiler allocator call (sbuf/psum .alloc / .mod_alloc) or its function's result is malformed",
     "mod_alloc takes keywords (base_addr=, num_free_tiles=(n,) with one count per block dimension); an alloc "
     "function returns (start_partition, byte_addr), PSUM (bank, 0, 0)"),
    ("NL-E908", "kernel_reference", ArgumentError, "a FILE::KERNEL reference does not name a kernel",
     "write FILE::KERNEL, e.g. kernels/add.py::add_kernel, naming a kernel the file defines"),
    ("NL-E910", "autotune_config", ArgumentError, "an autotune config or key names something the kernel does "
     "not take",
     "configs are dicts of the kernel's keyword parameters; key names its tensor parameters (docs/autotune.md)"),
    ("NL-E911", "autotune_no_config", ArgumentError, "every autotune config failed (verification or an error)",
     "the notes list each config's reason; add configs with smaller tiles (docs/autotune.md)"),
    # issue #13 batch 1 (range_select, select_reduce, tensor_partition_reduce, the accumulator)
    ("NL-E108", "isa_operand", ArgumentError,
     "an ISA instruction's operator or constant is outside what the instruction documents",
     "use one of the values the instruction's NKI documentation lists (the message names them)"),
    # tensor views of the current dialect (lang/views.py, docs/nki_dialect.md)
    ("NL-E112", "access_pattern", ShapeError,
     "an access pattern (`t.ap(...)`) is malformed or breaks the on-chip layout rule",
     "write [[step, num], ...] outermost first; on SBUF/PSUM the first pair is the partition access and its "
     "step is the tensor's free size"),
    ("NL-E113", "view", ShapeError, "a tensor view primitive was given arguments its reference does not allow",
     "the message names the rule (partition dim 0 of on-chip tensors, size-1 dims, permutations, element counts)"),
    ("NL-E114", "view_layout", ShapeError,
     "a view merges dimensions that are not contiguous in storage, so no access pattern walks them",
     "copy the view into a contiguous tile first (nisa.tensor_copy), then merge that tile's dimensions"),
    # nisa.dma_compute (lang/isa_dma_compute.py): what the DMA engines' compute logic documents
    ("NL-E116", "dma_compute", ArgumentError,
     "nisa.dma_compute got sources, a reduce_op, scales or memories outside what the DMA engines support",
     "reduce_op=nl.add, scales all 1.0 (or None), 1 to 16 sources with dst's element count, tensors in HBM or SBUF"),
    # MX formats (issue #14: nisa.quantize_mx, nisa.nc_matmul_mx, the x4 dtypes; docs/numerics.md "MX formats")
    ("NL-E119", "mx_layout", ShapeError,
     "an MX instruction's data or scale tile breaks the MX layout (shapes, quadrant scale placement, spaces)",
     "data tiles: partitions a multiple of 32 (at most 128), x4 free size = source free size / 4; the scale tile "
     "holds each quadrant's scales in its first 4 partitions: P // 8 partitions for P <= 32, else P (docs/numerics.md)"),
    ("NL-E120", "mx_dtype", KernelDTypeError,
     "an MX dtype is used where it is not allowed, or an MX instruction gets the wrong dtypes",
     "x4 tiles come from nisa.quantize_mx (or a DMA of packed data) and go to nisa.nc_matmul_mx; scales are "
     "nl.float8_e8m0fnu or nl.uint8"),
    # dynamic loops and virtual registers (issue #14: lang/registers.py, nl.dynamic_range / nisa.register_*)
    ("NL-E117", "dynamic_bounds", ArgumentError,
     "a dynamic loop's step or bounds are out of range (step not a positive compile-time int, an int bound "
     "outside 32 bits)",
     "step is an immediate of the hardware loop: a positive Python int; bounds are ints of 32 bits or registers"),
    ("NL-E118", "register_unset", UninitializedReadError,
     "a virtual register is read (a loop bound or condition, register_store, register_move) before it is set",
     "give the register a value first: nisa.register_alloc(value), nisa.register_move or nisa.register_load"),
    ("NL-E109", "accumulator", ShapeError,
     "a reduce_cmd=reduce instruction continues an accumulator of a different partition count",
     "start each chain with reduce_cmd=reset_reduce on tiles of the same partition count"),
]

# warnings (not raised; warnings.warn with a UserWarning subclass naming the code in its text)
WARNINGS = [
    ("NL-W401", "capacity_spill", "CapacityWarning",
     "live SBUF/PSUM tiles of an automatically allocated kernel exceed capacity: the hardware compiler would "
     "spill; nki_lite runs the kernel",
     "allocate tiles inside the loops that use them, shrink them, or set NKI_LITE_STRICT_CAPACITY=1 to make "
     "it an error"),
]

ERRORS: dict[str, ErrorCode] = {name: ErrorCode(code, name, cls, summary, hint)
                                for code, name, cls, summary, hint in _TABLE}


def make(name: str, message: str, *, loc: Loc | None = None, hint: str | None = None,
         notes: tuple[str, ...] = ()) -> NkiLiteError:
    """Build the registered exception for `name` (does not raise it)."""
    spec = ERRORS[name]
    return spec.cls(message, loc=loc, hint=spec.hint if hint is None else hint,
                    code=spec.code, name=spec.name, notes=notes)


def render_docs() -> str:
    lines = ["# nki_lite errors", "",
             "Generated from `nki_lite/errors.py` (`python -m nki_lite.errors > docs/errors.md`).", "",
             "Every error names the kernel's file:line:col with a source excerpt and a caret.", ""]
    for spec in sorted(ERRORS.values(), key=lambda s: s.code):
        bases = ", ".join(b.__name__ for b in spec.cls.__mro__[1:] if b.__module__ == "builtins"
                          and b not in (Exception, BaseException, object))
        lines += [f"## {spec.code}", "", f"**{spec.name}** — `{spec.cls.__name__}` (also `{bases}`)", "",
                  spec.summary[0].upper() + spec.summary[1:] + ".", "", f"Fix: {spec.hint}.", ""]
    lines += ["# Warnings", ""]
    for code, name, cls, summary, hint in WARNINGS:
        lines += [f"## {code}", "", f"**{name}** — `{cls}` (a `UserWarning`)", "",
                  summary[0].upper() + summary[1:] + ".", "", f"Fix: {hint}.", ""]
    return "\n".join(lines)


if __name__ == "__main__":
    print(render_docs())
