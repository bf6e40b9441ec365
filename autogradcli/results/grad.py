"""``grad``'s result: each variable's ``.grad`` beside the reference, hooks, passes,
named tensors (``inspect``), the chain rule node by node (``explain``), the author's
expected gradients and the suggestions."""

from __future__ import annotations

import functools
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from autogradcli.lang.display import display_names as display_names  # re-exported
from autogradcli.lang.display import displayed as displayed
from autogradcli.lang.display import relabel, relabel_latex
from autogradcli.messages import CLI, PYTHON, Style, cause_text
from autogradcli.notes import Note
from autogradcli.policy.verdict import (
    AGREE,
    DISAGREE,
    ROUNDING,
    Cause,
    Verdict,
    agrees,
    worst,
)
from autogradcli.results.base import (
    SCHEMA_VERSION,
    Frozen,
    Judged,
    cause_dict,
    maybe,
    note_codes,
    note_texts,
    plain,
    strict,
)


@dataclass(frozen=True)
class VariableResult(Frozen):
    """One variable: its value, autograd's ``.grad``, the reference's gradient, the check."""

    name: str
    value: np.ndarray
    requires_grad: bool
    grad: np.ndarray | None = None
    expected: np.ndarray | None = None
    derivative: str | None = None
    chain: str | None = None
    max_abs_error: float | None = None
    notes: tuple[Note, ...] = ()
    numeric: np.ndarray | None = None  # central differences in float64 (--numeric)
    numeric_max_abs_error: float | None = None
    verdict: str | None = None  # agree, rounding or disagree (verdict.py); None: not checked
    cause: Cause | None = None  # why it is rounding or disagree
    numeric_verdict: str | None = None
    latex: str | None = None  # SymPy's derivative as LaTeX
    chain_latex: str | None = None  # the chain-rule line as LaTeX

    @property
    def agree(self) -> bool | None:
        return agrees(self.verdict)

    @property
    def numeric_agree(self) -> bool | None:
        return agrees(self.numeric_verdict)

    @property
    def rounding(self) -> str | None:
        """The sentence for a ≈ verdict."""
        return cause_text(self.cause) if self.verdict == ROUNDING and self.cause else None

    def to_dict(self, style: Style = CLI, shown: dict[str, str] | None = None) -> dict[str, Any]:
        """``shown``: the names as the user sees them (``display_names``) for the texts."""
        shown = shown or {}
        return {
            "value": plain(self.value),
            "shape": list(self.value.shape),
            "requires_grad": self.requires_grad,
            "grad": maybe(self.grad),
            "expected": maybe(self.expected),
            "derivative": relabel(self.derivative, shown),
            "latex": relabel_latex(self.latex, shown),
            "chain_rule": relabel(self.chain, shown),
            "chain_rule_latex": relabel_latex(self.chain_latex, shown),
            "max_abs_error": self.max_abs_error,
            "agree": self.agree,
            "numeric": maybe(self.numeric),
            "numeric_max_abs_error": self.numeric_max_abs_error,
            "numeric_agree": self.numeric_agree,
            "verdict": self.verdict,
            "cause": cause_dict(self.cause),
            "numeric_verdict": self.numeric_verdict,
            "rounding": self.rounding,
            "notes": note_texts(self.notes, style),
            "note_codes": note_codes(self.notes),
        }


@dataclass(frozen=True)
class HookResult(Frozen):
    """One of the program's gradient hooks in the first backward pass: the gradient it
    received and what it returned (None: nothing, the gradient went on unchanged), from
    PyTorch and from the reference. ``received`` None: no gradient reached it."""

    tensor: str
    hook: str
    received: np.ndarray | None
    received_expected: np.ndarray | None
    returned: np.ndarray | None
    returned_expected: np.ndarray | None
    agree: bool | None

    def to_dict(self) -> dict[str, Any]:
        return {
            "tensor": self.tensor,
            "hook": self.hook,
            "received": maybe(self.received),
            "received_expected": maybe(self.received_expected),
            "returned": maybe(self.returned),
            "returned_expected": maybe(self.returned_expected),
            "agree": self.agree,
        }


