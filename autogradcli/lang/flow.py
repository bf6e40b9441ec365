"""A cell's control flow on tensors and its own functions: d2l's ``while b.norm() < 1000:``
and ``if b.sum() > 0:`` inside a plain ``def f(a): ... return c`` called later (``d =
f(a)``). The unroller (``loops.py``) hands the builder one line at a time; a tensor
condition is read from the run's values at that point (the builder's ``oracle``, set by the
run) and only the path taken becomes lines, each decision recorded as a ``Branch`` that the
run reads again. A call is inlined: its parameters bound to the arguments, its own names in
a scope of their own, its ``return`` bound to the name the call's line assigns."""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any

from autogradcli.errors import ExpressionError
from autogradcli.lang.syntax import method_of
from autogradcli.lang.text import source_segment

MAX_CALLS = 50  # nested calls of the cell's own functions (recursion)
# what reads a tensor condition from the run's values while a cell is parsed: set by the
# run (cellrun) around its second parse; unset, a cell stops at its first such condition
PATH_ORACLE: ContextVar[Any] = ContextVar("PATH_ORACLE", default=None)


@dataclass(frozen=True)
class Enter:
    """A call of the cell's own function begins: ``arguments`` (parameter, expression read
    in the caller's scope), ``local`` the names the body binds (its own scope)."""

    function: str
    arguments: tuple[tuple[str, ast.expr], ...]
    local: frozenset[str]
    text: str


@dataclass(frozen=True)
class Return:
    """``return value`` inside a call (read in the function's scope)."""

    value: ast.expr
    text: str


@dataclass(frozen=True)
class Leave:
    """The call ends: the caller's names come back, ``target`` (if any) is bound to what
    the function returned."""

    target: str | None
    text: str


Flow = Enter | Return | Leave


class _Returned(Exception):
    """Unwinds the rest of a function body after its ``return``."""


class Jump(Exception):
    """``break`` or ``continue``: unwinds the rest of a loop's body."""


class Break(Jump):
    """``break``: the loop ends."""


