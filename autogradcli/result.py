"""Plain result objects: what was computed and checked, free of torch, ready to render."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np


@dataclass
class VariableResult:
    """One variable: its value, autograd's ``.grad``, SymPy's expected gradient, the check."""

    name: str
    value: np.ndarray
    requires_grad: bool
    grad: np.ndarray | None = None
    expected: np.ndarray | None = None
    derivative: str | None = None
    chain: str | None = None
    max_abs_error: float | None = None
    agree: bool | None = None
    notes: list[str] = field(default_factory=list)
    numeric: np.ndarray | None = None  # central differences in float64 (--numeric)
    numeric_max_abs_error: float | None = None
    numeric_agree: bool | None = None
    rounding: str | None = None  # a low-precision mismatch that float64 does not have


@dataclass
class TensorResult:
    """One named tensor (input, step or output) as PyTorch holds it after the last pass.

    ``value_expected``/``grad_expected`` are SymPy's; ``grad_note`` says why ``.grad`` is None.
    """

    name: str
    kind: str  # "input", "step" or "output"
    value: np.ndarray
    requires_grad: bool
    is_leaf: bool
    grad_fn: str | None
    value_expected: np.ndarray | None = None
    value_agree: bool | None = None
    grad: np.ndarray | None = None
    grad_expected: np.ndarray | None = None
    grad_agree: bool | None = None
    grad_note: str | None = None

    @property
    def agree(self) -> bool | None:
        checks = [c for c in (self.value_agree, self.grad_agree) if c is not None]
        return all(checks) if checks else None

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "shape": list(self.value.shape),
            "value": plain(self.value),
            "value_expected": _maybe(self.value_expected),
            "requires_grad": self.requires_grad,
            "is_leaf": self.is_leaf,
            "grad_fn": self.grad_fn,
            "grad": _maybe(self.grad),
            "grad_expected": _maybe(self.grad_expected),
            "grad_note": self.grad_note,
            "agree": self.agree,
        }


@dataclass
class PassResult:
    """``.grad`` after pass ``index`` (1-based) of forward + backward, and the expected ``k x``."""

    index: int
    grads: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    agree: bool


@dataclass
class GradResult:
    """Everything ``compute_gradient`` found; ``agree`` is the verdict (exit code 0 or 1)."""

    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    output: np.ndarray
    output_expected: np.ndarray
    output_max_abs_error: float
    output_agree: bool
    variables: dict[str, VariableResult]
    passes: list[PassResult]
    weights: np.ndarray | None = None
    seed: int | None = None
    output_name: str = "out"
    mode: str = "one pass"
    zero_grad: bool = False
    notes: list[str] = field(default_factory=list)
    tensors: list[TensorResult] | None = None
    explanation: Explanation | None = None
    expected_by: str = "SymPy"  # or "numeric" when SymPy's exact check was not available
    output_rounding: str | None = None

    @property
    def agree(self) -> bool:
        checks = [self.output_agree, *(p.agree for p in self.passes)]
        checks += [v.agree for v in self.variables.values() if v.agree is not None]
        checks += [v.numeric_agree for v in self.variables.values() if v.numeric_agree is not None]
        checks += [t.agree for t in self.tensors or () if t.agree is not None]
        if self.explanation is not None:
            checks.append(self.explanation.agree)
        return all(checks)

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready dict; arrays become numbers or nested lists (non-finite stay floats)."""
        return {
            "expression": self.expression,
            "device": self.device,
            "dtype": self.dtype,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "expected_by": self.expected_by,
            "seed": self.seed,
            "output": {
                "name": self.output_name,
                "value": plain(self.output),
                "expected": plain(self.output_expected),
                "shape": list(self.output.shape),
                "max_abs_error": self.output_max_abs_error,
                "agree": self.output_agree,
                "rounding": self.output_rounding,
            },
            "weights": None if self.weights is None else plain(self.weights),
            "variables": {
                name: {
                    "value": plain(v.value),
                    "shape": list(v.value.shape),
                    "requires_grad": v.requires_grad,
                    "grad": None if v.grad is None else plain(v.grad),
                    "expected": None if v.expected is None else plain(v.expected),
                    "derivative": v.derivative,
                    "chain_rule": v.chain,
                    "max_abs_error": v.max_abs_error,
                    "agree": v.agree,
                    "numeric": _maybe(v.numeric),
                    "numeric_max_abs_error": v.numeric_max_abs_error,
                    "numeric_agree": v.numeric_agree,
                    "rounding": v.rounding,
                    "notes": v.notes,
                }
                for name, v in self.variables.items()
            },
            "mode": self.mode,
            "passes": [
                {
                    "pass": p.index,
                    "grads": {n: plain(g) for n, g in p.grads.items()},
                    "expected": {n: plain(g) for n, g in p.expected.items()},
                    "agree": p.agree,
                }
                for p in self.passes
            ],
            "tensors": None
            if self.tensors is None
            else {t.name: t.to_dict() for t in self.tensors},
            "explain": None if self.explanation is None else self.explanation.to_dict(),
            "notes": self.notes,
            "agree": self.agree,
        }


def _maybe(array: np.ndarray | None) -> Any:
    return None if array is None else plain(array)


def plain(array: np.ndarray) -> Any:
    """A 0-d array as a float, others as nested lists of floats."""
    return np.asarray(array, dtype=np.float64).tolist()


