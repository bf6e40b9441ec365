"""The commands as compositions of the stages: bind → autograd run → reference →
reconcile → verdict → result. Each stage returns a new value; none edits another's."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from autogradcli.bind import Bound, Passes, bind
from autogradcli.errors import LimitError, VariableError
from autogradcli.footprint import (
    check_derivative,
    check_grad,
    check_hessian,
    check_jacobian,
    check_jvp,
)
from autogradcli.lang.analysis import rounding_steps
from autogradcli.notes import Note
from autogradcli.policy.compare import compare
from autogradcli.policy.verdict import UNCHECKED, rounding_relative
from autogradcli.reference import Model, NumericModel, Reference, exact_or_none, known
from autogradcli.reference.beside import Beside, overlapped
from autogradcli.reference.chain import model_chain
from autogradcli.reference.choice import choose
from autogradcli.reference.hooked import HookedModel, hooked
from autogradcli.reference.numeric import DEFAULT as NUMERIC
from autogradcli.reference.orders import exact_order, forward, hessian_latex, numeric_order
from autogradcli.results import (
    Block,
    DerivativeResult,
    GradResult,
    HookResult,
    JacobianRow,
    TensorResult,
    VariableResult,
)
from autogradcli.torchside import higher
from autogradcli.torchside.run import Autograd, Session, run_passes, start
from autogradcli.verify.blocks import (
    BlockReference,
    block_notes,
    make_block,
    settle_blocks,
    unchecked_block,
)
from autogradcli.verify.judge import Judge
from autogradcli.verify.reconcile import domain_edges, jacobian_sides, kink_sides


def steps_of(bound: Bound, passes: int = 0) -> int:
    """The rounding steps behind one number of the result (verdict.py)."""
    return rounding_steps(bound.program, bound.shapes, bound.limits) + passes


MAX_EXACT_HESSIAN_INPUTS = 64  # input elements; the Hessian is their square in sympy.diff calls


@dataclass(frozen=True)
class GradRequest:
    """What ``grad`` is asked to do beyond binding values (see ``api.grad``)."""

    plan: Passes = field(default_factory=Passes)
    retained: tuple[str, ...] = ()  # steps whose .grad is kept
    explicit: bool = True  # the steps were named (not "all"): one without grad is an error
    inspect: bool = False
    explain: bool = False


def reference_for(bound: Bound, session: Session) -> Reference:
    """SymPy's reference at the inputs autograd saw (or central differences, with a note)."""
    weights = None if session.weight_tensor is None else session.seen_weights
    p = bound.program
    return choose(p, bound.shapes, bound.limits, session.seen, weights, bound.differentiate)