class FlowUnroll:
    """The unroller's ``while``, tensor ``if`` and calls (a mixin of ``loops.Unroller``)."""

    numbers: dict[str, int | float | bool]
    dtypes: dict[str, str]
    devices: dict[str, str]
    iterations: int
    max_iterations: int
    decide: Callable[[ast.expr, str, str, int], bool] | None
    defs: dict[str, ast.FunctionDef]
    calls: list[str]
    in_with: int
    loops: int
    text: str
    decisions: int
    settle: Callable[[bool], None] | None

    def written(self, node: ast.expr) -> str:
        """A condition as the cell writes it."""
        found = source_segment(self.text, node) if self.text else None
        return " ".join(found.split()) if found else ast.unparse(node)

    def statements(self, body: list[ast.stmt]) -> Iterator[ast.stmt | Flow]: ...

    def number(self, node: ast.AST) -> int | float | bool | None: ...

    def forget(self, name: str) -> None: ...

    def substitute_expr(self, node: ast.expr) -> ast.expr: ...

    # --- the cell's own functions ---------------------------------------------------------

    def define(self, stmt: ast.FunctionDef) -> bool:
        """``def f(a): ...`` kept to be inlined where it is called; a hook-like one (``def
        hook(g): return g * 2``) also goes on to the builder."""
        from autogradcli.lang.hooks import as_lambda

        args = stmt.args
        if (
            stmt.decorator_list
            or args.posonlyargs
            or args.kwonlyargs
            or args.vararg
            or args.kwarg
            or args.defaults
        ):
            if as_lambda(stmt) is None:
                raise ExpressionError("function_form", name=stmt.name)
            return False
        self.forget(stmt.name)
        self.defs[stmt.name] = stmt
        return as_lambda(stmt) is None

    def called(self, stmt: ast.stmt) -> tuple[str | None, ast.Call] | None:
        """``NAME = f(...)`` or ``f(...)`` of a function the cell defines."""
        value = stmt.value if isinstance(stmt, ast.Assign | ast.Expr) else None
        if not (
            isinstance(value, ast.Call)
            and isinstance(value.func, ast.Name)
            and value.func.id in self.defs
        ):
            return None
        if isinstance(stmt, ast.Expr):
            return None, value
        assert isinstance(stmt, ast.Assign)
        if len(stmt.targets) != 1 or not isinstance(stmt.targets[0], ast.Name):
            raise ExpressionError("function_call_alone", name=value.func.id, text=_head(stmt))
        return stmt.targets[0].id, value

    def refuse_calls(self, stmt: ast.stmt) -> None:
        """A call of the cell's function inside an expression is not inlined."""
        if not self.defs:  # no function of the cell's: nothing to look for
            return
        for node in ast.walk(stmt):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id in self.defs
                and node.func.id not in self.numbers
            ):
                raise ExpressionError("function_call_alone", name=node.func.id, text=_head(stmt))

    def call(self, stmt: ast.stmt, target: str | None, node: ast.Call) -> Iterator[Flow | ast.stmt]:
        """The function's body inlined: its parameters bound to the arguments (read in the
        caller's scope), its own names in a scope of their own, its ``return`` bound to
        ``target``."""
        assert isinstance(node.func, ast.Name)
        name, text = node.func.id, _head(stmt)
        function = self.defs[name]
        params = [a.arg for a in function.args.args]
        given: dict[str, ast.expr] = dict(zip(params, node.args, strict=False))
        for keyword in node.keywords:
            if keyword.arg is None or keyword.arg not in params or keyword.arg in given:
                raise ExpressionError(
                    "function_arguments", name=name, text=text, params=", ".join(params)
                )
            given[keyword.arg] = keyword.value
        if len(node.args) > len(params) or set(given) != set(params):
            raise ExpressionError(
                "function_arguments", name=name, text=text, params=", ".join(params)
            )
        if len(self.calls) >= MAX_CALLS:
            raise ExpressionError("call_depth", text=text, cap=MAX_CALLS)
        numbers = {p: self.number(a) for p, a in given.items()}
        tensors = tuple(
            (p, self.substitute_expr(a)) for p, a in given.items() if numbers[p] is None
        )
        local = _locals(function) | set(params)
        saved = [{n: t[n] for n in local if n in t} for t in self.tables()]
        for n in local:
            self.forget(n)
        self.numbers.update({p: v for p, v in numbers.items() if v is not None})
        yield Enter(name, tensors, frozenset(local), text)
        self.calls.append(name)
        loops, self.loops = self.loops, 0  # a function's body is outside the caller's loops
        returned: int | float | bool | None = None
        try:
            yield from self.statements(function.body)
        except _Returned as done:
            returned = done.args[0] if done.args else None
        finally:
            self.calls.pop()
            self.loops = loops
            for n in local:
                self.forget(n)
            for table, kept in zip(self.tables(), saved, strict=True):
                table.update(kept)  # type: ignore[attr-defined]
        if target is not None:
            self.forget(target)
        if returned is not None and target is not None:
            self.numbers[target] = returned
            target = None
        yield Leave(target, text)

    def returned(self, stmt: ast.Return) -> Iterator[Flow]:
        """``return value``: a Python number is kept here; a tensor goes to the builder."""
        if stmt.value is None:
            raise _Returned()
        number = self.number(stmt.value)
        if number is None:
            self.refuse_calls(stmt)
            yield Return(self.substitute_expr(stmt.value), _head(stmt))
        raise _Returned(number)

    def tables(self) -> tuple[dict[str, Any], ...]:
        return (self.numbers, self.dtypes, self.devices)

    # --- conditions -----------------------------------------------------------------------

    def condition(self, node: ast.expr, head: str, kind: str, stmt: ast.stmt) -> bool:
        """The whole condition's truth; where a tensor took part, the builder is told the
        outcome (``settle``: what the notes say)."""
        before = self.decisions
        value = self.truth(node, head, kind, stmt)
        if self.decisions != before and self.settle is not None:
            self.settle(value)
        return value

    def truth(self, node: ast.expr, head: str, kind: str, stmt: ast.stmt) -> bool:
        """A condition's truth as Python takes it: a Python number's, else the tensor's
        (``bool(t)``, read by ``decide`` from the run's values); ``and``, ``or`` and
        ``not`` as Python reads them, left to right."""
        value = self.number(node)
        if value is not None:
            return bool(value)
        if isinstance(node, ast.BoolOp):
            want = isinstance(node.op, ast.Or)  # the value that ends the reading
            for part in node.values:
                if self.truth(part, head, kind, stmt) == want:
                    return want
            return not want
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.truth(node.operand, head, kind, stmt)
        if self.decide is None:
            raise ExpressionError("if_not_number", text=ast.unparse(node))
        if self.in_with:
            raise ExpressionError("flow_in_with")
        self.refuse_calls(ast.Expr(node))
        for part in ast.walk(node):
            if (isinstance(part, ast.Call) and method_of(part) in ("item", "tolist")) or (
                isinstance(part, ast.Call)
                and isinstance(part.func, ast.Name)
                and part.func.id in ("float", "int", "bool")
            ):
                raise ExpressionError("condition_item", text=head)
        self.decisions += 1
        return self.decide(self.substitute_expr(node), head, kind, stmt.lineno)

    def while_loop(self, stmt: ast.While) -> Iterator[ast.stmt | Flow]:
        """``while condition:``: the body again while the condition holds, each test read
        as Python reads it (a tensor's from the run's values at that point)."""
        head = f"while {self.written(stmt.test)}:"
        if stmt.orelse:
            raise ExpressionError("while_form", text=head)
        while self.condition(stmt.test, head, "while", stmt):
            self.one_more(head)
            try:
                yield from self.looped(stmt.body)
            except Break:
                break

    def one_more(self, head: str) -> None:
        self.iterations += 1
        if self.iterations > self.max_iterations:
            raise ExpressionError("while_iterations_cap", text=head, cap=self.max_iterations)

    def looped(self, body: list[ast.stmt]) -> Iterator[ast.stmt | Flow]:
        """One pass of a loop's body: ``continue`` ends the pass, ``break`` goes on up."""
        self.loops += 1
        try:
            yield from self.statements(body)
        except Jump as jump:
            if isinstance(jump, Break):
                raise
        finally:
            self.loops -= 1

    def jump(self, stmt: ast.Break | ast.Continue) -> None:
        if not self.loops:
            raise ExpressionError("jump_outside_loop", text=_head(stmt))
        raise Break() if isinstance(stmt, ast.Break) else Jump()


