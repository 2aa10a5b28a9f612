"""Affine integer expressions over symbolic variables: the index language of the IR.

An `Affine` is `const + sum(coeff * var)` with integer coefficients. Variables are named:
loop variables (`i0`, `i1`, ...), SPMD program ids (`pid0`, ...), and axis variables (`@0`, `@1`,
...) that range over the axes of an access's tile shape. `Cmp` is `expr <op> 0`; a `Mask` is a
conjunction of `Cmp`s. All three are immutable, hashable and print stably.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import numpy as np


def axis_var(k: int) -> str:
    return f"@{k}"


def is_axis_var(name: str) -> bool:
    return name.startswith("@")


def axis_of(name: str) -> int:
    return int(name[1:])


@dataclass(frozen=True)
class Affine:
    const: int = 0
    terms: tuple[tuple[str, int], ...] = ()   # sorted by name, no zero coefficients

    @staticmethod
    def of(const: int = 0, **coeffs: int) -> "Affine":
        return Affine.make(const, coeffs)

    @staticmethod
    def make(const: int, coeffs: Mapping[str, int]) -> "Affine":
        return Affine(int(const), tuple(sorted((k, int(v)) for k, v in coeffs.items() if v != 0)))

    @staticmethod
    def var(name: str, coeff: int = 1) -> "Affine":
        return Affine(0, ((name, coeff),))

    # ---- queries
    @property
    def coeffs(self) -> dict[str, int]:
        return dict(self.terms)

    def coeff(self, name: str) -> int:
        for k, v in self.terms:
            if k == name:
                return v
        return 0

    @property
    def is_const(self) -> bool:
        return not self.terms

    def vars(self) -> set[str]:
        return {k for k, _ in self.terms}

    # ---- arithmetic
    def __add__(self, other: "Affine | int") -> "Affine":
        other = as_affine(other)
        c = self.coeffs
        for k, v in other.terms:
            c[k] = c.get(k, 0) + v
        return Affine.make(self.const + other.const, c)

    __radd__ = __add__

    def __neg__(self) -> "Affine":
        return Affine(-self.const, tuple((k, -v) for k, v in self.terms))

    def __sub__(self, other: "Affine | int") -> "Affine":
        return self + (-as_affine(other))

    def __rsub__(self, other: "Affine | int") -> "Affine":
        return as_affine(other) - self

    def scale(self, k: int) -> "Affine":
        return Affine.make(self.const * k, {n: v * k for n, v in self.terms})

    def subst(self, mapping: Mapping[str, "Affine | int"]) -> "Affine":
        out = Affine(self.const)
        for k, v in self.terms:
            out = out + (as_affine(mapping[k]).scale(v) if k in mapping else Affine.var(k, v))
        return out

    # ---- evaluation
    def bounds(self, extents: Mapping[str, int]) -> tuple[int, int]:
        """Min and max over vars ranging over [0, extent) (vars missing from extents: error)."""
        lo = hi = self.const
        for k, v in self.terms:
            span = v * (extents[k] - 1)
            lo += min(0, span)
            hi += max(0, span)
        return lo, hi

    def evaluate(self, env: Mapping[str, int], shape: tuple[int, ...] = ()) -> "int | np.ndarray":
        """Value with scalar vars from env and axis vars as broadcast aranges over `shape`."""
        val: int | np.ndarray = self.const
        for k, v in self.terms:
            if is_axis_var(k):
                ax = axis_of(k)
                r = np.arange(shape[ax], dtype=np.int64) * v
                val = val + r.reshape([-1 if i == ax else 1 for i in range(len(shape))])
            else:
                val = val + v * env[k]
        return val

    def __str__(self) -> str:
        parts = []
        for k, v in self.terms:
            parts.append(k if v == 1 else f"-{k}" if v == -1 else f"{v}*{k}")
        if self.const or not parts:
            parts.append(str(self.const))
        s = " + ".join(parts)
        return s.replace("+ -", "- ")


def as_affine(x) -> Affine:
    if isinstance(x, Affine):
        return x
    if isinstance(x, (int, np.integer)) and not isinstance(x, bool):
        return Affine(int(x))
    raise TypeError(f"not an affine integer expression: {x!r}")


CMP_OPS = ("<", "<=", ">", ">=", "==", "!=")


@dataclass(frozen=True)
class Cmp:
    expr: Affine   # the comparison is `expr <op> 0`
    op: str

    def evaluate(self, env, shape):
        v = self.expr.evaluate(env, shape)
        return {"<": np.less, "<=": np.less_equal, ">": np.greater, ">=": np.greater_equal,
                "==": np.equal, "!=": np.not_equal}[self.op](v, 0)

    def __str__(self) -> str:
        return f"{self.expr} {self.op} 0"


@dataclass(frozen=True)
class Mask:
    terms: tuple[Cmp, ...]

    def __and__(self, other: "Mask") -> "Mask":
        return Mask(self.terms + other.terms)

    def subst(self, mapping) -> "Mask":
        return Mask(tuple(Cmp(c.expr.subst(mapping), c.op) for c in self.terms))

    def vars(self) -> set[str]:
        out: set[str] = set()
        for c in self.terms:
            out |= c.expr.vars()
        return out

    def evaluate(self, env, shape) -> np.ndarray:
        m = np.ones(shape, dtype=bool)
        for c in self.terms:
            m = m & c.evaluate(env, shape)
        return np.broadcast_to(m, shape)

    def __str__(self) -> str:
        return " & ".join(f"({c})" for c in self.terms)