def run_grad(bound: Bound, request: GradRequest) -> GradResult:
    """``grad``: the passes, the reference, the verdict of every check, the result."""
    plan, settings = request.plan, bound.settings
    every = request.inspect or bool(request.retained)
    check_grad(bound, plan.repeat, request.explain, every)
    session = start(bound)
    retained = list(request.retained)
    autograd, reference = _passes_and_reference(bound, session, request, retained)
    hooks = _hooks(bound, autograd.hook_calls, reference.model)  # before it evaluates again
    weights = None if session.weight_tensor is None else session.seen_weights
    expected, notes = reference.expected, [*bound.notes, *reference.notes]
    if reference.exact and not bound.program.hooks:  # the edges' slopes know no hooks
        edge = NumericModel(bound.program, bound.shapes, bound.limits, bounds=True)
        expected, edges = domain_edges(edge, session.seen, weights, expected)
        expected = kink_sides(reference.model, session.seen, weights, expected)
        notes += edges
    elif not reference.exact and request.explain:
        raise VariableError("explain_needs_sympy")
    numbers = None
    if settings.numeric and reference.exact:
        numeric = NumericModel(bound.program, bound.shapes, bound.limits)
        numeric = hooked(numeric, bound.shapes, bound.limits)
        numbers = numeric.evaluate(session.seen, weights, bound.differentiate)
    steps = steps_of(bound, plan.repeat)
    judge = Judge(session, autograd, reference, expected, numbers, plan, steps)
    variables = _variables(bound, session, judge, reference, notes)
    notes += _pass_notes(bound, plan, autograd)
    explanation = tensors = None
    if request.explain and autograd.recorder is not None:
        from autogradcli.verify.explain import explain

        recorder, first = autograd.recorder, autograd.snapshots[0]
        model = reference.model
        explanation = _written(
            bound,
            notes,
            "the explanation",
            lambda: explain(session, autograd.first, recorder, model, expected, first),
        )
    if request.inspect or retained:
        from autogradcli.verify.inspect import inspect_tensors

        scale = plan.times(plan.repeat, plan.same_graph)
        tensors = inspect_tensors(session, autograd.trace, reference.model, variables, scale)
        tensors = _as_held(tensors, autograd)
    output_verdict, output_cause = judge.output()
    return GradResult(
        expression=bound.program.text,
        device=str(session.device),
        dtype=settings.dtype,
        rtol=judge.rtol,
        atol=judge.atol,
        output=autograd.output,
        output_expected=expected.output,
        output_max_abs_error=judge.output_check.max_abs_error,
        variables=variables,
        passes=judge.passes(),
        weights=weights,
        seed=bound.seed,
        output_name=bound.program.output,
        mode=plan.mode,
        zero_grad=plan.zero_grad,
        notes=tuple(notes),
        expected_by=reference.model.by,
        tensors=tensors,
        explanation=explanation,
        hooks=hooks,
        output_verdict=output_verdict,
        output_cause=output_cause,
        rounding_bound=judge.relative,
        strict=settings.strict,
    )


def _passes_and_reference(
    bound: Bound, session: Session, request: GradRequest, retained: list[str]
) -> tuple[Autograd, Reference]:
    """Autograd's passes, then the reference; the reference beside the passes, in a second
    thread, where ``overlapped`` says a core is free for it."""
    beside = Beside(lambda: reference_for(bound, session)) if overlapped(session) else None
    try:
        autograd = run_passes(session, request.plan, retained, request.explicit, request.explain)
    except BaseException as exc:  # autograd's error first, as when the reference came after
        if beside is not None:
            beside.abandon(exc)
        raise
    if not (request.inspect or retained or request.explain):
        autograd.release()  # only a diagnosis would look at the forward values
    reference = reference_for(bound, session) if beside is None else beside.result()
    return autograd, reference


def _pass_notes(bound: Bound, plan: Passes, autograd: Autograd) -> list[Note]:
    """What the passes did that the numbers alone do not say."""
    notes = []
    if plan.functional:
        state = ", ".join(
            f"{n}.grad is {'None' if none else 'set'}" for n, none in autograd.untouched.items()
        )
        notes.append(Note("functional", {"grads": state}))
    if autograd.unsent:
        shown = ", ".join(bound.program.shown(n) for n in autograd.unsent)
        notes.append(Note("grad_unsent", {"names": shown, "inputs": autograd.unsent}))
    if plan.same_graph and not plan.retain_graph and plan.repeat > 1:
        notes.append(Note("graph_not_freed", {"repeat": plan.repeat}))
    changing = [h for h in bound.program.hooks if h.body is not None]
    if changing:
        on = dict.fromkeys(bound.program.shown(h.target) for h in changing)
        notes.append(Note("hooks", {"tensors": ", ".join(on)}))
    return notes


def _as_held(tensors: tuple[TensorResult, ...], autograd: Autograd) -> tuple[TensorResult, ...]:
    """Each leaf's .grad as PyTorch holds it: torch.autograd.grad (--functional) returned
    the gradients and left .grad None (``untouched``), as backward() does where no gradient
    was sent (``unsent``)."""

    def held(t: TensorResult) -> TensorResult:
        code = "functional" if autograd.untouched.get(t.name) else None
        code = "unsent" if t.name in autograd.unsent else code
        if code is None:
            return t
        return replace(t, grad=None, grad_expected=None, grad_agree=None, grad_note_code=code)

    return tuple(held(t) for t in tensors)