def _head(stmt: ast.AST) -> str:
    return ast.unparse(stmt).split("\n")[0]


def breaks(body: list[ast.stmt]) -> bool:
    """Whether a loop's body has ``break`` or ``continue`` of its own."""
    stack: list[ast.AST] = list(body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Break | ast.Continue):
            return True
        if not isinstance(node, ast.FunctionDef | ast.For | ast.While):
            stack.extend(ast.iter_child_nodes(node))
        elif not isinstance(node, ast.FunctionDef):
            stack.extend(node.orelse)  # a nested loop's own break is its own
    return False


def _locals(function: ast.FunctionDef) -> set[str]:
    """The names a function's body binds (Python's rule: each is local to it)."""
    found: set[str] = set()
    stack: list[ast.AST] = list(function.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            found.add(node.id)
        if isinstance(node, ast.FunctionDef):
            found.add(node.name)
            continue
        stack.extend(ast.iter_child_nodes(node))
    return found


class Stop(Exception):
    """The cell's run ends at a condition: Python raises there, or (read without values)
    the rest waits for the values of the run."""


UNBOUND = ""  # a function's own name before its body binds it (Python: UnboundLocalError)


class FlowLines:
    """The builder's side of the cell's own functions and tensor conditions (a mixin of
    ``program._Builder``): scopes of calls, returns, and each tensor condition read from
    the run's values (``oracle``) and recorded as a ``Branch``."""

    current: dict[str, str]
    statements: list[Any]
    leaves: dict[str, Any]
    registered: set[str]
    guards: list[Any]
    mode: str
    line_text: str
    oracle: Any
    frames: list[tuple[dict[str, str], frozenset[str]]]
    returning: Any
    branched: bool
    previous: dict[tuple[int, str], tuple[Any, int]]

    def expression(self, node: ast.AST, readable: bool = False) -> Any: ...  # the builder's

    def add_step(self, written: str, node: Any, in_place: Any = None) -> None: ...

    def flow(self, item: Flow) -> None:
        """A call's start, its return or its end."""
        start = len(self.statements)
        self.guards, self.mode, self.line_text = [], "", item.text
        if isinstance(item, Enter):
            self.enter(item)
        elif isinstance(item, Return):
            self.returning = self.expression(item.value)
        else:
            self.leave(item)
        if self.guards:
            self.statements[start:start] = self.guards
            self.guards = []

    def enter(self, item: Enter) -> None:
        from autogradcli.lang.tree import Name

        nodes = [(p, self.expression(a)) for p, a in item.arguments]  # the caller's names
        frame = {n: self.current.pop(n) for n in item.local if n in self.current}
        self.frames.append((frame, item.local))
        self.current.update(dict.fromkeys(item.local, UNBOUND))
        self.registered.add(item.function)
        for param, node in nodes:
            if isinstance(node, Name) and "." not in node.id:
                self.current[param] = node.id  # the same tensor, as Python passes it
            else:
                self.add_step(param, node)

    def leave(self, item: Leave) -> None:
        frame, local = self.frames.pop()
        for name in local:
            self.current.pop(name, None)
        self.current.update(frame)
        value, self.returning = self.returning, None
        if item.target is not None:
            if value is None:
                raise ExpressionError("function_returns_nothing", text=item.text)
            self.add_step(item.target, value)

    def same_again(self, tree: Any, head: str, line: int) -> None:
        """A ``while`` whose condition reads the very tensors it read the pass before,
        nothing changed in place between: it never ends (Python would hang)."""
        from autogradcli.lang.guards import Guard
        from autogradcli.lang.tree import Leaf, Show, Step

        before = self.previous.get((line, head))
        self.previous[(line, head)] = (tree, len(self.statements))
        if before is None or before[0] != tree:
            return
        between = self.statements[before[1] :]
        if all(
            isinstance(s, Leaf | Show | Guard) or (isinstance(s, Step) and s.in_place is None)
            for s in between
        ):
            raise ExpressionError("while_never_ends", text=head)

    def settle(self, value: bool) -> None:
        """The whole condition's truth, kept on its last ``Branch`` (for the notes)."""
        from dataclasses import replace

        from autogradcli.lang.cellstatements import Branch

        for index in range(len(self.statements) - 1, -1, -1):
            if isinstance(self.statements[index], Branch):
                self.statements[index] = replace(self.statements[index], outcome=value)
                return

    def decide(self, node: ast.expr, head: str, kind: str, line: int) -> bool:
        """A tensor condition: its tree, read from the run's values at this point (the
        oracle's); recorded as a ``Branch`` the run reads again."""
        from autogradcli.lang.cellstatements import Branch

        start = len(self.statements)
        self.guards, self.mode, self.line_text = [], "", head
        tree = self.expression(node)
        self.statements[start:start] = self.guards
        self.guards = []
        self.branched = True
        if self.oracle is None:  # parsed without values: the run reads the rest
            self.statements.append(Branch((tree,), head, kind=kind, line=line, open=True))
            raise Stop
        taken = self.oracle.decide(self.statements, self.leaves, tree)
        if kind == "while" and taken:
            self.same_again(tree, head, line)
        self.statements.append(Branch((tree,), head, kind=kind, line=line, taken=taken))
        if taken is None:  # Python raises here (or earlier): the cell ends
            raise Stop
        return bool(taken)


def seed_of(module: ast.Module) -> int | None:
    """``torch.manual_seed(n)`` anywhere in a cell seeds its draws (read before any path)."""
    for node in ast.walk(module):
        if (
            isinstance(node, ast.Call)
            and ast.unparse(node.func) == "torch.manual_seed"
            and len(node.args) == 1
            and isinstance(node.args[0], ast.Constant)
            and type(node.args[0].value) is int
            and node.args[0].value >= 0
        ):
            return node.args[0].value
    return None
