"""Stage 4: the reference. One protocol (``Model``) for SymPy's element-wise model, its
component-wise model for tensor algebra, and central differences when SymPy cannot.

``choose`` picks SymPy's model for the program and evaluates it; when the exact check is
too large, too slow or gives no number it says why (a ``Note``) and central differences
stand in. Nothing here imports torch except the numeric model's forward pass.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np

from autogradcli.lang.analysis import class_targets, has_kink, is_elementwise
from autogradcli.lang.shapes import Shape
from autogradcli.lang.tree import Node, Program
from autogradcli.notes import Note
from autogradcli.reference.expected import Expected
from autogradcli.reference.numeric import Extrapolated
from autogradcli.settings import Limits

T = TypeVar("T")


class Model(Protocol):
    """What every reference offers. ``by`` names it ("SymPy" or "numeric")."""

    by: str
    expression: Program

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
    ) -> Expected: ...

    def value(self, node: Node, values: dict[str, np.ndarray]) -> np.ndarray: ...

    def value_range(
        self, node: Node, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]: ...

    def derivative_text(self, name: str, weights_are_ones: bool = True) -> str | None: ...

    def derivative_latex(self, name: str, weights_are_ones: bool = True) -> str | None: ...

    def for_program(self, expression: Program, shapes: dict[str, Shape]) -> Model: ...


def exact_or_none(limits: Limits, notes: list[Note], work: Callable[[], T]) -> T | None:
    """``work()`` (SymPy's exact check) within ``limits.sympy_seconds``, or None with a
    note saying why the numeric check stands in: too large, too slow, or no number."""
    from autogradcli.reference.components import TooLarge
    from autogradcli.reference.evaluate import NoClosedForm
    from autogradcli.reference.timeout import SympyTimeout, within

    why = {TooLarge: "numeric_fallback", SympyTimeout: "timeout_fallback"}
    try:
        try:
            return within(limits.sympy_seconds, work)
        except (ValueError, TypeError) as exc:  # SymPy cannot compare or order a term
            raise NoClosedForm("sympy_cannot", error=str(exc)) from None
    except (TooLarge, SympyTimeout, NoClosedForm) as exc:
        code = why.get(type(exc), "no_number_fallback")
        notes.append(Note(code, {"reason_code": exc.code, "reason_data": exc.data}))
    return None


def sympy_model(
    expression: Program,
    shapes: dict[str, Shape],
    limits: Limits,
    values: dict[str, np.ndarray] | None = None,
) -> Model:
    """SymPy's model for the program: element-wise, or component-wise for tensor algebra
    (class indices among ``values`` taken as the numbers they are)."""
    from autogradcli.reference.components import ComponentModel
    from autogradcli.reference.elementwise import SymbolicModel, stepwise

    if is_elementwise(expression):
        return SymbolicModel(expression, shapes, limits, stepwise=stepwise(expression))
    return ComponentModel(expression, shapes, limits, constants=known(expression, shapes, values))


def known(
    expression: Program, shapes: dict[str, Shape], values: dict[str, np.ndarray] | None
) -> dict[str, np.ndarray]:
    """The class indices among ``values``: the component-wise model picks by them."""
    if not values:
        return {}
    return {n: values[n] for n in class_targets(expression, shapes) if n in values}


@dataclass(frozen=True)
class Reference:
    """The reference for one run: the model it came from, its numbers, and its notes.

    ``accuracy`` (the numeric reference only): per differentiated input, Richardson's
    estimate of each gradient element's absolute error. Elements whose estimate is more
    than a tenth of a tolerance are too loose to be checked at it (``unchecked``); the rest
    are checked at the tolerance itself. SymPy's reference is exact to float64 (None)."""

    model: Model
    expected: Expected
    notes: tuple[Note, ...]
    accuracy: dict[str, Extrapolated] | None = None

    @property
    def exact(self) -> bool:
        return self.model.by == "SymPy"

    def error_of(self, name: str, scale: float = 1.0) -> np.ndarray | None:
        """The estimated absolute error of each element of ``name``'s reference gradient
        (times ``scale`` passes): None for SymPy's, inf where the numeric reference has
        no estimate (a program with hooks, or past the budget of forward passes)."""
        if self.exact:
            return None
        if self.accuracy is None or name not in self.accuracy:
            return np.full(np.shape(self.expected.grads[name]), np.inf)
        return scale * self.accuracy[name].error

    def unchecked(
        self, name: str, rtol: float, atol: float, scale: float = 1.0
    ) -> np.ndarray | None:
        """Elements of ``name``'s gradient the reference cannot check at (rtol, atol):
        the estimated error is more than a tenth of ``atol + rtol * |reference|`` (kinks
        and elements with no number aside: ``Expected`` marks those). None for SymPy's."""
        error = self.error_of(name, scale)
        if error is None:
            return None
        found = _accuracy_of(self, name, error, scale)
        return found.loose(rtol, atol, scale) & ~self._marked(name)

    def unchecked_notes(
        self, name: str, rtol: float, atol: float, scale: float = 1.0
    ) -> list[Note]:
        """What ``unchecked`` leaves out, said in notes: how many elements of how many, the
        error the numeric reference reaches there, and how many of them the forward pass
        in float64 is too coarse for (its rounding alone is that large)."""
        loose = self.unchecked(name, rtol, atol, scale)
        if loose is None or not loose.any():
            return []
        error = self.error_of(name, scale)
        assert error is not None
        found = _accuracy_of(self, name, error, scale)
        total, count = int(loose.size), int(loose.sum())
        finite = loose & np.isfinite(error)
        notes = []
        if finite.any():
            data = {"name": name, "elements": int(finite.sum()), "total": total}
            data["error"] = float(error[finite].max())
            notes.append(Note("numeric_unchecked", data))
        if count > int(finite.sum()):
            data = {"name": name, "elements": count - int(finite.sum()), "total": total}
            notes.append(Note("numeric_unestimated", data))
        coarse = loose & found.coarse()
        if coarse.any():
            data = {"name": name, "elements": int(coarse.sum())}
            data["rounding"] = float(scale * found.rounding[coarse].max())
            notes.append(Note("numeric_coarse", data))
        return notes

    def _marked(self, name: str) -> np.ndarray:
        """Elements ``Expected`` already leaves out or judges by bounds."""
        e = self.expected
        shape = np.shape(e.grads[name])
        marked = np.zeros(shape, dtype=bool)
        for masks in (e.kinks, e.unknown):
            if name in masks:
                marked = marked | np.broadcast_to(masks[name], shape)
        if name in e.bounds:
            marked = marked | ~np.isnan(np.broadcast_to(e.bounds[name][0], shape))
        return marked


def _accuracy_of(reference: Reference, name: str, error: np.ndarray, scale: float) -> Extrapolated:
    """The reference's estimate for ``name`` (one with no estimate where it has none)."""
    if reference.accuracy is not None and name in reference.accuracy:
        return reference.accuracy[name]
    value = np.asarray(reference.expected.grads[name], dtype=np.float64)
    return Extrapolated(value, error / scale, np.zeros(np.shape(value)))


class NumericModel:
    """Central finite differences of the same computation in float64 on the CPU (the
    forward pass only; no autograd). Where the function is NaN within the step the element
    has no number (``unknown``); where the step crosses a kink ``bounds`` holds the two
    one-sided slopes. ``precise`` (the reference when SymPy is not used): the gradient is
    Richardson's extrapolation of central differences, with an error estimate per element
    (``evaluate_with_error``); otherwise one central difference at 1e-6 (the ``numeric``
    third opinion, domain edges)."""

    by = "numeric"

    def __init__(
        self,
        expression: Program,
        shapes: dict[str, Shape],
        limits: Limits,
        bounds: bool = False,
        precise: bool = False,
    ) -> None:
        self.expression, self.shapes, self.limits = expression, shapes, limits
        self.bounds = bounds or has_kink(expression)
        self.precise = precise

    def forward(self, values: dict[str, np.ndarray]) -> np.ndarray:
        from autogradcli.torchside.build import forward_numpy

        return forward_numpy(self.expression, values)

    def forward_at(
        self, base: dict[str, np.ndarray]
    ) -> Callable[[dict[str, np.ndarray]], np.ndarray]:
        """The forward pass with every ``detach(...)`` held at its value at ``base``: what
        central differences around ``base`` must vary (PyTorch's graph stops there)."""
        from autogradcli.torchside.build import detached_values, forward_numpy

        pinned = detached_values(self.expression, base)
        if not pinned:
            return self.forward
        return lambda values: forward_numpy(self.expression, values, pinned)

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray | None,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
    ) -> Expected:
        return self.evaluate_with_error(values, weights, differentiate)[0]

    def evaluate_with_error(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray | None,
        differentiate: frozenset[str],
    ) -> tuple[Expected, dict[str, Extrapolated] | None]:
        """The reference's numbers and, when ``precise``, each gradient's estimate (its
        ``value`` is the gradient given; at a kink within 1e-6 the central difference there,
        judged by the one-sided slopes, error 0; where Richardson has no estimate the same
        central difference, error inf). Not ``precise``: no estimate (None)."""
        from autogradcli.reference.numeric import extrapolated_slopes, numeric_slopes

        names = [n for n in self.expression.variables if n in differentiate]
        forward = self.forward_at(values)
        accuracy: dict[str, Extrapolated] | None = None
        if self.precise:
            both = extrapolated_slopes(forward, values, weights, names)
            slopes = {n: both[n][0] for n in names}
            accuracy = {n: both[n][1] for n in names}
        else:
            slopes = numeric_slopes(forward, values, weights, names)
        expected = Expected(output=forward(values), grads={n: slopes[n].central for n in names})
        for name in names:
            s = slopes[name]
            off = s.off_domain()
            expected.kinks[name] = np.zeros(off.shape, dtype=bool)
            expected.unknown[name] = off
            expected.kink_notes[name] = {"off_domain"} if off.any() else set()
            across = np.zeros(off.shape, dtype=bool)
            if self.bounds:
                across = s.across_kink() & ~off
                low, high = np.fmin(s.left, s.right), np.fmax(s.left, s.right)
                expected.bounds[name] = (
                    np.where(across, low, np.nan),
                    np.where(across, high, np.nan),
                )
            if accuracy is not None:
                found = accuracy[name]
                settled = np.isfinite(found.error) & ~across & ~off
                grads = np.where(settled, found.value, s.central)
                expected.grads[name] = grads
                error = np.where(across, 0.0, np.where(settled, found.error, np.inf))
                rounding = np.where(settled, found.rounding, 0.0)
                accuracy[name] = Extrapolated(grads, error, rounding)
        return expected, accuracy

    def value(self, node: Node, values: dict[str, np.ndarray]) -> np.ndarray:
        return self.value_range(node, values)[0]

    def value_range(
        self, node: Node, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        from autogradcli.torchside.build import forward_numpy

        part = Program("", node, self.expression.variables, self.expression.steps)
        out = forward_numpy(part, values)
        return out, np.zeros(out.shape, dtype=bool)

    def derivative_text(self, name: str, weights_are_ones: bool = True) -> str | None:
        return None

    def derivative_latex(self, name: str, weights_are_ones: bool = True) -> str | None:
        return None

    def for_program(self, expression: Program, shapes: dict[str, Shape]) -> NumericModel:
        return NumericModel(expression, shapes, self.limits, self.bounds, self.precise)


__all__ = ["Model", "NumericModel", "Reference", "exact_or_none"]
