"""The one table of the language's operations and the lookups derived from it.

The table's entries (``Op``, ``lang/ops.py``) live beside their family:
``lang/functions.py`` holds the element-wise functions (``sin``, ``relu``, ``where``, ...),
``lang/tensorops.py`` the operators, reductions, shape operations and losses. Each entry
holds, side by side, how PyTorch computes it, how SymPy writes it (one term per element, or
a definition through other operations), its shape rule, the ways PyTorch code spells it
(``torch.sin``, ``x.sin()``, ``F.relu``, ``np.sin``, ...) and its caveats. Everything else
the language knows of an operation (``OPS``, ``SPELLINGS``, ``BARE``, ``KINKED``, ...) is
derived here, from the table alone; ``add`` and ``remove`` keep every lookup in step.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from autogradcli.lang import functions, tensorops
from autogradcli.lang.ops import REQUIRED, Op, Param, broadcast_all, index_shape
from autogradcli.lang.tree import Call, Node

# The table, in order, by name.
OPS: dict[str, Op] = {}

# The ways code may name a function: "torch.sin", "Tensor.sin", "F.relu", "np.sin", "sin".
SPELLINGS: dict[str, Op] = {}
_PREFIXES = ("torch", "Tensor", "F", "np", "math")

# Operations that only stand for operators (the parser writes them as such).
SUGAR: set[str] = set()

# The language's own names: what a bare call may name.
BARE: set[str] = set()

# Operations with a kink: only an expression using one lets a numeric check accept a value
# between its one-sided slopes.
KINKED: set[str] = set()

# Named constants, used unless a value is given for the name: (Python value, SymPy name).
CONSTANTS: dict[str, tuple[float, str]] = {
    "pi": (math.pi, "pi"),
    "e": (math.e, "E"),
}

# Non-differentiable points by code: what SymPy knows of them (each kinked operation's
# ``kink``, then these). What PyTorch gives there is read from its .grad and shown beside
# (see messages.kink_note).
_OTHER_POINTS: dict[str, str] = {
    "second": "the second derivative at a kink (relu or abs at 0, max or min at a tie) is "
    "undefined (a jump in the first)",
    "zero_over_zero": "the derivative is 0/0 here (undefined)",
}
KINK_POINTS: dict[str, str] = {}

# The code a jump stands for when no operation of the expression claims it.
KINKS: dict[str, str] = {
    "Heaviside": "relu",
    "sign": "abs",
    "DiracDelta": "second",
    "Piecewise": "where",
}


def _keys(op: Op) -> list[str]:
    """The spellings of an entry, as ``SPELLINGS``' keys."""
    keys = [
        f"{way}.{op.name}" if way in _PREFIXES else op.name if way == "bare" else way
        for way in op.spelled
    ]
    return [*keys, *op.aliases]


def _derive(entries: Iterable[Op]) -> None:
    """Every lookup filled in again from the table's entries, in order (in place: the
    modules that imported a lookup see the new one)."""
    table = list(entries)
    for lookup in (OPS, SPELLINGS, SUGAR, BARE, KINKED, KINK_POINTS):
        lookup.clear()
    for op in table:
        OPS[op.name] = op
        for key in _keys(op):
            SPELLINGS.setdefault(key, op)
    SUGAR.update(op.name for op in table if op.build is not None)
    BARE.update(k for k in SPELLINGS if "." not in k)
    KINKED.update(op.name for op in table if op.kink)
    KINK_POINTS.update({op.name: op.kink for op in table if op.kink}, **_OTHER_POINTS)


def add(op: Op) -> Op:
    """Add an entry at the end of the table, every lookup following (an entry of a
    plug-in, or a test's throwaway one); a name the table holds is an error."""
    if op.name in OPS:
        raise ValueError(f"the table already holds an operation named {op.name!r}")
    _derive([*OPS.values(), op])
    return op


def remove(name: str) -> None:
    """Take an entry out of the table again, every lookup following."""
    if name not in OPS:
        raise KeyError(name)
    _derive(op for op in OPS.values() if op.name != name)


_derive((*functions.ENTRIES, *tensorops.ENTRIES))


def function_names() -> list[str]:
    """The bare names of the language, in the table's order."""
    return [op.name for op in OPS.values() if op.build is None and op.name in BARE]


def elementwise_names() -> list[str]:
    """The bare names of the element-wise functions (a SymPy form per element)."""
    return [op.name for op in OPS.values() if op.sympy is not None and op.name in BARE]


def definition(node: Call, placeholders: Sequence[Node]) -> Node | None:
    """The operation's definition through others (a loss through means and logs), with the
    placeholders standing for its arguments; None when it is folded as itself."""
    op = OPS[node.func]
    if op.expand is None:
        return None
    positional, keywords = arguments(node, list(placeholders))
    return op.expand(*positional, **keywords)


def arguments(node: Call, values: list[Any]) -> tuple[list[Any], dict[str, Any]]:
    """How an entry's functions take a call's folded arguments: the required tensors by
    position, the optional tensors that are there and the parameters by name."""
    op = OPS[node.func]
    options = node.options
    names = options.pop("given", None)
    if op.sequence or names is None:
        return list(values), options
    positional = [v for n, v in zip(names, values, strict=True) if n not in op.optional]
    optional = {n: v for n, v in zip(names, values, strict=True) if n in op.optional}
    return positional, {**optional, **options}


def kink_codes(atom: str, uses: set[str]) -> set[str]:
    """The note codes for a jump (a SymPy class name) in a derivative of an expression that
    calls ``uses``: the operations whose kink shows as that jump, else ``KINKS``'s code."""
    found = {name for name in uses if name in OPS and atom in OPS[name].kink_atoms}
    return found or {KINKS[atom]}


__all__ = [
    "BARE",
    "CONSTANTS",
    "KINKED",
    "KINKS",
    "KINK_POINTS",
    "OPS",
    "REQUIRED",
    "SPELLINGS",
    "SUGAR",
    "Op",
    "Param",
    "add",
    "arguments",
    "broadcast_all",
    "elementwise_names",
    "function_names",
    "index_shape",
    "kink_codes",
    "remove",
]