def _no_hooks(bound: Bound, command: str) -> None:
    """Hooks change what backward() sends; these commands do not run the program's."""
    if bound.program.hooks:
        raise VariableError("hooks_grad_only", command=command)


def _hooks(bound: Bound, runs: list[Any], model: Model) -> tuple[HookResult, ...]:
    """Each hook's first run in PyTorch beside the reference's (``HookedModel``)."""
    found = []
    rtol, atol = bound.settings.tolerance
    for index, hook in enumerate(bound.program.hooks):
        call = next((c for c in runs if c.index == index), None)
        received = None if call is None else call.received
        returned = None if call is None else call.returned
        want = model.received.get(index) if isinstance(model, HookedModel) else None
        want_back = model.returned.get(index) if isinstance(model, HookedModel) else None
        pairs = [(received, want), (returned, want_back)]
        agree = None
        if received is not None or want is not None:
            agree = all(
                (a is None) == (b is None) and (a is None or compare(a, b, rtol, atol).agree)
                for a, b in pairs
            )
        text = bound.program.shown(hook.target)
        found.append(HookResult(text, hook.text, received, want, returned, want_back, agree))
    return tuple(found)


def _variables(
    bound: Bound, session: Session, judge: Judge, reference: Reference, notes: list[Note]
) -> dict[str, VariableResult]:
    """Each input: a differentiated one judged, a constant one as it is."""
    model = reference.model
    weights = session.seen_weights
    ones = weights.size == 1 or bool(np.all(weights == 1))
    variables = {}
    for name in bound.program.variables:
        if name in bound.differentiate:

            def texts(name: str = name) -> tuple[Any, ...]:
                return (
                    model.derivative_text(name, ones),
                    model_chain(model, name),
                    model.derivative_latex(name, ones),
                    model_chain(model, name, latex=True),
                )

            written = _written(bound, notes, f"the derivative of {name}", texts)
            text, chain, latex, chain_latex = written or (None,) * 4
            found = judge.variable(name, text, chain)
            variables[name] = replace(found, latex=latex, chain_latex=chain_latex)
        else:
            variables[name] = VariableResult(name, session.seen[name], requires_grad=False)
    return variables


def _written(bound: Bound, notes: list[Note], what: str, work: Callable[[], Any]) -> Any:
    """SymPy's text of something within the time limit, else None with a note."""
    from autogradcli.reference.timeout import SympyTimeout, within

    try:
        return within(bound.limits.sympy_seconds, work)
    except SympyTimeout as exc:
        notes.append(Note("text_timeout", {"what": what, **exc.data}))
        return None


@dataclass(frozen=True)
class Derived:
    """What a derivative command found, before the verdict policy settles its blocks."""

    kind: str
    blocks: tuple[Block, ...]
    notes: list[Note]
    exact: bool  # SymPy's reference (else the numeric one, or none)
    rows: tuple[JacobianRow, ...] = ()
    derivatives: dict[str, str] = field(default_factory=dict)
    latex: dict[str, str] = field(default_factory=dict)
    tangents: dict[str, np.ndarray] = field(default_factory=dict)


def _derivative_result(
    bound: Bound, session: Session, found: Derived, diagnose: Any, rerun: Any
) -> DerivativeResult:
    """The blocks settled by the verdict policy, in a result."""
    settings = bound.settings
    relative = _relative(bound)
    blocks, notes, exact = found.blocks, found.notes, found.exact
    unchecked = any(b.reference_verdict == UNCHECKED for b in blocks)
    finite = all(bool(np.all(np.isfinite(v))) for v in session.seen.values())
    blocks = settle_blocks(blocks, settings.dtype, relative, rerun, diagnose, finite)
    rtol, atol = settings.tolerance
    if not exact:
        rtol, atol = max(rtol, NUMERIC.rtol), max(atol, NUMERIC.atol)
    return DerivativeResult(
        kind=found.kind,
        expression=bound.program.text,
        device=str(session.device),
        dtype=settings.dtype,
        rtol=rtol,
        atol=atol,
        output_shape=list(bound.out_shape),
        values=session.seen,
        blocks=blocks,
        rows=found.rows,
        notes=tuple(dict.fromkeys([*bound.notes, *notes, *block_notes(blocks)])),
        expected_by="SymPy" if exact else "none" if unchecked else "numeric",
        derivatives=found.derivatives,
        latex=found.latex,
        rounding_bound=relative,
        strict=settings.strict,
        seed=bound.seed,
        tangents=found.tangents,
    )


