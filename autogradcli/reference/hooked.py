"""The reference for a program with gradient hooks (``y.register_hook(lambda g: g * 2)``).

A hook replaces the gradient arriving at its tensor before it flows on, so the gradient of
the inputs is no longer one derivative of the output. The reverse pass is taken in pieces,
as PyTorch takes it: every hooked step is cut out of the program and made an input, the
output's piece gives the gradient arriving at each cut (SymPy's derivatives, as ever), the
latest cut's hooks are applied to it (the hook's body evaluated by the same model), and that
gradient is sent back through the cut's own piece, down to the inputs and the earlier cuts. A
hook on an input applies to its total gradient. The cut values are SymPy's values of those
steps, rounded to float64.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from autogradcli.lang.shapes import Shape, program_shapes
from autogradcli.lang.tree import Hook, Name, Node, Program
from autogradcli.reference import Model, NumericModel, sympy_model
from autogradcli.reference.expected import Expected
from autogradcli.settings import Limits


class HookedModel:
    """A model (SymPy's or the numeric one) with the program's hooks applied in reverse."""

    def __init__(self, base: Model, shapes: dict[str, Shape], limits: Limits) -> None:
        self.base, self.shapes, self.limits = base, shapes, limits
        self.by = base.by
        self.expression = base.expression
        self.received: dict[int, np.ndarray] = {}  # hook index -> the gradient it was given
        self.returned: dict[int, np.ndarray | None] = {}  # ... and what it gave back

    # --- the protocol, delegated where hooks change nothing ------------------------------

    def value(self, node: Node, values: dict[str, np.ndarray]) -> np.ndarray:
        return self.base.value(node, values)

    def value_range(
        self, node: Node, values: dict[str, np.ndarray]
    ) -> tuple[np.ndarray, np.ndarray]:
        return self.base.value_range(node, values)

    def derivative_text(self, name: str, weights_are_ones: bool = True) -> str | None:
        return self.base.derivative_text(name, weights_are_ones)  # of the expression alone

    def derivative_latex(self, name: str, weights_are_ones: bool = True) -> str | None:
        return self.base.derivative_latex(name, weights_are_ones)

    def for_program(self, expression: Program, shapes: dict[str, Shape]) -> Model:
        names = {*expression.variables, *(s.name for s in expression.steps)}
        kept = tuple(h for h in self.expression.hooks if h.target in names)
        base = self.base.for_program(replace(expression, hooks=kept), shapes)
        return hooked(base, shapes, self.limits)

    # --- the reverse pass in pieces -------------------------------------------------------

    def evaluate(
        self,
        values: dict[str, np.ndarray],
        weights: np.ndarray | None,
        differentiate: frozenset[str],
        exact_zeros: bool = False,
    ) -> Expected:
        """The output, and each input's gradient with every hook applied where PyTorch
        applies it."""
        program = self.expression
        steps = [s.name for s in program.steps]
        cuts = [n for n in steps if any(h.target == n for h in program.hooks)]
        shapes = program_shapes(program, self.shapes, self.limits)
        at = {n: _shaped(self.base.value(Name(n), values), shapes[n]) for n in cuts}
        self.received, self.returned = {}, {}
        top = self._piece(program.root, cuts, len(steps))
        found = top.evaluate({**values, **at}, weights, differentiate | set(cuts), exact_zeros)
        total = Expected(
            output=found.output,
            grads={n: found.grads[n] for n in found.grads if n in differentiate},
            output_excluded=found.output_excluded,
            output_huge=found.output_huge,
            arithmetic=found.arithmetic,
        )
        _merge(total, found, differentiate)
        arriving = {n: found.grads[n] for n in cuts}
        unsure = {n: bool(np.any(found.kinks.get(n, False))) for n in cuts}
        for position in reversed(range(len(cuts))):
            name, earlier = cuts[position], cuts[:position]
            sent = self._through(name, arriving[name])
            step = program.step(name)
            assert step is not None
            piece = self._piece(step.node, earlier, steps.index(name))
            known = {**values, **{n: at[n] for n in earlier}}
            part = piece.evaluate(known, sent, differentiate | set(earlier), exact_zeros)
            for n in differentiate:
                total.grads[n] = total.grads[n] + part.grads[n]
            for n in earlier:
                arriving[n] = arriving[n] + part.grads[n]
                unsure[n] = unsure[n] or unsure[name] or bool(np.any(part.kinks.get(n, False)))
            _merge(total, part, differentiate)
            if unsure[name]:  # the gradient arriving here sat at a kink: so does all below
                for n in differentiate:
                    total.kinks[n] = np.ones(np.shape(total.grads[n]), dtype=bool)
        for name in list(total.grads):
            total.grads[name] = self._through(name, total.grads[name])
        return total

    def _piece(self, root: Node, cuts: list[str], before: int) -> Model:
        """The program up to step ``before`` with ``root`` as its output and the ``cuts``
        as inputs of their own."""
        program = self.expression
        steps = tuple(s for s in program.steps[:before] if s.name not in cuts)
        piece = Program(program.text, root, (*program.variables, *cuts), steps)
        shapes = program_shapes(program, self.shapes, self.limits)
        inputs = {n: shapes[n] for n in piece.variables}
        return self.base.for_program(piece, inputs)

    def _through(self, name: str, grad: np.ndarray) -> np.ndarray:
        """``grad`` passed through the hooks on ``name``, in the order they were registered."""
        for index, hook in enumerate(self.expression.hooks):
            if hook.target != name:
                continue
            self.received[index] = grad
            returned = None if hook.body is None else self._apply(hook, grad)
            self.returned[index] = returned
            grad = grad if returned is None else returned
        return grad

    def _apply(self, hook: Hook, grad: np.ndarray) -> np.ndarray:
        assert hook.body is not None
        body = Program(hook.text, hook.body, (hook.param,))
        shapes = {hook.param: tuple(np.shape(grad))}
        if self.by == "SymPy":
            model: Model = sympy_model(body, shapes, self.limits, {hook.param: grad})
        else:
            model = NumericModel(body, shapes, self.limits)
        return _shaped(model.value(hook.body, {hook.param: np.asarray(grad)}), np.shape(grad))


def hooked(model: Model, shapes: dict[str, Shape], limits: Limits) -> Model:
    """``model`` with its program's hooks applied (itself when the program has none)."""
    return HookedModel(model, shapes, limits) if model.expression.hooks else model


def _shaped(value: Any, shape: tuple[int, ...]) -> np.ndarray:
    return np.array(np.broadcast_to(np.asarray(value, dtype=float), shape))


def _merge(total: Expected, part: Expected, names: frozenset[str]) -> None:
    """Where a piece has no ordinary number (a kink, no number, past float64's range), so
    has the whole."""
    for name in names:
        for source, target in (
            (part.kinks, total.kinks),
            (part.unknown, total.unknown),
            (part.huge, total.huge),
        ):
            if name in source:
                mask = np.asarray(source[name], dtype=bool)
                target[name] = target[name] | mask if name in target else mask.copy()
        if name in part.kink_notes:
            total.kink_notes.setdefault(name, set()).update(part.kink_notes[name])