@dataclass(frozen=True)
class TensorResult(Frozen):
    """One named tensor (input, step or output) as PyTorch holds it after the last pass.

    ``value_expected``/``grad_expected`` are the reference's; ``grad_note_code`` says why
    ``.grad`` is None (a glossary key, ``untracked`` or ``leaf_only``)."""

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
    grad_note_code: str | None = None  # why grad is None (messages.grad_none_text)

    @property
    def agree(self) -> bool | None:
        checks = [c for c in (self.value_agree, self.grad_agree) if c is not None]
        return all(checks) if checks else None

    def grad_note_text(self, style: Style = PYTHON) -> str | None:
        from autogradcli.messages import grad_none_text

        code = self.grad_note_code
        return None if code is None else grad_none_text(code, style)

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "shape": list(self.value.shape),
            "value": plain(self.value),
            "value_expected": maybe(self.value_expected),
            "requires_grad": self.requires_grad,
            "is_leaf": self.is_leaf,
            "grad_fn": self.grad_fn,
            "grad": maybe(self.grad),
            "grad_expected": maybe(self.grad_expected),
            "grad_note": self.grad_note_text(style),
            "grad_note_code": self.grad_note_code,
            "agree": self.agree,
        }


@dataclass(frozen=True)
class PassResult(Frozen):
    """``.grad`` after pass ``index`` (1-based) of forward + backward, and the expected ``k x``."""

    index: int
    grads: dict[str, np.ndarray]
    expected: dict[str, np.ndarray]
    verdict: str

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict))

    def to_dict(self) -> dict[str, Any]:
        return {
            "pass": self.index,
            "grads": {n: plain(g) for n, g in self.grads.items()},
            "expected": {n: plain(g) for n, g in self.expected.items()},
            "agree": self.agree,
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class Suggestion(Frozen):
    """A stable form of the expression (``replaced``: pattern and replacement pairs) and
    what its re-run gave; it is a suggestion only when ``confirmed`` (the re-run agrees)."""

    replaced: tuple[tuple[str, str], ...]
    expression: str
    verdict: str
    confirmed: bool
    output: np.ndarray
    grads: dict[str, np.ndarray]
    cause: Cause | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "replace": [{"pattern": a, "with": b} for a, b in self.replaced],
            "expression": self.expression,
            "confirmed": self.confirmed,
            "rerun": {
                "verdict": self.verdict,
                "output": plain(self.output),
                "grads": {n: plain(g) for n, g in self.grads.items()},
                "cause": cause_dict(self.cause),
            },
        }


@dataclass(frozen=True)
class Flow(Frozen):
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


@dataclass(frozen=True)
class NodeStep(Frozen):
    """One node of the backward pass, in the order PyTorch ran it."""

    index: int
    grad_fns: tuple[str, ...]  # PyTorch's nodes for this operation (2/x makes two)
    label: str
    arriving: np.ndarray
    arriving_expected: np.ndarray
    arriving_agree: bool
    flows: tuple[Flow, ...] = ()
    leaf: str | None = None  # for AccumulateGrad: the leaf whose .grad receives it

    @property
    def agree(self) -> bool:
        return self.arriving_agree and all(f.agree for f in self.flows)

    def to_dict(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "grad_fn": list(self.grad_fns),
            "label": self.label,
            "leaf": self.leaf,
            "arriving": plain(self.arriving),
            "arriving_expected": plain(self.arriving_expected),
            "arriving_agree": self.arriving_agree,
            "flows": [f.to_dict() for f in self.flows],
            "agree": self.agree,
        }


@dataclass(frozen=True)
class VjpCheck(Frozen):
    """What ``out.backward(w)`` computes for one input: ``J^T w`` three ways."""

    name: str
    jacobian: np.ndarray | None  # SymPy, shape (out.numel, x.numel); None when too large
    jtw: np.ndarray  # SymPy's J^T w, shaped like x
    backward: np.ndarray  # autograd: x.grad after out.backward(w)
    sum_grad: np.ndarray  # autograd: gradient of sum(out * w)
    agree: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "jacobian": maybe(self.jacobian),
            "jtw": plain(self.jtw),
            "backward": plain(self.backward),
            "grad_of_sum_out_times_w": plain(self.sum_grad),
            "agree": self.agree,
        }