def _relative(bound: Bound) -> float:
    """The relative rounding bound of a derivative (differentiated twice at most)."""
    return rounding_relative(bound.settings.dtype, 2 * steps_of(bound))


def _float64(bound: Bound, run: Any) -> Any:
    """The same command's blocks in float64 at the inputs the dtype rounded, by key."""

    def blocks() -> dict[str, Block]:
        settings = bound.settings.but(dtype="float64", rtol=None, atol=None, strict=False)
        again = bind(bound.program, dict(bound.arrays), settings, const=_consts(bound))
        return {b.key: b for b in run(again).blocks}

    return blocks


def _consts(bound: Bound) -> list[str]:
    return [n for n in bound.program.variables if n not in bound.differentiate]


def _diagnosis(bound: Bound, session: Session, model: Any) -> Any:
    """Where the forward pass went wrong (computed when a block needs a cause)."""
    from autogradcli.verify.diagnose import forward_cause

    def diagnose() -> Any:
        if model is None:
            return None
        return forward_cause(
            bound.program, session.forward(), model, session.seen, bound.settings.dtype
        )

    return diagnose


def _exact_or_numeric(
    bound: Bound, notes: list[Note], exact: Callable[[], Any], numeric: Callable[[], Any]
) -> tuple[Any, dict[Any, Any], dict[Any, Any] | None]:
    """SymPy's model and its values within the time limit (else None, with a note), and the
    numeric values when asked for or when SymPy could not."""
    done = exact_or_none(bound.limits, notes, exact)
    model, values = done if done is not None else (None, {})
    numbers = numeric() if bound.settings.numeric or model is None else None
    return model, values, numbers


def _blocks(
    bound: Bound,
    found: dict[Any, np.ndarray],
    cross: tuple[dict[Any, np.ndarray], str],
    model: Any,
    values: dict[Any, Any],
    numbers: dict[Any, Any] | None,
) -> tuple[Block, ...]:
    """One block per key (an input, or a pair of inputs) against SymPy's values, or the
    numeric ones when SymPy could not."""
    blocks = []
    for key, autograd in found.items():
        exact = model is not None
        if not exact and numbers is None:  # past every check's budget: shown, not checked
            name = key if isinstance(key, str) else ",".join(key)
            cross_key = (cross[0][key].reshape(autograd.shape), cross[1])
            blocks.append(unchecked_block(name, autograd, cross_key, bound.settings))
            continue
        expected, kinks, codes, *decided = values[key] if exact else (numbers[key], None, set())  # type: ignore[index]
        third = numbers[key] if numbers is not None and exact else None
        blocks.append(
            make_block(
                key if isinstance(key, str) else ",".join(key),
                autograd,
                BlockReference(
                    expected,
                    exact,
                    kinks,
                    frozenset(codes),
                    decided[0] if decided else None,
                    numeric=third,
                ),
                bound.settings,
                _relative(bound),
                cross=(cross[0][key].reshape(autograd.shape), cross[1]),
            )
        )
    return tuple(blocks)


