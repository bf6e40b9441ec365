"""A cell's custom autograd Functions checked on their own: at the values each call was given,
the user's backward (grad_output from 0.75 to 1.25, float64) against SymPy's derivative of
the user's forward, per input and per element, with central differences of the forward as a
third column; and gradcheck's other checks: the shape and dtype of what backward returns, a
backward that is not reentrant, a jvp that is defined and wrong."""

from __future__ import annotations

from typing import Any

import numpy as np
import sympy as sp
import torch

from autogradcli.errors import AutogradCliError
from autogradcli.lang.custom import REGISTERED, CustomFunction, TreeDomain, forward_tree, run
from autogradcli.lang.text import unparse
from autogradcli.lang.tree import Call, Name, Node, Num, Program, walk, walk_names
from autogradcli.policy.verdict import AGREE, DISAGREE
from autogradcli.reference.choice import choose
from autogradcli.reference.terms import SympyTerms
from autogradcli.results.custom import FunctionCheck, InputCheck
from autogradcli.settings import Limits
from autogradcli.torchside.build import forward_numpy
from autogradcli.torchside.custom import Context, run_forward, run_method

RTOL, ATOL = 1e-7, 1e-9  # float64 against float64: only rounding apart
NUMERIC_RTOL, NUMERIC_ATOL = 1e-5, 1e-6  # central differences' own error
MAX_SHOWN = 8
MAX_NUMERIC = 4096  # elements of an input differenced one by one (two forwards each)


class _Symbols(SympyTerms):
    def name(self, node: Name) -> sp.Expr:
        return sp.Symbol(node.id, real=True)


def calls(program: Program, roots: list[Node]) -> dict[str, Call]:
    """The calls of custom Functions in the program, by their text ``NAME.apply(x)``
    (each call once, whichever of its outputs the program reads)."""
    found: dict[str, Call] = {}
    for root in [*(s.node for s in program.steps), *roots]:
        for part in walk(root):
            if isinstance(part, Call) and part.func in REGISTERED:
                fn = REGISTERED[part.func]
                text = f"{fn.op_name}({', '.join(unparse(a) for a in part.args)})"
                found.setdefault(text, part)
    return found


def check_calls(
    program: Program,
    roots: list[Node],
    shapes: dict[str, tuple[int, ...]],
    seen: dict[str, np.ndarray],
    limits: Limits,
    differentiate: frozenset[str],
) -> tuple[FunctionCheck, ...]:
    """Each call of a custom Function, checked at the values the cell gave it."""
    steps = {s.name: s for s in program.steps}
    checks = []
    for text, call in calls(program, roots).items():
        fn = REGISTERED[call.func]
        args: list[Any] = []
        wanted: list[bool] = []
        given = dict(call.params).get("given")
        names = list(given) if given else list(fn.inputs[: len(call.args)])
        by_name = dict(zip(names, call.args, strict=True))
        for param in fn.inputs:
            node = by_name.get(param)
            if node is None:
                args.append(None)
                wanted.append(False)
                continue
            args.append(_value(node, program, steps, seen))
            tracked = any(n in differentiate or n in steps for n in walk_names(node))
            wanted.append(not isinstance(node, Num) and tracked)
        checks.append(check_function(fn, text, args, wanted, limits))
    return tuple(checks)


def _value(
    node: Node, program: Program, steps: dict[str, Any], seen: dict[str, np.ndarray]
) -> np.ndarray:
    """An argument's value in float64, from the inputs autograd saw."""
    from autogradcli.verify.cell import needed

    kept = needed(node, None, {n: s.node for n, s in steps.items()})
    used = {n for k in kept for n in walk_names(steps[k].node)} | set(walk_names(node))
    variables = tuple(n for n in program.variables if n in used and n in seen)
    sub = Program(
        text=unparse(node),
        root=node,
        variables=variables,
        steps=tuple(s for s in program.steps if s.name in kept),
    )
    values = {n: np.array(seen[n], dtype=np.float64) for n in variables}  # writable copies
    return np.asarray(forward_numpy(sub, values), dtype=np.float64)