@dataclass(frozen=True)
class Explanation(Frozen):
    """The chain rule as PyTorch ran it (first pass), and the external gradient spelled out."""

    steps: tuple[NodeStep, ...]
    weights: np.ndarray | None = None
    vjp: tuple[VjpCheck, ...] = ()

    @property
    def agree(self) -> bool:
        return all(s.agree for s in self.steps) and all(v.agree for v in self.vjp)

    def relabeled(self, shown: dict[str, str]) -> Explanation:
        """The same rows with names as the user sees them (``display_names``): each local
        derivative's text, each leaf and each input of the vector-Jacobian check
        (``x (input)``)."""
        if not shown:
            return self
        steps = tuple(
            replace(
                s,
                leaf=None if s.leaf is None else shown.get(s.leaf, s.leaf),
                flows=tuple(replace(f, local=relabel(f.local, shown) or f.local) for f in s.flows),
            )
            for s in self.steps
        )
        vjp = tuple(replace(v, name=shown.get(v.name, v.name)) for v in self.vjp)
        return replace(self, steps=steps, vjp=vjp)

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [s.to_dict() for s in self.steps],
            "weights": maybe(self.weights),
            "vjp": {v.name: v.to_dict() for v in self.vjp},
            "agree": self.agree,
        }


@dataclass(frozen=True)
class Expectation(Frozen):
    """A gradient the author expects (``expect=``): whether autograd and SymPy match it."""

    name: str
    value: np.ndarray
    autograd_agree: bool
    sympy_agree: bool

    @property
    def agree(self) -> bool:
        return self.autograd_agree and self.sympy_agree

    def to_dict(self) -> dict[str, Any]:
        return {
            "value": plain(self.value),
            "autograd_agree": self.autograd_agree,
            "sympy_agree": self.sympy_agree,
            "agree": self.agree,
        }


