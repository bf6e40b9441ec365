"""Stage 7: results, immutable values free of torch. ``to_dict()`` is the CLI's ``--json``
document (``schema/`` has its JSON Schema); ``__rich__`` renders the same report as the CLI
(``rich.print(result)``), importing Rich only then."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any

import numpy as np

from autogradcli.messages import CLI, PYTHON, Style, cause_text, note_text
from autogradcli.notes import Note
from autogradcli.policy.compare import Comparison
from autogradcli.policy.verdict import (
    AGREE,
    DISAGREE,
    ROUNDING,
    Cause,
    Verdict,
    agrees,
    worst,
)

SCHEMA_VERSION = 1


def strict(value: Any) -> Any:
    """``value`` with every non-finite float spelled as JSON (RFC 8259) has no number for
    it: the strings "NaN", "Infinity", "-Infinity"."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [strict(v) for v in value]
    return value


def plain(array: np.ndarray) -> Any:
    """A 0-d array as a float, others as nested lists of floats."""
    return np.asarray(array, dtype=np.float64).tolist()


def _maybe(array: np.ndarray | None) -> Any:
    return None if array is None else plain(array)


def cause_dict(cause: Cause | None) -> dict[str, Any] | None:
    """A cause for JSON: its code, its numbers, and the sentence."""
    return None if cause is None else {**cause.to_dict(), "message": cause_text(cause)}


def note_texts(notes: Sequence[Note], style: Style = CLI) -> list[str]:
    return [note_text(n, style) for n in notes]


def note_codes(notes: Sequence[Note]) -> list[dict[str, Any]]:
    return [n.to_dict() for n in notes]


def _lock(value: Any) -> None:
    """Make the arrays in ``value`` (and in its dicts, lists and tuples) read-only."""
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    elif isinstance(value, dict):
        for item in value.values():
            _lock(item)
    elif isinstance(value, list | tuple):
        for item in value:
            _lock(item)


class Frozen:
    """A result's arrays are read-only, like its fields: results are values."""

    def __post_init__(self) -> None:
        for f in fields(self):  # type: ignore[arg-type]
            _lock(getattr(self, f.name))


class Rendered(Frozen):
    """``__rich__`` through the renderers, imported only when used."""

    def __rich__(self) -> Any:
        from autogradcli.render import renderable

        return renderable(self, PYTHON)

    def _repr_html_(self) -> str:
        """The same report as HTML, for Jupyter (the API's words)."""
        from autogradcli.render import html

        return html(self)


class Judged(Rendered):
    """A result with a verdict (``grad``, ``jacobian``, ``hessian``, ``derivative``)."""

    def verdict_fields(self) -> dict[str, Any]:
        """The fields that close a judged result's document: the bound and the verdict."""
        judged: Any = self
        return {
            "rounding_bound": judged.rounding_bound,
            "strict": judged.strict,
            "verdict": judged.verdict,
            "cause": cause_dict(judged.first_cause()),
            "agree": judged.agree,
        }


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

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        return {
            "value": plain(self.value),
            "shape": list(self.value.shape),
            "requires_grad": self.requires_grad,
            "grad": _maybe(self.grad),
            "expected": _maybe(self.expected),
            "derivative": self.derivative,
            "latex": self.latex,
            "chain_rule": self.chain,
            "chain_rule_latex": self.chain_latex,
            "max_abs_error": self.max_abs_error,
            "agree": self.agree,
            "numeric": _maybe(self.numeric),
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
            "received": _maybe(self.received),
            "received_expected": _maybe(self.received_expected),
            "returned": _maybe(self.returned),
            "returned_expected": _maybe(self.returned_expected),
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
            "value_expected": _maybe(self.value_expected),
            "requires_grad": self.requires_grad,
            "is_leaf": self.is_leaf,
            "grad_fn": self.grad_fn,
            "grad": _maybe(self.grad),
            "grad_expected": _maybe(self.grad_expected),
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
            "jacobian": _maybe(self.jacobian),
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [s.to_dict() for s in self.steps],
            "weights": _maybe(self.weights),
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
        """agree, rounding or disagree: the worst of every check (verdict.py)."""
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

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        """The ``--json`` document: arrays become numbers or nested lists, non-finite
        numbers the strings "NaN", "Infinity" and "-Infinity"."""
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
                    "name": self.output_name,
                    "value": plain(self.output),
                    "expected": plain(self.output_expected),
                    "shape": list(self.output.shape),
                    "max_abs_error": self.output_max_abs_error,
                    "agree": self.output_agree,
                    "verdict": self.output_verdict,
                    "cause": cause_dict(self.output_cause),
                    "rounding": self.output_rounding,
                },
                "weights": _maybe(self.weights),
                "variables": {n: v.to_dict(style) for n, v in self.variables.items()},
                "mode": self.mode,
                "passes": [p.to_dict() for p in self.passes],
                "tensors": None
                if self.tensors is None
                else {t.name: t.to_dict(style) for t in self.tensors},
                "explain": None if self.explanation is None else self.explanation.to_dict(),
                "hooks": [h.to_dict() for h in self.hooks],
                "notes": note_texts(self.notes, style),
                "note_codes": note_codes(self.notes),
                "suggestions": [x.to_dict() for x in self.suggestions],
                "expect": {e.name: e.to_dict() for e in self.expectations},
                **self.verdict_fields(),
            }
        )