def check_function(
    fn: CustomFunction,
    call: str,
    values: list[np.ndarray | None],
    wanted: list[bool],
    limits: Limits,
) -> FunctionCheck:
    """The user's backward at ``values`` against SymPy's derivative of the forward."""
    args = [None if v is None else torch.tensor(v, dtype=torch.float64) for v in values]
    problems: list[str] = []
    with torch.no_grad():
        ctx = Context(tuple(wanted))
        output = run_forward(fn, ctx, tuple(args))
        outputs = output if isinstance(output, tuple) else (output,)
        given = tuple(grad_output(o) for o in outputs)
        first = _as_tuple(run_method(fn.backward, ctx, given))
        again = _as_tuple(run_method(fn.backward, ctx, given))
    if not all(_same(a, b) for a, b in zip(first, again, strict=False)):
        problems.append(
            "backward is not reentrant: run twice on the same inputs it returns different gradients"
        )
    trees = {p: Name(p) for p, v in zip(fn.inputs, values, strict=True) if v is not None}
    forward = forward_tree(fn, {p: trees.get(p) for p in fn.inputs})
    shapes = {
        p: tuple(np.shape(v)) for p, v in zip(fn.inputs, values, strict=True) if v is not None
    }
    seen = {p: v for p, v in zip(fn.inputs, values, strict=True) if v is not None}
    inputs = []
    mains = forward if isinstance(forward, tuple) else (forward,)
    references = [
        _reference(m, fn, shapes, seen, limits, wanted, o)
        for m, o in zip(mains, outputs, strict=True)
    ]
    written = _written_backward(fn, trees, wanted)
    grads = [sp.Symbol(g, real=True) for g in fn.backward.params]
    for k, param in enumerate(fn.inputs):
        if values[k] is None or not wanted[k]:
            continue
        user = first[k] if k < len(first) else None
        found = [r[param] for r in references if r.get(param) is not None]
        expected = None if not found else np.sum(found, axis=0)
        small = args[k].numel() <= MAX_NUMERIC  # past it the column is left empty
        numeric = _numeric(fn, args, k, given) if small else None
        right = _right(mains, grads, param)
        inputs.append(_input(param, user, expected, numeric, args[k], right, written, k, problems))
    if fn.jvp is not None:
        problems += _jvp(fn, args, wanted)
    return FunctionCheck(fn.name, call, tuple(inputs), tuple(problems))


def grad_output(output: torch.Tensor) -> torch.Tensor:
    """The gradient the check hands backward for one output: from 0.75 to 1.25 over its
    elements (not ones, so a backward that forgets grad_output or mixes up its elements
    differs)."""
    n = output.numel()
    steps = torch.arange(n, dtype=torch.float64) / max(n - 1, 1)
    return (0.75 + 0.5 * steps).reshape(output.shape).to(output.dtype)


def _as_tuple(value: Any) -> tuple[Any, ...]:
    return value if isinstance(value, tuple) else (value,)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    return bool(torch.equal(a, b))


def _reference(
    main: Node,
    fn: CustomFunction,
    shapes: dict[str, tuple[int, ...]],
    seen: dict[str, np.ndarray],
    limits: Limits,
    wanted: list[bool],
    output: torch.Tensor,
) -> dict[str, np.ndarray]:
    """SymPy's gradients of the forward (one output) with the check's grad_output."""
    variables = tuple(seen)
    program = Program(text=unparse(main), root=main, variables=variables)
    differentiate = frozenset(p for p, w in zip(fn.inputs, wanted, strict=True) if w and p in seen)
    weights = grad_output(output).numpy()
    found = choose(program, shapes, limits, seen, weights, differentiate)
    return dict(found.expected.grads)


def _written_backward(
    fn: CustomFunction, trees: dict[str, Node], wanted: list[bool]
) -> tuple[Any, ...]:
    """The user's backward as trees of the forward's inputs and ``grad_output``."""
    domain = TreeDomain(tuple(wanted))
    env: dict[str, Any] = dict(trees)
    if fn.setup_context is None:
        run(fn.forward, env, domain)  # what forward saves and sets on ctx
        outputs = None
    else:
        outputs = forward_tree(fn, dict(trees))
        setup = fn.setup_context
        local = dict(
            zip(setup.params, (tuple(trees.get(p) for p in fn.inputs), outputs), strict=True)
        )
        run(setup, local, domain)
        env.update({k: v for k, v in local.items() if k.startswith("ctx.")})
    attrs = {k: v for k, v in env.items() if k.startswith("ctx.")}
    grads = {p: Name(p) for p in fn.backward.params}
    try:
        return _as_tuple(run(fn.backward, {**attrs, **grads}, domain))
    except AutogradCliError:
        return ()