def run_jacobian(bound: Bound, keep_rows: bool = True) -> DerivativeResult:
    """``jacobian``: one-hot rows, the functional cross-check, SymPy component-wise."""
    _no_hooks(bound, "jacobian")
    from autogradcli.reference.components import ComponentModel
    from autogradcli.reference.numeric import numeric_jacobian

    check_jacobian(bound, keep_rows)
    session = start(bound)
    found, rows = higher.jacobian_rows(session)
    cross = (higher.functional_jacobian(session), "torch.autograd.functional.jacobian")
    notes: list[Note] = []

    def exact() -> Any:
        constants = known(bound.program, bound.shapes, session.seen)
        model = ComponentModel(bound.program, bound.shapes, bound.limits, constants=constants)
        return model, {n: _with_sides(model, session.seen, n) for n in bound.names}

    def numeric() -> Any:
        return numeric_jacobian(forward(bound, session.seen), session.seen, bound.names)

    model, values, numbers = _exact_or_numeric(bound, notes, exact, numeric)
    blocks = _blocks(bound, found, cross, model, values, numbers)
    latex = {}
    if model is not None:
        written = _written(bound, notes, "the LaTeX", lambda: _latex_of(model, bound.names))
        latex = written or {}
    derived = Derived(
        "jacobian",
        blocks,
        notes,
        model is not None,
        latex={n: t for n, t in latex.items() if t is not None},
        rows=rows if keep_rows else (),
    )
    rerun = _float64(bound, lambda b: run_jacobian(b, False))
    return _derivative_result(bound, session, derived, _diagnosis(bound, session, model), rerun)


def _with_sides(model: Any, seen: dict[str, np.ndarray], name: str) -> tuple[Any, ...]:
    """SymPy's Jacobian for ``name`` (numbers, kinks, codes) and what the one-sided
    derivatives decide at its kink entries (``verify.reconcile.jacobian_sides``)."""
    numbers, kinks, codes = model.jacobian_values(seen, name)
    if not np.any(kinks):
        return numbers, kinks, codes, None
    return numbers, kinks, codes, jacobian_sides(model, seen, name, numbers, kinks)


def run_hessian(bound: Bound) -> DerivativeResult:
    """``hessian``: create_graph=True twice, the functional cross-check, SymPy's Hessian."""
    _no_hooks(bound, "hessian")
    from autogradcli.reference.components import ComponentModel, TooLarge, hessian_terms
    from autogradcli.reference.numeric import numeric_hessian

    check_hessian(bound)
    session = start(bound)
    found = higher.hessian(session)
    cross = (higher.functional_hessian(session), "torch.autograd.functional.hessian")
    notes: list[Note] = []
    inputs = sum(int(np.prod(bound.shapes[n])) for n in bound.program.variables)

    def exact() -> Any:
        if inputs > MAX_EXACT_HESSIAN_INPUTS:
            raise TooLarge("exact_hessian_inputs", limit=MAX_EXACT_HESSIAN_INPUTS, inputs=inputs)
        constants = known(bound.program, bound.shapes, session.seen)
        model = ComponentModel(bound.program, bound.shapes, bound.limits, constants=constants)
        return model, {p: model.values_of(hessian_terms(model, *p), session.seen) for p in found}

    def numeric() -> Any:
        try:
            return numeric_hessian(forward(bound, session.seen), session.seen, bound.names)
        except LimitError as exc:  # too many forward passes: autograd's Hessian, unchecked
            notes[:] = [n for n in notes if n.code != "numeric_fallback"]  # it did not run
            notes.append(Note("unchecked", dict(exc.data)))
            return None

    model, values, numbers = _exact_or_numeric(bound, notes, exact, numeric)
    blocks = _blocks(bound, found, cross, model, values, numbers)
    latex = {}
    if model is not None:
        latex = _written(bound, notes, "the LaTeX", lambda: hessian_latex(model, found)) or {}
    derived = Derived("hessian", blocks, notes, model is not None, latex=latex)
    diagnose = _diagnosis(bound, session, model)
    return _derivative_result(bound, session, derived, diagnose, _float64(bound, run_hessian))


def _latex_of(model: Any, names: Iterable[str]) -> dict[str, str | None]:
    return {n: model.derivative_latex(n) for n in names}


# Central differences of a higher order are too coarse to call autograd wrong: past it,
# a K-th derivative they miss is shown unchecked, never ✗.
MAX_NUMERIC_ORDER = 2