@dataclass
class Flow:
    """The gradient one node passes to one input: arriving × local derivative, reduced."""

    to: str
    local: str  # SymPy's local derivative, in terms of the node's inputs
    grad: np.ndarray  # from PyTorch's hook
    expected: np.ndarray  # SymPy
    max_abs_error: float
    agree: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "to": self.to,
            "local_derivative": self.local,
            "grad": plain(self.grad),
            "expected": plain(self.expected),
            "max_abs_error": self.max_abs_error,
            "agree": self.agree,
        }


@dataclass
class NodeStep:
    """One node of the backward pass, in the order PyTorch ran it."""

    index: int
    grad_fns: list[str]  # PyTorch's nodes for this operation (2/x makes two)
    label: str
    arriving: np.ndarray
    arriving_expected: np.ndarray
    arriving_agree: bool
    flows: list[Flow] = field(default_factory=list)
    leaf: str | None = None  # for AccumulateGrad: the leaf whose .grad receives it

    @property
    def agree(self) -> bool:
        return self.arriving_agree and all(f.agree for f in self.flows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "grad_fn": self.grad_fns,
            "label": self.label,
            "leaf": self.leaf,
            "arriving": plain(self.arriving),
            "arriving_expected": plain(self.arriving_expected),
            "arriving_agree": self.arriving_agree,
            "flows": [f.to_dict() for f in self.flows],
            "agree": self.agree,
        }


@dataclass
class VjpCheck:
    """What ``out.backward(w)`` computes for one input: ``J^T w`` three ways."""

    name: str
    jacobian: np.ndarray | None  # SymPy, shape (out.numel, x.numel); None when too large
    jtw: np.ndarray  # SymPy's J^T w, shaped like x
    backward: np.ndarray  # autograd: x.grad after out.backward(w)
    sum_grad: np.ndarray  # autograd: gradient of sum(out * w)
    agree: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "jacobian": _maybe(self.jacobian),
            "jtw": plain(self.jtw),
            "backward": plain(self.backward),
            "grad_of_sum_out_times_w": plain(self.sum_grad),
            "agree": self.agree,
        }


@dataclass
class Explanation:
    """The chain rule as PyTorch ran it (first pass), and the external gradient spelled out."""

    steps: list[NodeStep]
    weights: np.ndarray | None = None
    vjp: list[VjpCheck] = field(default_factory=list)

    @property
    def agree(self) -> bool:
        return all(s.agree for s in self.steps) and all(v.agree for v in self.vjp)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [s.to_dict() for s in self.steps],
            "weights": _maybe(self.weights),
            "vjp": {v.name: v.to_dict() for v in self.vjp},
            "agree": self.agree,
        }


@dataclass
class Block:
    """One block of derivatives (a Jacobian per input, a Hessian per pair of inputs, a K-th
    derivative per input): autograd's numbers, a torch cross-check, and the reference."""

    key: str
    autograd: np.ndarray
    cross: np.ndarray | None  # torch.autograd.functional's answer, where there is one
    cross_name: str
    expected: np.ndarray  # SymPy's (or numeric, see DerivativeResult.expected_by)
    max_abs_error: float
    agree: bool = True
    cross_agree: bool | None = None
    excluded: int = 0
    numeric: np.ndarray | None = None
    numeric_agree: bool | None = None
    rounding: str | None = None  # a low-precision mismatch that float64 does not have

    @property
    def all_agree(self) -> bool:
        return self.agree and self.cross_agree is not False and self.numeric_agree is not False

    def to_dict(self) -> dict[str, Any]:
        return {
            "shape": list(self.autograd.shape),
            "autograd": plain(self.autograd),
            "cross_check": None
            if self.cross is None
            else {"by": self.cross_name, "value": plain(self.cross), "agree": self.cross_agree},
            "expected": plain(self.expected),
            "max_abs_error": self.max_abs_error,
            "excluded": self.excluded,
            "numeric": _maybe(self.numeric),
            "numeric_agree": self.numeric_agree,
            "rounding": self.rounding,
            "agree": self.all_agree,
        }


@dataclass
class JacobianRow:
    """One backward pass of the Jacobian: the one-hot external gradient and the grads."""

    index: tuple[int, ...]
    one_hot: np.ndarray
    grads: dict[str, np.ndarray]

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": list(self.index),
            "one_hot": plain(self.one_hot),
            "grads": {n: plain(g) for n, g in self.grads.items()},
        }


@dataclass
class DerivativeResult:
    """What ``jacobian``, ``hessian`` or ``grad --order K`` found; ``agree`` is the verdict."""

    kind: str  # "jacobian", "hessian" or "order K"
    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    output_shape: list[int]
    values: dict[str, np.ndarray]
    blocks: list[Block]
    rows: list[JacobianRow] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    expected_by: str = "SymPy"
    derivatives: dict[str, str] = field(default_factory=dict)

    @property
    def agree(self) -> bool:
        return all(b.all_agree for b in self.blocks)

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "expression": self.expression,
            "device": self.device,
            "dtype": self.dtype,
            "tolerance": {"rtol": self.rtol, "atol": self.atol},
            "expected_by": self.expected_by,
            "output_shape": self.output_shape,
            "values": {n: plain(v) for n, v in self.values.items()},
            "blocks": {b.key: b.to_dict() for b in self.blocks},
            "derivatives": self.derivatives or None,
            "rows": [r.to_dict() for r in self.rows],
            "notes": self.notes,
            "agree": self.agree,
        }