def _formula(tree: Any) -> sp.Expr | None:
    if tree is None or isinstance(tree, tuple):
        return None
    try:
        return _Symbols()(tree)
    except (AutogradCliError, TypeError, KeyError):
        return None


def _input(
    param: str,
    user: torch.Tensor | None,
    expected: np.ndarray | None,
    numeric: np.ndarray | None,
    arg: torch.Tensor,
    right_sym: sp.Expr | None,
    written: tuple[Any, ...],
    k: int,
    problems: list[str],
) -> InputCheck:
    if user is None:
        got = None
        problems.append(f"backward returns None for {param}, which needs a gradient")
    else:
        got = user.detach().numpy().astype(np.float64)
        if tuple(user.shape) != tuple(arg.shape):
            problems.append(
                f"backward returns a gradient of shape {list(user.shape)} for {param}, "
                f"of shape {list(arg.shape)}"
            )
        if user.dtype != arg.dtype:
            problems.append(f"backward returns {user.dtype} for {param} ({arg.dtype})")
    tree = written[k] if k < len(written) else None
    user_sym = _formula(tree)
    written_text = (
        str(user_sym)
        if user_sym is not None
        else (unparse(tree) if tree is not None and not isinstance(tree, tuple) else "")
    )
    right_text = "" if right_sym is None else str(right_sym)
    if got is None or expected is None or got.shape != np.shape(expected):
        return InputCheck(
            param,
            got,
            expected,
            numeric,
            DISAGREE,
            (),
            written_text,
            right_text,
            _shape_difference(got, expected),
        )
    differs = ~np.isclose(got, expected, rtol=RTOL, atol=ATOL)
    elements = tuple(int(i) for i in np.flatnonzero(differs))
    verdict = DISAGREE if elements else AGREE
    difference = "" if not elements else _difference(user_sym, right_sym, got, expected)
    return InputCheck(
        param,
        got,
        np.asarray(expected),
        numeric,
        verdict,
        elements,
        written_text,
        right_text,
        difference,
    )


def _shape_difference(got: np.ndarray | None, want: np.ndarray | None) -> str:
    if got is None or want is None:
        return "no gradient"
    want = np.asarray(want)
    shapes = f"shape {list(got.shape)} where {list(want.shape)} is needed"
    if got.ndim == 2 and got.T.shape == want.shape and np.allclose(got.T, want, RTOL, ATOL):
        return f"a transposed matrix ({shapes})"
    return f"a wrong shape ({shapes})"


def _right(mains: tuple[Node, ...], grads: list[sp.Symbol], param: str) -> sp.Expr | None:
    """SymPy's backward: each output's gradient times its derivative (elementwise only)."""
    total = sp.Integer(0)
    for main, grad in zip(mains, grads, strict=False):
        forward = _formula(main)
        if forward is None:
            return None
        total += grad * sp.diff(forward, sp.Symbol(param, real=True))
    return total


def _difference(
    user: sp.Expr | None, right: sp.Expr | None, got: np.ndarray, want: np.ndarray
) -> str:
    """How the user's backward differs: a factor, missing or extra terms, a transpose."""
    if user is not None and right is not None:
        left_out = [
            s.name for s in right.free_symbols - user.free_symbols if s.name.startswith("grad")
        ]
        if left_out and not any(s.name.startswith("grad") for s in user.free_symbols):
            return f"{', '.join(sorted(left_out))} is left out: a missing factor"
        ratio = sp.simplify(user / right) if right != 0 else None
        if ratio is not None and ratio.is_number:
            return f"a constant factor: {sp.nsimplify(ratio)} times the right gradient"
        have = set(sp.Add.make_args(sp.expand(user)))
        need = set(sp.Add.make_args(sp.expand(right)))
        missing = [str(t) for t in need - have]
        extra = [str(t) for t in have - need]
        parts = []
        if missing:
            parts.append("missing term " + ", ".join(missing))
        if extra:
            parts.append("extra term " + ", ".join(extra))
        if parts:
            return "; ".join(parts)
    if got.ndim == 2 and got.shape[0] == got.shape[1] and np.allclose(got.T, want, RTOL, ATOL):
        return "a transposed matrix"
    with np.errstate(all="ignore"):
        ratios = got / want
    finite = ratios[np.isfinite(ratios) & (np.abs(want) > ATOL)]
    if finite.size and np.allclose(finite, finite.flat[0], rtol=1e-9):
        return f"a constant factor: {finite.flat[0]:g} times the right gradient"
    return "differs element by element"


