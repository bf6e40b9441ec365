"""Stage 4's choice: SymPy's exact reference for the program, or central differences with a
note saying why SymPy could not; the program's hooks applied to either."""

from __future__ import annotations

import numpy as np

from autogradcli.lang.shapes import Shape
from autogradcli.lang.tree import Program
from autogradcli.notes import Note
from autogradcli.reference import Model, NumericModel, Reference, exact_or_none, sympy_model
from autogradcli.reference.expected import Expected
from autogradcli.reference.hooked import hooked
from autogradcli.settings import Limits


def choose(
    expression: Program,
    shapes: dict[str, Shape],
    limits: Limits,
    seen: dict[str, np.ndarray],
    weights: np.ndarray | None,
    differentiate: frozenset[str],
) -> Reference:
    """SymPy's exact check at the inputs autograd saw, or central differences with a note
    saying why SymPy could not (``weights`` None: backward() without weights)."""
    notes: list[Note] = []
    used = np.ones(()) if weights is None else weights

    def work() -> tuple[Model, Expected]:
        model = hooked(sympy_model(expression, shapes, limits, seen), shapes, limits)
        return model, model.evaluate(seen, used, differentiate)

    found = exact_or_none(limits, notes, work)
    if found is not None:
        return Reference(found[0], found[1], tuple(notes))
    numeric = NumericModel(expression, shapes, limits, precise=True)
    if expression.hooks:  # the reverse pass in pieces: no error estimate for the whole
        model = hooked(numeric, shapes, limits)
        return Reference(model, model.evaluate(seen, weights, differentiate), tuple(notes))
    expected, accuracy = numeric.evaluate_with_error(seen, weights, differentiate)
    return Reference(numeric, expected, tuple(notes), accuracy)
