"""SymPy's and central differences' work for the higher-order commands: the K-th
derivative of each input (``grad --order K``) and the Hessian's blocks as LaTeX."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

from autogradcli.bind import Bound
from autogradcli.lang.analysis import calls
from autogradcli.notes import Note
from autogradcli.reference import NumericModel
from autogradcli.reference.bounds import precise_value
from autogradcli.reference.elementwise import SymbolicModel
from autogradcli.reference.numeric import DEFAULT as NUMERIC
from autogradcli.reference.numeric import numeric_derivative_with_error
from autogradcli.reference.terms import diff, find_kinks, reduce_to_shape

if TYPE_CHECKING:
    from autogradcli.reference.components import ComponentModel


class OrderDerivative(NamedTuple):
    """One input's K-th derivative by SymPy: its text and LaTeX, its values summed to the
    input's shape, where it has a kink and the kinks' note codes."""

    text: str
    latex: str
    values: np.ndarray
    kinks: np.ndarray
    codes: set[str]


def forward(
    bound: Bound, base: dict[str, np.ndarray]
) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
    """The forward pass in float64 without autograd (what central differences evaluate)."""
    return NumericModel(bound.program, bound.shapes, bound.limits).forward_at(base)


def exact_order(
    bound: Bound, seen: dict[str, np.ndarray], order: int
) -> tuple[SymbolicModel, dict[str, OrderDerivative]]:
    """SymPy's model and, per input, the K-th derivative at the values ``seen``."""
    import sympy as sp

    model = SymbolicModel(bound.program, bound.shapes, bound.limits)
    env = {model.symbols[n]: v for n, v in seen.items()}
    found = {}
    for n in bound.names:
        derivative = diff(model.output.expr, model.symbols[n], order)
        with np.errstate(all="ignore"):
            full = precise_value(derivative, env, bound.out_shape)
            mask, codes = find_kinks(derivative, env, bound.out_shape, uses=calls(bound.program))
        text, tex = str(derivative), sp.latex(derivative)
        if math.prod(bound.shapes[n]) < math.prod(bound.out_shape):  # broadcast: summed
            text, tex = f"sum({text})", rf"\sum \left({tex}\right)"
        found[n] = OrderDerivative(
            text,
            tex,
            reduce_to_shape(full, bound.shapes[n]),
            reduce_to_shape(mask, bound.shapes[n], np.logical_or),
            codes,
        )
    return model, found


def numeric_order(
    bound: Bound,
    seen: dict[str, np.ndarray],
    name: str,
    order: int,
    notes: list[Note],
    needed: bool,
) -> tuple[np.ndarray | None, np.ndarray | float]:
    """The K-th derivative by central differences (with --numeric, or ``needed`` when
    SymPy could not), and how much float64 rounding of the values its differences amplify."""
    if not (bound.settings.numeric or needed):
        return None, 0.0
    f = forward(bound, seen)

    def along(v: np.ndarray) -> np.ndarray:
        out = np.broadcast_to(f({**seen, name: v}), bound.out_shape)
        return reduce_to_shape(out, bound.shapes[name])

    numbers, rounding = numeric_derivative_with_error(along, seen[name], order)
    if np.any(rounding > NUMERIC.atol):
        widen = float(np.max(rounding))
        notes.append(Note("order_rounding", {"name": name, "order": order, "widen": widen}))
    return numbers, rounding


def hessian_latex(model: ComponentModel, pairs: Iterable[tuple[str, str]]) -> dict[str, str]:
    """Each Hessian block of at most 64 entries as a LaTeX matrix, keyed like the blocks."""
    import sympy as sp

    from autogradcli.reference.components import hessian_terms, latex

    found = {}
    for pair in pairs:
        terms = np.asarray(hessian_terms(model, *pair), dtype=object)
        if terms.size == 1:
            found[",".join(pair)] = latex(terms.reshape(-1)[0])
        elif 0 < terms.size <= 64:
            rows = terms.reshape(int(np.prod(terms.shape[: len(terms.shape) // 2])) or 1, -1)
            found[",".join(pair)] = latex(sp.Matrix(rows))
    return found
