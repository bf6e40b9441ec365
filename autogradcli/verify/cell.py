"""Stage 5 for a notebook cell: what SymPy expects at each line, and the checks.

A leaf's expected ``.grad`` is the sum of SymPy's gradients of every ``backward()`` that
reached it since its last reset (``x.grad.zero_()`` makes it 0, ``x.grad = None`` None).
Each backward() is also checked on its own, from fresh leaves, by ``grad``'s pipeline.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from autogradcli.lang.tree import Backward, Binary, Call, Name, Node, Num, operands, walk
from autogradcli.lang.vocabulary import OPS
from autogradcli.policy.compare import Marks, compare
from autogradcli.policy.verdict import AGREE, DISAGREE, ROUNDING, Cause, settle_confirmed
from autogradcli.results import GradResult, LeafGrad


@dataclass
class Ledger:
    """SymPy's side of the leaves' ``.grad`` as the cell runs."""

    rtol: float
    atol: float
    relative: float  # the rounding bound of one element of .grad (verdict.py)
    expected: dict[str, np.ndarray | None] = field(default_factory=dict)
    accepted: dict[str, np.ndarray] = field(default_factory=dict)  # kinks the checks left out
    verdicts: dict[str, list[str]] = field(default_factory=dict)  # each backward's, since reset
    causes: dict[str, Cause | None] = field(default_factory=dict)
    derivative: dict[str, str | None] = field(default_factory=dict)

    reached: set[str] = field(default_factory=set)  # the leaves the last backward() reached
    unchecked: set[str] = field(default_factory=set)  # reached by a pass run unchecked
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)  # the leaves' shapes

    def add(self, check: GradResult) -> None:
        """One ``backward()``: its own gradients, checked, added to the sums."""
        self.reached = set()
        unsent = {
            n for note in check.notes if note.code == "grad_unsent" for n in note.data["inputs"]
        }
        for name, v in check.variables.items():
            if not v.requires_grad or v.expected is None or v.grad is None or name in unsent:
                continue  # backward() sent no gradient (unsent): PyTorch leaves .grad as it was
            before = self.expected.get(name)
            self.expected[name] = v.expected if before is None else before + v.expected
            with np.errstate(all="ignore"):
                differs = ~np.isclose(v.grad, v.expected, rtol=self.rtol, atol=self.atol)
            # elements the check accepted though they differ: a kink (PyTorch's convention)
            left_out = differs & np.isfinite(v.grad) if v.verdict == AGREE else differs & False
            self.accepted[name] = self.accepted.get(name, left_out) | left_out
            self.verdicts.setdefault(name, []).append(v.verdict or AGREE)
            self.causes[name] = v.cause or self.causes.get(name)
            self.derivative[name] = v.derivative
            self.reached.add(name)

    def skip(self, names: set[str]) -> None:
        """A loop's ``backward()`` run without a check: the leaves it reaches have no
        expected ``.grad`` until their next reset."""
        self.reached = set()
        for name in names:
            self.expected[name] = None
            self.unchecked.add(name)

    def reset(self, name: str, to: str) -> None:
        """``x.grad.zero_()`` or ``x.grad = None``."""
        before = self.expected.get(name)
        if name in self.unchecked and to == "zero":  # zeros, whatever the unchecked sum was
            grad_shape = self.shapes.get(name)
            before = None if grad_shape is None else np.zeros(grad_shape)
        self.unchecked.discard(name)
        self.expected[name] = None if to == "none" or before is None else np.zeros_like(before)
        self.accepted.pop(name, None)
        self.verdicts[name] = []
        self.causes[name] = None

    def leaf(self, name: str, grad: np.ndarray | None, derivative: bool) -> LeafGrad:
        """The leaf's ``.grad`` now against the sum SymPy expects."""
        want = self.expected.get(name)
        if name in self.unchecked:  # a loop's pass run without a check
            return LeafGrad(name, grad, None)
        text = self.derivative.get(name) if derivative and name in self.reached else None
        if grad is None or want is None:
            verdict = None if grad is None and want is None else DISAGREE
            cause = None if verdict is None else Cause("grad_presence", {"none": grad is None})
            return LeafGrad(name, grad, want, None, verdict, cause, text)
        check = compare(
            grad,
            want,
            self.rtol,
            self.atol,
            Marks(self.accepted.get(name)),
            self.relative,
        )
        earlier = self.verdicts.get(name, [])
        verdict = settle_confirmed(check, DISAGREE not in earlier)
        cause = None
        if verdict == ROUNDING:
            cause = self.causes.get(name)
        elif verdict == DISAGREE:
            cause = self.causes.get(name) or Cause(
                "accumulation", {"error": check.max_abs_error, "backwards": len(earlier)}
            )
        return LeafGrad(name, grad, want, check.max_abs_error, verdict, cause, text)


def requires_grad(node: Node, steps: dict[str, Node], tracked: frozenset[str]) -> bool:
    """Whether PyTorch tracks the value of ``node``: it reaches a leaf with
    requires_grad=True other than through detach() (a comparison gives booleans, untracked)."""
    if isinstance(node, Name):
        return node.id in tracked or (
            node.id in steps and requires_grad(steps[node.id], steps, tracked)
        )
    if isinstance(node, Num):
        return False
    if isinstance(node, Call) and OPS[node.func].kind == "detach":
        return False
    if isinstance(node, Binary) and node.op in ("<", "<=", ">", ">=", "==", "!="):
        return False
    return any(requires_grad(n, steps, tracked) for n in operands(node))


def needed(target: Node, gradient: Node | None, steps: dict[str, Node]) -> list[str]:
    """The steps a backward() target (and its gradient) reads, in program order."""
    seen = reads(target, gradient, steps)
    return [n for n in steps if n in seen]


def reads(target: Node, gradient: Node | None, steps: dict[str, Node]) -> set[str]:
    """The steps a backward() target (and its gradient) reads, as a set: found from the
    target, without a pass over every step of the program (``needed`` orders them)."""
    seen: set[str] = set()
    stack = [target] + ([] if gradient is None else [gradient])
    while stack:
        for part in walk(stack.pop()):
            if isinstance(part, Name) and part.id in steps and part.id not in seen:
                seen.add(part.id)
                stack.append(steps[part.id])
    return seen


def backwards(statements: tuple[object, ...]) -> int:
    """How many backward() calls a cell makes."""
    return sum(isinstance(s, Backward) for s in statements)