@dataclass(frozen=True)
class Block(Frozen):
    """One block of derivatives (a Jacobian per input, a Hessian per pair of inputs, a K-th
    derivative per input): autograd's numbers, a torch cross-check, and the reference."""

    key: str
    autograd: np.ndarray
    cross: np.ndarray | None  # torch.autograd.functional's answer, where there is one
    cross_name: str
    expected: np.ndarray  # SymPy's (or numeric, see DerivativeResult.expected_by)
    max_abs_error: float
    check: Comparison
    cross_agree: bool | None = None
    excluded: int = 0
    numeric: np.ndarray | None = None
    numeric_agree: bool | None = None
    reference_verdict: str = AGREE  # against the reference alone
    cause: Cause | None = None
    kink_codes: frozenset[str] = frozenset()
    smooth: np.ndarray | None = None  # entries at a kink where the function is differentiable
    bounds: tuple[np.ndarray, np.ndarray] | None = None  # real kinks' intervals (NaN elsewhere)

    @property
    def verdict(self) -> Verdict:
        """The block's verdict: the reference's, with the cross-check and numeric check."""
        others = [DISAGREE for c in (self.cross_agree, self.numeric_agree) if c is False]
        return worst([self.reference_verdict, *others])

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict))

    @property
    def rounding(self) -> str | None:
        within = self.reference_verdict == ROUNDING and self.cause
        return cause_text(self.cause) if within else None

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
            "verdict": self.verdict,
            "cause": cause_dict(self.cause),
            "agree": self.agree,
        }


@dataclass(frozen=True)
class JacobianRow(Frozen):
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


@dataclass(frozen=True)
class DerivativeResult(Judged):
    """What ``jacobian``, ``hessian`` or ``derivative`` found; ``verdict`` and ``agree``
    sum it up."""

    kind: str  # "jacobian", "hessian", "order K" or "jvp"
    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    output_shape: list[int]
    values: dict[str, np.ndarray]
    blocks: tuple[Block, ...]
    rows: tuple[JacobianRow, ...] = ()
    notes: tuple[Note, ...] = ()
    expected_by: str = "SymPy"
    derivatives: dict[str, str] = field(default_factory=dict)
    rounding_bound: float = 0.0
    strict: bool = False
    seed: int | None = None
    latex: dict[str, str] = field(default_factory=dict)  # SymPy's derivatives as LaTeX
    tangents: dict[str, np.ndarray] = field(default_factory=dict)  # jvp's v, per input

    @property
    def verdict(self) -> Verdict:
        return worst(b.verdict for b in self.blocks)

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict, self.strict))

    def first_cause(self) -> Cause | None:
        return next((b.cause for b in self.blocks if b.verdict == self.verdict), None)

    def _tangents(self) -> dict[str, Any]:
        """jvp's ``tangents`` field (the other kinds have none)."""
        if self.kind != "jvp":
            return {}
        return {"tangents": {n: plain(v) for n, v in self.tangents.items()}}

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        command = "derivative" if self.kind.startswith("order") else self.kind
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": command,
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
                "latex": self.latex or None,
                "rows": [r.to_dict() for r in self.rows],
                "notes": note_texts(self.notes, style),
                "note_codes": note_codes(self.notes),
                "seed": self.seed,
                **self._tangents(),
                **self.verdict_fields(),
            }
        )


