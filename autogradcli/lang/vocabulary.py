"""The one table of supported functions, with their PyTorch and SymPy counterparts.

Each entry takes the module (``torch`` or ``sympy``) as its first argument, so this
table imports neither and the parser can use it without loading them.
Caveats about points where the derivative is not an ordinary number stand beside
the entry they belong to.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Function:
    """One supported function: how PyTorch computes it and what SymPy calls it."""

    name: str
    torch: Callable[[Any, Any], Any]
    sympy: Callable[[Any, Any], Any]
    note: str = ""
    kink: str = ""  # the point where it is not differentiable, as SymPy sees it


def _entry(name: str, sympy_name: str | None = None, note: str = "", kink: str = "") -> Function:
    """A function that has the same shape of call in torch and SymPy."""
    sympy_attr = sympy_name or name
    return Function(
        name,
        torch=lambda torch, a: getattr(torch, name)(a),
        sympy=lambda sympy, a: getattr(sympy, sympy_attr)(a),
        note=note,
        kink=kink,
    )


FUNCTIONS: dict[str, Function] = {
    f.name: f
    for f in (
        _entry("sin"),
        _entry("cos"),
        _entry("tan"),
        _entry("asin"),
        _entry("acos"),
        _entry("atan"),
        _entry("sinh"),
        _entry("cosh"),
        _entry("tanh"),
        _entry("asinh"),
        _entry("acosh"),
        _entry("atanh"),
        _entry("exp"),
        _entry("log", note="natural logarithm"),
        Function(
            "log2",
            torch=lambda torch, a: torch.log2(a),
            sympy=lambda sympy, a: sympy.log(a, 2),
        ),
        Function(
            "log10",
            torch=lambda torch, a: torch.log10(a),
            sympy=lambda sympy, a: sympy.log(a, 10),
        ),
        _entry("sqrt", note="sqrt'(0) is infinite"),
        _entry("abs", "Abs", kink="abs'(0) is undefined (SymPy's sign(0) is 0)"),
        Function(
            "sigmoid",
            torch=lambda torch, a: torch.sigmoid(a),
            sympy=lambda sympy, a: 1 / (1 + sympy.exp(-a)),
        ),
        Function(
            "relu",
            torch=lambda torch, a: torch.relu(a),
            sympy=lambda sympy, a: sympy.Max(0, a),
            kink="relu'(0) is undefined (SymPy's Heaviside(0) is 1/2)",
        ),
        Function(
            "log1p",
            torch=lambda torch, a: torch.log1p(a),
            sympy=lambda sympy, a: sympy.log(1 + a),
            note="log(1 + x), accurate for small x",
        ),
        Function(
            "expm1",
            torch=lambda torch, a: torch.expm1(a),
            sympy=lambda sympy, a: sympy.exp(a) - 1,
            note="exp(x) - 1, accurate for small x",
        ),
        Function(
            "softplus",
            torch=lambda torch, a: torch.nn.functional.softplus(a),
            sympy=lambda sympy, a: sympy.log(1 + sympy.exp(a)),
            note="log(1 + exp(x)); PyTorch returns x itself past x = 20",
        ),
        Function(
            "logsigmoid",
            torch=lambda torch, a: torch.nn.functional.logsigmoid(a),
            sympy=lambda sympy, a: -sympy.log(1 + sympy.exp(-a)),
            note="log(sigmoid(x)), without rounding sigmoid(x) to 0 or 1 first",
        ),
    )
}


@dataclass(frozen=True)
class TensorFunction:
    """A function over whole tensors (reductions, products, softmax): how PyTorch computes
    it, and how it is written with NumPy arrays of SymPy terms (one term per element).

    ``dim``: "none" (no dim argument), "optional" or "required" (an integer, as in PyTorch).
    ``arity``: tensor arguments (2 for dot). ``components(sympy, np, a, b, dim)`` returns
    an object array of SymPy expressions with the shape PyTorch's result has.
    """

    name: str
    torch: Callable[..., Any]
    components: Callable[..., Any]
    dim: str = "none"
    arity: int = 1
    note: str = ""
    kink: str = ""


def _sum(sp: Any, np: Any, a: Any, b: Any, dim: int | None) -> Any:
    return np.array(np.sum(a, axis=dim), dtype=object)


def _mean(sp: Any, np: Any, a: Any, b: Any, dim: int | None) -> Any:
    count = a.size if dim is None else a.shape[dim]
    return np.array(np.sum(a, axis=dim) * sp.Rational(1, max(count, 1)), dtype=object)


def _fold(pick: Any) -> Callable[..., Any]:
    def fold(sp: Any, np: Any, a: Any, b: Any, dim: int | None) -> Any:
        combine = np.frompyfunc(lambda u, v: getattr(sp, pick)(u, v), 2, 1)
        flat = a.reshape(-1) if dim is None else a
        return np.array(combine.reduce(flat, axis=0 if dim is None else dim), dtype=object)

    return fold


def _softmax(sp: Any, np: Any, a: Any, b: Any, dim: int | None) -> Any:
    e = np.vectorize(sp.exp, otypes=[object])(a)
    return e / np.sum(e, axis=dim, keepdims=True)


def _log_softmax(sp: Any, np: Any, a: Any, b: Any, dim: int | None) -> Any:
    e = np.vectorize(sp.exp, otypes=[object])(a)
    return a - np.vectorize(sp.log, otypes=[object])(np.sum(e, axis=dim, keepdims=True))


def _logsumexp(sp: Any, np: Any, a: Any, b: Any, dim: int | None) -> Any:
    e = np.vectorize(sp.exp, otypes=[object])(a)
    return np.vectorize(sp.log, otypes=[object])(np.array(np.sum(e, axis=dim), dtype=object))


TENSOR_FUNCTIONS: dict[str, TensorFunction] = {
    f.name: f
    for f in (
        TensorFunction(
            "sum",
            torch=lambda torch, a, b, dim: torch.sum(a) if dim is None else torch.sum(a, dim=dim),
            components=_sum,
            dim="optional",
        ),
        TensorFunction(
            "mean",
            torch=lambda torch, a, b, dim: torch.mean(a) if dim is None else torch.mean(a, dim=dim),
            components=_mean,
            dim="optional",
        ),
        TensorFunction(
            "prod",
            torch=lambda torch, a, b, dim: torch.prod(a) if dim is None else torch.prod(a, dim=dim),
            components=lambda sp, np, a, b, dim: np.array(np.prod(a, axis=dim), dtype=object),
            dim="optional",
        ),
        TensorFunction(
            "max",
            torch=lambda torch, a, b, dim: (
                torch.max(a) if dim is None else torch.max(a, dim=dim).values
            ),
            components=_fold("Max"),
            dim="optional",
            kink="max is not differentiable at a tie",
        ),
        TensorFunction(
            "min",
            torch=lambda torch, a, b, dim: (
                torch.min(a) if dim is None else torch.min(a, dim=dim).values
            ),
            components=_fold("Min"),
            dim="optional",
            kink="min is not differentiable at a tie",
        ),
        TensorFunction(
            "softmax",
            torch=lambda torch, a, b, dim: torch.softmax(a, dim=dim),
            components=_softmax,
            dim="required",
        ),
        TensorFunction(
            "log_softmax",
            torch=lambda torch, a, b, dim: torch.log_softmax(a, dim=dim),
            components=_log_softmax,
            dim="required",
        ),
        TensorFunction(
            "logsumexp",
            torch=lambda torch, a, b, dim: torch.logsumexp(a, dim=dim),
            components=_logsumexp,
            dim="required",
        ),
        TensorFunction(
            "norm",
            torch=lambda torch, a, b, dim: torch.linalg.vector_norm(a),
            components=lambda sp, np, a, b, dim: np.array(sp.sqrt(np.sum(a * a)), dtype=object),
            note="the 2-norm of all elements",
            kink="norm is not differentiable at the zero vector",
        ),
        TensorFunction(
            "dot",
            torch=lambda torch, a, b, dim: torch.dot(a, b),
            components=lambda sp, np, a, b, dim: np.array(np.dot(a, b), dtype=object),
            arity=2,
        ),
        TensorFunction(
            "T",
            torch=lambda torch, a, b, dim: a.T,
            components=lambda sp, np, a, b, dim: a.T,
        ),
    )
}

# The two reductions over all elements that the elementwise model of symbolic.py handles
# as blocks of their own (with a dim, or for the other tensor functions, the component-wise
# model of components.py is used).
REDUCTIONS: dict[str, Callable[[Any, Any], Any]] = {
    name: (lambda f: lambda torch, a: f.torch(torch, a, None, None))(TENSOR_FUNCTIONS[name])
    for name in ("sum", "mean")
}

# Named constants, used unless a value is given for the name: (Python value, SymPy name).
CONSTANTS: dict[str, tuple[float, str]] = {
    "pi": (math.pi, "pi"),
    "e": (math.e, "E"),
}

# Non-differentiable points by code: what SymPy knows of them. What PyTorch gives there is
# read from its .grad and shown beside (see messages.kink_note).
KINK_POINTS: dict[str, str] = {
    **{f.name: f.kink for f in FUNCTIONS.values() if f.kink},
    **{f.name: f.kink for f in TENSOR_FUNCTIONS.values() if f.kink},
    "second": "the second derivative at a kink (relu or abs at 0, max or min at a tie) is "
    "undefined (a jump in the first)",
    "zero_over_zero": "the derivative is 0/0 here (undefined)",
}

# Which kink a jump function in a SymPy derivative stands for: SymPy class name -> code.
KINKS: dict[str, str] = {"Heaviside": "relu", "sign": "abs", "DiracDelta": "second"}


# Functions of the language with a kink (a jump in the first derivative): abs and relu at 0,
# max and min at a tie, norm at the zero vector. Only an expression using one of them lets a
# numeric check accept a value between its one-sided slopes.
KINKED: frozenset[str] = frozenset({"abs", "relu", "max", "min", "norm"})


def function_names() -> list[str]:
    """All callable names of the language: elementwise functions, then tensor functions."""
    return [*FUNCTIONS, *TENSOR_FUNCTIONS]
