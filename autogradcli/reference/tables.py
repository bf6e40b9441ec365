"""What the reference's tree walk can call: each SymPy function with its NumPy function
(float64, vectorised) and its mpmath name (precise), and each SymPy relation with NumPy's."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np
import sympy as sp

# SymPy's function name -> (NumPy's function, mpmath's name): what the tree walk can call.
FUNCTIONS: dict[str, tuple[Callable[..., Any], str]] = {
    "sin": (np.sin, "sin"),
    "cos": (np.cos, "cos"),
    "tan": (np.tan, "tan"),
    "asin": (np.arcsin, "asin"),
    "acos": (np.arccos, "acos"),
    "atan": (np.arctan, "atan"),
    "sinh": (np.sinh, "sinh"),
    "cosh": (np.cosh, "cosh"),
    "tanh": (np.tanh, "tanh"),
    "asinh": (np.arcsinh, "asinh"),
    "acosh": (np.arccosh, "acosh"),
    "atanh": (np.arctanh, "atanh"),
    "exp": (np.exp, "exp"),
    "log": (np.log, "log"),
    "log1p": (np.log1p, "log1p"),  # log(1 + t), as the walk takes it (evaluate.log1p_of)
    "Abs": (np.abs, "fabs"),
    "sign": (np.sign, "sign"),
    "erf": (np.vectorize(math.erf, otypes=[np.float64]), "erf"),
    "floor": (np.floor, "floor"),  # a rounded division (div with rounding_mode)
    "trunc": (np.trunc, "trunc"),  # the same toward 0; mpmath has no trunc, Precise makes it
    # 1 where x != 0 (NaN too), else 0: the order-0 norm's count (forms.norm); mpmath has no
    # such function, Precise makes it
    "nonzero": (lambda v: np.not_equal(v, 0).astype(np.float64), "nonzero"),
}
RELATIONS: dict[type, Callable[[Any, Any], Any]] = {
    sp.StrictLessThan: np.less,
    sp.LessThan: np.less_equal,
    sp.StrictGreaterThan: np.greater,
    sp.GreaterThan: np.greater_equal,
    sp.Equality: np.equal,
    sp.Unequality: np.not_equal,
}