@dataclass(frozen=True)
class GradResult(Judged):
    """Everything ``grad`` found; ``verdict`` and ``agree`` (exit code 0 or 1) sum it up."""

    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    output: np.ndarray
    output_expected: np.ndarray
    output_max_abs_error: float
    variables: dict[str, VariableResult]
    passes: tuple[PassResult, ...]
    weights: np.ndarray | None = None
    seed: int | None = None
    output_name: str = "out"
    mode: str = "one pass"
    zero_grad: bool = False
    notes: tuple[Note, ...] = ()
    tensors: tuple[TensorResult, ...] | None = None
    explanation: Explanation | None = None
    hooks: tuple[HookResult, ...] = ()
    expected_by: str = "SymPy"  # or "numeric" when SymPy's exact check was not available
    output_verdict: str = AGREE
    output_cause: Cause | None = None
    rounding_bound: float = 0.0  # the relative part of the rounding bound (verdict.py)
    strict: bool = False  # a ≈ verdict fails ``agree``
    suggestions: tuple[Suggestion, ...] = ()
    expectations: tuple[Expectation, ...] = ()  # the author's expected gradients (expect=)

    @property
    def output_agree(self) -> bool:
        return bool(agrees(self.output_verdict))

    @property
    def grads(self) -> dict[str, np.ndarray | None]:
        """Each variable's ``.grad`` after the last pass."""
        return {n: v.grad for n, v in self.variables.items()}

    @property
    def expected(self) -> dict[str, np.ndarray | None]:
        """The reference's gradient of each variable (times the passes that accumulate)."""
        return {n: v.expected for n, v in self.variables.items()}

    @property
    def derivatives(self) -> dict[str, str | None]:
        """SymPy's derivative of each variable, as text."""
        return {n: v.derivative for n, v in self.variables.items()}

    @property
    def output_rounding(self) -> str | None:
        """The sentence for a ≈ verdict of the output."""
        if self.output_verdict == ROUNDING and self.output_cause is not None:
            return cause_text(self.output_cause)
        return None

    @property
    def verdict(self) -> Verdict:
        """agree, rounding or disagree: the worst of every check."""
        checks = [self.output_verdict, *(p.verdict for p in self.passes)]
        checks += [v.verdict for v in self.variables.values()]
        checks += [v.numeric_verdict for v in self.variables.values()]
        booleans = [t.agree for t in self.tensors or ()]
        booleans += [h.agree for h in self.hooks]
        booleans += [] if self.explanation is None else [self.explanation.agree]
        booleans += [e.agree for e in self.expectations]
        checks += [DISAGREE for b in booleans if b is False]
        return worst(checks)

    @property
    def agree(self) -> bool:
        """Whether the exit code is 0: agree, or rounding unless ``strict``."""
        return bool(agrees(self.verdict, self.strict))

    def causes(self) -> list[Cause]:
        """The causes of the output's and each variable's verdict, in that order."""
        found = [self.output_cause, *(v.cause for v in self.variables.values())]
        return [c for c in found if c is not None]

    def first_cause(self) -> Cause | None:
        """The cause behind the overall verdict: the first disagreement's, else the first."""
        pairs = [(self.output_verdict, self.output_cause)]
        pairs += [(v.verdict, v.cause) for v in self.variables.values()]
        for verdict, cause in pairs:
            if verdict == self.verdict and cause is not None:
                return cause
        return None

    @functools.cached_property
    def display(self) -> dict[str, str]:
        """Each name the program holds as the user wrote it (``display_names``)."""
        seen = [*self.variables, *self.derivatives.values(), self.output_name]
        seen += [v.chain for v in self.variables.values()]
        seen += [v.chain_latex for v in self.variables.values()]
        steps = () if self.explanation is None else self.explanation.steps
        seen += [f.local for step in steps for f in step.flows]
        labelled = any(not t.name.isidentifier() for t in self.tensors or ())  # x (input)
        given = frozenset(self.variables)
        return displayed(self.expression, given, filter(None, seen), force=labelled)

    def to_dict(self, style: Style = CLI, shown: dict[str, str] | None = None) -> dict[str, Any]:
        """The ``--json`` document: arrays become numbers or nested lists, non-finite
        numbers the strings "NaN", "Infinity" and "-Infinity". Names are the user's
        (``display_names``: ``y (line 3)`` where several values share ``y``; ``shown``: a
        cell's, for the check of one of its lines)."""
        shown = self.display if shown is None else shown

        def name(internal: str) -> str:
            return shown.get(internal, internal)

        passes = [p.to_dict() for p in self.passes]
        for entry in passes:
            for key in ("grads", "expected"):
                entry[key] = {name(n): g for n, g in entry[key].items()}
        explanation = None if self.explanation is None else self.explanation.relabeled(shown)
        explain = None if explanation is None else explanation.to_dict()
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "grad",
                "expression": self.expression,
                "device": self.device,
                "dtype": self.dtype,
                "tolerance": {"rtol": self.rtol, "atol": self.atol},
                "expected_by": self.expected_by,
                "seed": self.seed,
                "output": {
                    "name": name(self.output_name),
                    "value": plain(self.output),
                    "expected": plain(self.output_expected),
                    "shape": list(self.output.shape),
                    "max_abs_error": self.output_max_abs_error,
                    "agree": self.output_agree,
                    "verdict": self.output_verdict,
                    "cause": cause_dict(self.output_cause),
                    "rounding": self.output_rounding,
                },
                "weights": maybe(self.weights),
                "variables": {name(n): v.to_dict(style, shown) for n, v in self.variables.items()},
                "mode": self.mode,
                "passes": passes,
                "tensors": None
                if self.tensors is None
                else {t.name: t.to_dict(style) for t in self.tensors},
                "explain": explain,
                "hooks": [{**h.to_dict(), "tensor": name(h.tensor)} for h in self.hooks],
                "notes": note_texts(self.notes, style),
                "note_codes": note_codes(self.notes),
                "suggestions": [x.to_dict() for x in self.suggestions],
                "expect": {e.name: e.to_dict() for e in self.expectations},
                **self.verdict_fields(),
            }
        )