@dataclass(frozen=True)
class Saved(Frozen):
    """One value a node keeps for backward: ``grad_fn._saved_<name>``. A tensor is shown by
    its shape, dtype and first few numbers; anything else (an int, sizes, None) as it is."""

    name: str  # the attribute, e.g. "_saved_self"
    tensor: bool
    shape: list[int] | None = None
    dtype: str | None = None
    value: Any = None  # a tensor's first SAVED_SHOWN numbers (flattened), else the value

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tensor": self.tensor,
            "shape": self.shape,
            "dtype": self.dtype,
            "value": self.value,
        }


@dataclass(frozen=True)
class Freed(Frozen):
    """What reading a saved tensor raised after one ``backward()`` without retain_graph."""

    node: int
    name: str
    message: str

    def to_dict(self) -> dict[str, Any]:
        return {"node": self.node, "name": self.name, "message": self.message}


@dataclass(frozen=True)
class GraphNode(Frozen):
    """One autograd node: PyTorch's class name, a label, and the nodes it passes gradients to."""

    id: int
    grad_fn: str
    label: str
    leaf: str | None = None  # the leaf's name, for AccumulateGrad
    shape: list[int] | None = None
    next: tuple[int | None, ...] = ()  # None: an input without gradient
    saved: tuple[Saved, ...] | None = None  # with --saved: what it keeps for backward

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "grad_fn": self.grad_fn,
            "label": self.label,
            "leaf": self.leaf,
            "shape": self.shape,
            "next": list(self.next),
            "saved": None if self.saved is None else [v.to_dict() for v in self.saved],
        }


@dataclass(frozen=True)
class Graph(Rendered):
    """The whole backward graph; ``nodes[0]`` is the output's ``grad_fn``."""

    expression: str
    output: str
    nodes: tuple[GraphNode, ...]
    seed: int | None = None  # the seed of rand()/randn() values, when one was drawn
    freed: Freed | None = None  # with --saved: a saved tensor read after backward()
    written: tuple[str, ...] = ()  # files the CLI's --dot/--png/--svg wrote

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:  # no sentences to spell
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "graph",
                "expression": self.expression,
                "output": self.output,
                "seed": self.seed,
                "root": self.nodes[0].id,
                "nodes": [n.to_dict() for n in self.nodes],
                "freed": None if self.freed is None else self.freed.to_dict(),
                "written": list(self.written),
            }
        )


def _shown_value(value: Any) -> Any:
    """A printed value in JSON: a tensor as numbers (booleans as booleans), else as is."""
    if isinstance(value, np.ndarray):
        return value.tolist() if value.dtype == bool else plain(value)
    return value


@dataclass(frozen=True)
class LeafGrad(Frozen):
    """A leaf's ``.grad`` at one point of a cell, and what SymPy expects there: the sum
    of the backward() calls that reached it since its last reset (None: never filled)."""

    name: str
    grad: np.ndarray | None
    expected: np.ndarray | None
    max_abs_error: float | None = None
    verdict: str | None = None  # None: not checked (both None)
    cause: Cause | None = None
    derivative: str | None = None  # SymPy's derivative of this backward's target

    def to_dict(self) -> dict[str, Any]:
        return {
            "grad": _maybe(self.grad),
            "expected": _maybe(self.expected),
            "max_abs_error": self.max_abs_error,
            "verdict": self.verdict,
            "cause": cause_dict(self.cause),
            "derivative": self.derivative,
        }