def _numeric(
    fn: CustomFunction, args: list[Any], k: int, weights: tuple[torch.Tensor, ...]
) -> np.ndarray:
    """Central differences of the user's forward in float64: the derivative of its outputs'
    elements weighted by the check's grad_output, by each element of input ``k``."""
    base = args[k]
    flat = base.detach().reshape(-1).clone()
    result = np.zeros(flat.numel())
    for i in range(flat.numel()):
        step = 1e-6 * max(1.0, abs(float(flat[i])))
        sums = []
        for sign in (1, -1):
            moved = flat.clone()
            moved[i] += sign * step
            changed = list(args)
            changed[k] = moved.reshape(base.shape)
            with torch.no_grad():
                out = run_forward(fn, Context(tuple(False for _ in args)), tuple(changed))
            pairs = zip(_as_tuple(out), weights, strict=True)
            sums.append(sum(float((o * w).sum()) for o, w in pairs))
        result[i] = (sums[0] - sums[1]) / (2 * step)
    return result.reshape(tuple(base.shape))


def _jvp(fn: CustomFunction, args: list[Any], wanted: list[bool]) -> list[str]:
    """The user's jvp (tangents ones where a gradient is wanted) against central
    differences of the forward along the same direction."""
    tangents = tuple(
        None if a is None else (torch.ones_like(a) if w else torch.zeros_like(a))
        for a, w in zip(args, wanted, strict=True)
    )
    ctx = Context(tuple(wanted))
    with torch.no_grad():
        run_forward(fn, ctx, tuple(args))
        assert fn.jvp is not None
        user = _as_tuple(run_method(fn.jvp, ctx, tangents))[0]
        step = 1e-6
        ahead = [None if a is None else a + step * t for a, t in zip(args, tangents, strict=True)]
        behind = [None if a is None else a - step * t for a, t in zip(args, tangents, strict=True)]
        out_a = run_forward(fn, Context(tuple(wanted)), tuple(ahead))
        out_b = run_forward(fn, Context(tuple(wanted)), tuple(behind))
    first_a = out_a[0] if isinstance(out_a, tuple) else out_a
    first_b = out_b[0] if isinstance(out_b, tuple) else out_b
    want = ((first_a - first_b) / (2 * step)).numpy()
    got = user.numpy()
    if got.shape != want.shape or not np.allclose(got, want, rtol=NUMERIC_RTOL, atol=NUMERIC_ATOL):
        return [
            f"jvp is wrong: it gives {_short(got)} where the forward's directional "
            f"derivative (central differences) is {_short(want)}"
        ]
    return []


def _short(values: np.ndarray) -> str:
    flat = np.asarray(values).reshape(-1)
    text = ", ".join(f"{v:.6g}" for v in flat[:MAX_SHOWN])
    return f"[{text}{', ...' if flat.size > MAX_SHOWN else ''}]"


__all__ = ["AGREE", "check_calls", "check_function"]


def check_cell(bound: Any, seen: dict[str, np.ndarray]) -> tuple[FunctionCheck, ...]:
    """The custom Functions a cell calls, each call checked (none: an empty tuple). A
    call that cannot be checked says why, as its one problem."""
    from autogradcli.lang.tree import Backward, Show

    program = bound.program
    roots: list[Node] = []
    for s in program.statements:
        if isinstance(s, Backward):
            roots.append(s.target)
        elif isinstance(s, Show):
            roots += [i for i in s.items if not isinstance(i, str)]
    if not calls(program, roots):
        return ()
    try:
        return check_calls(
            program, roots, dict(bound.shapes), seen, bound.limits, bound.differentiate
        )
    except AutogradCliError as error:
        from autogradcli.messages import error_text

        return (FunctionCheck("", "", (), (f"not checked: {error_text(error)}",)),)