def run_derivative(bound: Bound, order: int) -> DerivativeResult:
    """``derivative`` (``grad --order K``): K-th derivatives against SymPy's ``diff``
    within the time limit, else against central differences (with a note)."""
    _no_hooks(bound, "grad --order")
    check_derivative(bound, order)
    session = start(bound)
    notes: list[Note] = []
    done = exact_or_none(bound.limits, notes, lambda: exact_order(bound, session.seen, order))
    model, exact = done if done is not None else (None, {})
    blocks = []
    for n in bound.names:
        autograd = higher.kth_derivative(session, n, order)
        numbers, widen = numeric_order(bound, session.seen, n, order, notes, model is None)
        expected, kinks, codes = (
            (exact[n].values, exact[n].kinks, exact[n].codes)
            if model is not None
            else (numbers, None, set())
        )
        reference = BlockReference(
            expected,
            model is not None,
            kinks,
            frozenset(codes),
            numeric=numbers if model is not None else None,
            numeric_widen=widen,
        )
        block = make_block(n, autograd, reference, bound.settings, _relative(bound))
        if model is None and order > MAX_NUMERIC_ORDER and not block.check.agree:
            block = unchecked_block(n, autograd, None, bound.settings, numeric=numbers)
            notes.append(Note("order_unchecked", {"name": n, "order": order}))
        blocks.append(block)
    derived = Derived(
        f"order {order}",
        tuple(blocks),
        notes,
        model is not None,
        derivatives={n: e.text for n, e in exact.items()},
        latex={n: e.latex for n, e in exact.items()},
    )
    rerun = _float64(bound, lambda b: run_derivative(b, order))
    return _derivative_result(bound, session, derived, _diagnosis(bound, session, model), rerun)


def _along(jacobian: np.ndarray, tangent: np.ndarray) -> np.ndarray:
    """``J·v`` for one input: ``J`` (``out.shape + x.shape``) contracted with ``v``."""
    return np.tensordot(jacobian, tangent, axes=tangent.ndim)


def run_jvp(bound: Bound, tangents: dict[str, np.ndarray]) -> DerivativeResult:
    """``jvp``: forward mode (``torch.func.jvp``), ``torch.autograd.functional.jvp`` as the
    cross-check, against SymPy's Jacobians times the tangents, summed over the inputs."""
    _no_hooks(bound, "jvp")
    from autogradcli.reference.components import ComponentModel
    from autogradcli.reference.numeric import numeric_jacobian

    check_jvp(bound)
    session = start(bound)
    found = {"J·v": higher.forward_jvp(session, tangents)}
    cross = ({"J·v": higher.functional_jvp(session, tangents)}, "torch.autograd.functional.jvp")
    notes: list[Note] = []
    shape = tuple(bound.out_shape)

    def exact() -> Any:
        constants = known(bound.program, bound.shapes, session.seen)
        model = ComponentModel(bound.program, bound.shapes, bound.limits, constants=constants)
        total, kinks, codes = np.zeros(shape), np.zeros(shape, dtype=bool), set()
        for n in bound.names:
            numbers, mask, found_codes = model.jacobian_values(session.seen, n)
            with np.errstate(all="ignore"):
                total = total + _along(np.asarray(numbers, dtype=np.float64), tangents[n])
            moved = np.asarray(mask, dtype=bool) & (tangents[n] != 0)
            kinks |= moved.reshape((*shape, -1)).any(axis=-1)
            codes |= set(found_codes)
        return model, {"J·v": (total, kinks, codes)}

    def numeric() -> Any:
        jac = numeric_jacobian(forward(bound, session.seen), session.seen, bound.names)
        return {"J·v": sum(_along(jac[n], tangents[n]) for n in bound.names)}

    model, values, numbers = _exact_or_numeric(bound, notes, exact, numeric)
    blocks = _blocks(bound, found, cross, model, values, numbers)
    derived = Derived("jvp", blocks, notes, model is not None, tangents=tangents)
    rerun = _float64(bound, lambda b: run_jvp(b, tangents))
    return _derivative_result(bound, session, derived, _diagnosis(bound, session, model), rerun)