@dataclass(frozen=True)
class Shown(Frozen):
    """One item of a ``print(...)``: what PyTorch gave, what SymPy expects, the check."""

    text: str
    value: Any
    expected: Any = None
    verdict: str | None = None  # None: shown, not checked (text, grad_fn)

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "value": _shown_value(self.value),
            "expected": _shown_value(self.expected),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class CellEvent(Frozen):
    """One line of a cell that does something autograd shows: ``backward()`` (with its
    own gradient checked, ``check``), a reset of ``.grad``, or a ``print(...)``."""

    kind: str  # backward, reset or print
    statement: str
    grads: tuple[LeafGrad, ...] = ()
    shown: tuple[Shown, ...] = ()
    check: GradResult | None = None  # this backward() alone, from fresh leaves

    @property
    def verdict(self) -> Verdict | None:
        found = [g.verdict for g in self.grads] + [s.verdict for s in self.shown]
        found += [] if self.check is None else [self.check.verdict]
        return None if all(v is None for v in found) else worst(found)

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "statement": self.statement,
            "grads": {g.name: g.to_dict() for g in self.grads},
            "shown": [s.to_dict() for s in self.shown],
            "check": None if self.check is None else self.check.to_dict(style),
            "verdict": self.verdict,
        }


@dataclass(frozen=True)
class CellResult(Judged):
    """A notebook cell run line by line: each event checked; ``error`` is PyTorch's (or
    the cell's) refusal that stopped it, as Python would have stopped."""

    expression: str
    device: str
    dtype: str
    rtol: float
    atol: float
    events: tuple[CellEvent, ...]
    seed: int | None = None
    notes: tuple[Note, ...] = ()
    error: Any = None  # an AutogradCliError
    rounding_bound: float = 0.0
    strict: bool = False

    @property
    def verdict(self) -> Verdict:
        return worst(e.verdict for e in self.events)

    @property
    def agree(self) -> bool:
        return self.error is None and bool(agrees(self.verdict, self.strict))

    @property
    def grads(self) -> dict[str, np.ndarray | None]:
        """Each leaf's ``.grad`` at the end of the cell."""
        last = next((e for e in reversed(self.events) if e.grads), None)
        return {} if last is None else {g.name: g.grad for g in last.grads}

    def first_cause(self) -> Cause | None:
        for event in self.events:
            for g in event.grads:
                if g.verdict == self.verdict and g.cause is not None:
                    return g.cause
        return None

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        error = None
        if self.error is not None:
            from autogradcli.messages import error_text

            error = {
                "type": self.error.kind,
                "code": self.error.code,
                "message": error_text(self.error, style),
            }
            if self.error.data.get("changes"):
                error["in_place"] = self.error.data["changes"]
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "cell",
                "expression": self.expression,
                "device": self.device,
                "dtype": self.dtype,
                "tolerance": {"rtol": self.rtol, "atol": self.atol},
                "seed": self.seed,
                "events": [e.to_dict(style) for e in self.events],
                "stopped": error,
                "notes": note_texts(self.notes, style),
                "note_codes": note_codes(self.notes),
                **self.verdict_fields(),
            }
        )


@dataclass(frozen=True)
class PlotResult(Rendered):
    """An elementwise expression sampled over a range of ``wrt``: f, autograd's K-th
    derivative and SymPy's at each point; the points where they disagree, the kinks the
    check left out and where the derivative is undefined (domain edges)."""

    expression: str
    wrt: str
    order: int
    x: np.ndarray
    f: np.ndarray
    f_expected: np.ndarray
    autograd: np.ndarray
    expected: np.ndarray
    disagree: np.ndarray
    kinks: np.ndarray
    undefined: np.ndarray
    fixed: dict[str, str]
    verdict: str
    strict: bool = False
    written: tuple[str, ...] = ()

    @property
    def agree(self) -> bool:
        return bool(agrees(self.verdict, self.strict))

    def to_dict(self, style: Style = CLI) -> dict[str, Any]:
        return strict(
            {
                "schema_version": SCHEMA_VERSION,
                "command": "plot",
                "expression": self.expression,
                "wrt": self.wrt,
                "order": self.order,
                "fixed": self.fixed,
                "x": plain(self.x),
                "f": plain(self.f),
                "f_expected": plain(self.f_expected),
                "autograd": plain(self.autograd),
                "expected": plain(self.expected),
                "disagree": self.disagree.tolist(),
                "kinks": self.kinks.tolist(),
                "undefined": self.undefined.tolist(),
                "written": list(self.written),
                "verdict": self.verdict,
                "agree": self.agree,
            }
        )
