"""Resolving the op arguments of nisa calls (op=np.add, op0=nl.multiply, op=nl.exp, ...) to IR names.

Contract: `alu_name(obj)` maps numpy ufuncs, nl functions and strings to an ALU op name of
numerics.alu; `act_name(obj)` maps them to an activation function name. Unknown objects raise
`unsupported` with the list of accepted ops.
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..numerics import alu

# the activation functions of the Scalar Engine nki_lite builds (the nl unary ops and nisa.activation)
ACTIVATIONS = ("copy", "exp", "log", "tanh", "sigmoid", "relu", "rsqrt", "sqrt", "square", "reciprocal",
               "abs", "negative", "gelu", "gelu_apprx_tanh", "silu", "silu_dx", "softplus", "erf", "sin", "cos", "tan",
               "arctan", "mish", "sign", "floor", "ceil", "trunc")

_ALU_UFUNCS = {np.add: "add", np.subtract: "subtract", np.multiply: "multiply", np.divide: "divide",
               np.fmod: "fmod", np.mod: "mod",
               np.maximum: "maximum", np.minimum: "minimum", np.equal: "equal", np.not_equal: "not_equal",
               np.greater: "greater", np.greater_equal: "greater_equal", np.less: "less",
               np.less_equal: "less_equal", np.logical_and: "logical_and", np.logical_or: "logical_or",
               np.logical_xor: "logical_xor", np.bitwise_and: "bitwise_and", np.bitwise_or: "bitwise_or",
               np.bitwise_xor: "bitwise_xor", np.left_shift: "left_shift", np.right_shift: "right_shift"}
_ALU_ALIASES = {"max": "maximum", "min": "minimum", "sum": "add", "mul": "multiply", "sub": "subtract",
                "prod": "multiply", "all": "logical_and", "mean": "add"}
_ACT_UFUNCS = {np.exp: "exp", np.log: "log", np.tanh: "tanh", np.sqrt: "sqrt", np.square: "square",
               np.reciprocal: "reciprocal", np.abs: "abs", np.negative: "negative", np.sin: "sin",
               np.cos: "cos", np.tan: "tan", np.arctan: "arctan", np.sign: "sign",
               np.floor: "floor", np.ceil: "ceil", np.trunc: "trunc"}
_ACT_ALIASES = {"identity": "copy", "bypass": "copy"}
# numpy functions (not ufuncs) the activation table accepts: "nki.language.copy or numpy.copy" (legacy
# nki.api.shared, Supported Activation Functions)
_ACT_FUNCS = {np.copy: "copy"}


# the nl function a numpy ufunc means when applied to tiles (`np.exp(t)` is `nl.exp(t)`; lang/tile.py)
UFUNC_OPS = {**_ALU_UFUNCS, **_ACT_UFUNCS, np.true_divide: "divide", np.absolute: "abs", np.invert: "invert"}

_NUMPY_FUNCS = {np.max: "maximum", np.amax: "maximum", np.min: "minimum", np.amin: "minimum",
                np.sum: "add", np.prod: "multiply", np.all: "logical_and", np.any: "logical_or"}


def _name(obj) -> str | None:
    if isinstance(obj, str):
        return obj
    try:
        if obj in _NUMPY_FUNCS:
            return _NUMPY_FUNCS[obj]
    except TypeError:
        pass
    mod = getattr(obj, "__module__", "") or ""
    if mod.startswith("nki_lite"):
        return getattr(obj, "__name__", None)
    return None


def alu_name(obj, loc) -> str:
    name = _ALU_UFUNCS.get(obj) if isinstance(obj, np.ufunc) else _name(obj)
    name = _ALU_ALIASES.get(name, name)
    if name not in alu.ALL_OPS:
        raise errors.make("unsupported", f"{obj!r} is not an ALU operation nki_lite knows", loc=loc,
                          hint=f"use one of: {', '.join(alu.ALL_OPS)} (as np.<op> or nl.<op>)")
    return name


def act_name(obj, loc) -> str:
    if isinstance(obj, np.ufunc):
        name = _ACT_UFUNCS.get(obj)
    else:
        name = _ACT_FUNCS.get(obj) if callable(obj) and obj in _ACT_FUNCS else _name(obj)
    name = _ACT_ALIASES.get(name, name)
    if name not in ACTIVATIONS:
        raise errors.make("unsupported", f"{obj!r} is not an activation function nki_lite knows", loc=loc,
                          hint=f"use one of: {', '.join(ACTIVATIONS)}")
    return name
