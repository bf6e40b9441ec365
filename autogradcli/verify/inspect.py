"""``--inspect``: each named tensor as PyTorch holds it after the last pass, checked."""

from __future__ import annotations

from collections import Counter

import numpy as np

from autogradcli.bind import named_tensors
from autogradcli.lang.display import display_names
from autogradcli.lang.tree import Call, Leaf, Node, Program, cut
from autogradcli.messages import GRAD_NONE_MADE_BY
from autogradcli.policy.compare import Marks, compare
from autogradcli.reference import Model
from autogradcli.results import TensorResult, VariableResult
from autogradcli.torchside.build import Trace, to_numpy
from autogradcli.torchside.graph import owners
from autogradcli.torchside.run import Session, read_grad, tensor_of


def inspect_tensors(
    session: Session,
    trace: Trace,
    model: Model,
    variables: dict[str, VariableResult],
    scale: int,
) -> tuple[TensorResult, ...]:
    """Each named tensor after the last pass, checked against the reference (SymPy only).

    A kept ``.grad`` is checked against the derivative of the output with respect to the
    operation that made the tensor (so ``z = y`` and ``z = +y``, which are ``y`` itself in
    PyTorch, get ``y``'s whole gradient, as PyTorch gives it)."""
    bound = session.bound
    made_by = owners(bound.program, trace)
    leaf_names = {id(t): n for n, t in session.leaves.items()}
    exact = model.by == "SymPy"
    rows = []
    named = named_tensors(bound.program)
    shown = _row_names(bound.program, [n for n, _, _ in named])
    for name, kind, node in named:
        tensor = session.leaves[name] if kind == "input" else tensor_of(trace, name)
        value = to_numpy(tensor)
        value_expected = value_agree = None
        if node is not None and exact:
            value_expected = model.value(node, session.seen)
            value_agree = compare(value, value_expected, *bound.settings.tolerance).agree
        grad, why = read_grad(tensor)
        if why == "untracked" and isinstance(node, Call):  # no_grad, inference_mode, detach
            why = GRAD_NONE_MADE_BY.get(node.func, why)
        if why == "untracked" and _turned_off(bound.program.leaves, name):
            why = "requires_grad_off"
        grad_expected = grad_agree = None
        leaf = leaf_names.get(id(tensor))
        if leaf is not None and leaf in variables and variables[leaf].requires_grad:
            grad, grad_expected = variables[leaf].grad, variables[leaf].expected
            grad_agree, why = variables[leaf].agree, None
        elif grad is not None and tensor.grad_fn is not None:
            why = None
            if exact:
                origin = made_by[id(tensor.grad_fn)].node
                kept, kinks = _kept_grad(session, model, origin, name, value.shape)
                grad_expected = scale * kept
                tolerance = bound.settings.tolerance
                grad_agree = compare(grad, grad_expected, *tolerance, Marks(kinks)).agree
        rows.append(
            TensorResult(
                name=shown.get(name, name),
                kind=kind,
                value=value,
                requires_grad=tensor.requires_grad,
                is_leaf=tensor.is_leaf,
                grad_fn=None if tensor.grad_fn is None else type(tensor.grad_fn).__name__,
                value_expected=value_expected,
                value_agree=value_agree,
                grad=grad,
                grad_expected=grad_expected,
                grad_agree=grad_agree,
                grad_note_code=why,
            )
        )
    return tuple(rows)


def _row_names(program: Program, names: list[str]) -> dict[str, str]:
    """Each row's name as the user sees it (``display_names``: ``y (line 3)``, ``x (input)``
    where values share a name, one row each); a name only one row holds is written plain
    (``y`` after ``y += 1``: the value before the change is no row of its own)."""
    shown = display_names(program)
    words = Counter(program.shown(n) for n in names)
    return {n: program.shown(n) if words[program.shown(n)] == 1 else shown.get(n, n) for n in names}


def _kept_grad(
    session: Session, model: Model, origin: Node, name: str, shape: tuple[int, ...]
) -> tuple[np.ndarray, np.ndarray]:
    """The reference's derivative of the output with respect to the tensor ``origin`` made
    (and its kinks): the program with that operation cut out and made an input of its own."""
    bound = session.bound
    target = f"@{name}"
    sub = model.for_program(cut(bound.program, origin, target), {**bound.shapes, target: shape})
    value = model.value(origin, session.seen)
    expected = sub.evaluate(
        {**session.seen, target: value}, session.seen_weights, frozenset({target})
    )
    return expected.grads[target], expected.kinks[target]


def _turned_off(leaves: tuple[Leaf, ...], name: str) -> bool:
    """A leaf made with ``requires_grad=True`` whose flag a later line turned off."""
    leaf = next((v for v in leaves if v.name == name), None)
    return leaf is not None and not leaf.requires_grad and "requires_grad=True" in leaf.source
