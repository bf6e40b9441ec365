"""Custom autograd Functions: ``class NAME(torch.autograd.Function)`` read as data.

The forms PyTorch documents ("Extending PyTorch" and the tutorial's LegendrePolynomial3):
``@staticmethod`` ``forward(ctx, ...)`` and ``backward(ctx, grad_output, ...)``, or
``forward(...)`` with ``setup_context(ctx, inputs, output)``; ``jvp(ctx, ...)``;
``ctx.save_for_backward(...)``, ``ctx.saved_tensors``, ``ctx.needs_input_grad[i]``, plain
attributes on ``ctx``; ``if`` on ``ctx.needs_input_grad[i]`` and ``x is (not) None``;
``@once_differentiable``. Every expression goes through the language's converter (the same
whitelist as any line); nothing is run as Python.

``run`` interprets a method's lines over a ``Domain``: tensors on the torch side
(``torchside.custom``), trees for the reference (the forward inlined into the program).
"""

from __future__ import annotations

import ast
import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from autogradcli.errors import ExpressionError
from autogradcli.lang.converter import Converter
from autogradcli.lang.tree import Call, Name, Node, Rebuild
from autogradcli.settings import Limits

BASES = ("torch.autograd.Function", "autograd.Function", "Function")
DECORATORS = {"staticmethod", "once_differentiable"}
METHODS = ("forward", "setup_context", "backward", "vjp", "jvp")
Cond = tuple[tuple[str, Any], ...]  # ("needs", i), ("given", name), ("none", name)


@dataclass(frozen=True)
class Line:
    """One statement of a method: ``assign`` (``targets = value``; ``source`` ``saved``,
    ``inputs``, ``output`` or a local unpacks a tuple), ``ctx`` (``ctx.attr = value``),
    ``save`` (``ctx.save_for_backward(values)``), ``if`` (``cond`` true: ``body``, else
    ``orelse``) or ``return`` (``values``; ``many`` when a tuple)."""

    kind: str
    targets: tuple[str, ...] = ()
    value: Node | None = None
    values: tuple[Node | None, ...] = ()
    source: str = ""
    cond: tuple[Cond, ...] = ()  # any of the conjunctions
    body: tuple[Line, ...] = ()
    orelse: tuple[Line, ...] = ()
    many: bool = False


@dataclass(frozen=True)
class Method:
    """A staticmethod: its parameters after ``ctx`` (``optional`` default to None)."""

    name: str
    params: tuple[str, ...]
    optional: tuple[str, ...]
    lines: tuple[Line, ...]
    has_ctx: bool = True
    once_differentiable: bool = False


@dataclass(frozen=True)
class CustomFunction:
    """A ``torch.autograd.Function`` subclass as the cell defines it."""

    name: str
    forward: Method
    backward: Method
    setup_context: Method | None = None
    jvp: Method | None = None
    text: str = ""
    key: str = field(default="")

    @property
    def inputs(self) -> tuple[str, ...]:
        return self.forward.params

    @property
    def op_name(self) -> str:
        """The vocabulary entry its ``.apply`` calls become."""
        return f"{self.name}.apply"


def is_function_class(stmt: ast.AST, namespaces: dict[str, str]) -> bool:
    """Whether a class statement subclasses ``torch.autograd.Function``."""
    if not isinstance(stmt, ast.ClassDef) or len(stmt.bases) != 1:
        return False
    written = ast.unparse(stmt.bases[0])
    head, _, rest = written.partition(".")
    full = f"{namespaces.get(head, head)}.{rest}" if rest else written
    return full in BASES or written == "Function"


def read_class(
    stmt: ast.ClassDef, text: str, limits: Limits, namespaces: dict[str, str]
) -> CustomFunction:
    """The class's methods, read; a form outside PyTorch's documented ones is refused."""
    if stmt.keywords or stmt.decorator_list:
        raise _refused(stmt, "a class with keywords or decorators")
    methods: dict[str, ast.FunctionDef] = {}
    for item in stmt.body:
        if _docstring(item) or isinstance(item, ast.Pass):
            continue
        if not isinstance(item, ast.FunctionDef) or item.name not in METHODS:
            raise _refused(item, "only forward, setup_context, backward and jvp methods")
        methods[item.name] = item
    if "vjp" in methods and "backward" not in methods:
        methods["backward"] = methods.pop("vjp")
    if "forward" not in methods or "backward" not in methods:
        raise ExpressionError("custom_function_methods", name=stmt.name)
    reader = _Reader(limits, namespaces)
    has_setup = "setup_context" in methods
    forward = reader.method(methods["forward"], ctx=not has_setup)
    setup = reader.method(methods["setup_context"]) if has_setup else None
    if setup is not None and setup.params != ("inputs", "output") and len(setup.params) != 2:
        raise _refused(methods["setup_context"], "setup_context(ctx, inputs, output)")
    source = ast.get_source_segment(text, stmt) or ast.unparse(stmt)
    return CustomFunction(
        stmt.name,
        forward,
        reader.method(methods["backward"]),
        setup,
        reader.method(methods["jvp"]) if "jvp" in methods else None,
        source,
        hashlib.sha256(source.encode()).hexdigest()[:12],
    )


def _docstring(item: ast.stmt) -> bool:
    return (
        isinstance(item, ast.Expr)
        and isinstance(item.value, ast.Constant)
        and isinstance(item.value.value, str)
    )


def _refused(node: ast.AST, instead: str) -> ExpressionError:
    text = ast.unparse(node).strip().split("\n")[0]
    return ExpressionError("custom_function_form", text=text, instead=instead)


class _CtxNames(ast.NodeTransformer):
    """``ctx.attr`` as one name ``ctx.attr``; ``a.expand_as(b)`` as ``a + zeros_like(b)``
    (the same values by broadcasting, and the same gradients)."""

    def __init__(self, ctx: str) -> None:
        self.ctx = ctx

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        if isinstance(node.value, ast.Name) and node.value.id == self.ctx:
            return ast.copy_location(ast.Name(id=f"ctx.{node.attr}", ctx=ast.Load()), node)
        return self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> ast.AST:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "expand_as" and len(node.args) == 1:
            value = self.visit(func.value)
            other = self.visit(node.args[0])
            zeros = ast.Call(
                ast.Attribute(ast.Name("torch", ast.Load()), "zeros_like", ast.Load()),
                [other],
                [],
            )
            return ast.copy_location(ast.BinOp(value, ast.Add(), zeros), node)
        return self.generic_visit(node)


@dataclass
class _Reader:
    limits: Limits
    namespaces: dict[str, str]
    ctx: str = "ctx"

    def method(self, node: ast.FunctionDef, ctx: bool = True) -> Method:
        decorators = set()
        for d in node.decorator_list:
            name = ast.unparse(d).split(".")[-1]
            if name not in DECORATORS:
                raise _refused(d, "@staticmethod (and @once_differentiable)")
            decorators.add(name)
        if "staticmethod" not in decorators:
            raise ExpressionError("custom_function_static", name=node.name)
        args = node.args
        if args.vararg or args.kwarg or args.kwonlyargs or args.posonlyargs:
            raise _refused(node, f"def {node.name}(ctx, a, b, ...) with named parameters")
        names = [a.arg for a in args.args]
        if ctx:
            if not names:
                raise _refused(node, f"def {node.name}(ctx, ...)")
            self.ctx = names.pop(0)
        defaults = args.defaults
        if any(not (isinstance(d, ast.Constant) and d.value is None) for d in defaults):
            raise _refused(node, "None as the only default (bias=None)")
        optional = tuple(names[len(names) - len(defaults) :]) if defaults else ()
        lines = self.block(node.body)
        return Method(
            node.name,
            tuple(names),
            optional,
            lines,
            ctx,
            "once_differentiable" in decorators,
        )

    def block(self, body: Sequence[ast.stmt]) -> tuple[Line, ...]:
        return tuple(line for s in body if (line := self.line(s)) is not None)

    def expr(self, node: ast.expr) -> Node | None:
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        node = _CtxNames(self.ctx).visit(ast.fix_missing_locations(node))
        return Converter(self.limits, self.namespaces)(node)

    def is_ctx(self, node: ast.AST, attr: str) -> bool:
        return (
            isinstance(node, ast.Attribute)
            and node.attr == attr
            and isinstance(node.value, ast.Name)
            and node.value.id == self.ctx
        )

    def line(self, stmt: ast.stmt) -> Line | None:
        if _docstring(stmt) or isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.Assign):
            return self.assign(stmt)
        if isinstance(stmt, ast.AugAssign) and isinstance(stmt.target, ast.Name):
            value = ast.BinOp(ast.Name(stmt.target.id, ast.Load()), stmt.op, stmt.value)
            return Line("assign", (stmt.target.id,), self.expr(value))
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            call = stmt.value
            saves = ("save_for_backward", "save_for_forward")
            if any(self.is_ctx(call.func, s) for s in saves) and not call.keywords:
                return Line("save", values=tuple(self.expr(a) for a in call.args))
        if isinstance(stmt, ast.If):
            return Line(
                "if",
                cond=self.condition(stmt.test),
                body=self.block(stmt.body),
                orelse=self.block(stmt.orelse),
            )
        if isinstance(stmt, ast.Return) and stmt.value is not None:
            if isinstance(stmt.value, ast.Tuple):
                return Line(
                    "return", values=tuple(self.expr(e) for e in stmt.value.elts), many=True
                )
            return Line("return", values=(self.expr(stmt.value),))
        raise _refused(stmt, _INSTEAD)

    def assign(self, stmt: ast.Assign) -> Line:
        value = stmt.value
        targets: list[str] = []
        for target in stmt.targets:
            if self.is_ctx(target, target.attr if isinstance(target, ast.Attribute) else ""):
                assert isinstance(target, ast.Attribute)
                if len(stmt.targets) != 1:
                    raise _refused(stmt, _INSTEAD)
                return Line("ctx", (f"ctx.{target.attr}",), self.expr(value))
            if isinstance(target, ast.Tuple) and len(stmt.targets) == 1:
                names = [e.id for e in target.elts if isinstance(e, ast.Name)]
                if len(names) != len(target.elts):
                    raise _refused(stmt, _INSTEAD)
                if self.is_ctx(value, "saved_tensors"):
                    return Line("assign", tuple(names), source="saved")
                if isinstance(value, ast.Name):
                    return Line("assign", tuple(names), source=value.id)
                if isinstance(value, ast.Tuple) and len(value.elts) == len(names):
                    return Line(
                        "assign", tuple(names), values=tuple(self.expr(e) for e in value.elts)
                    )
                raise _refused(stmt, _INSTEAD)
            if not isinstance(target, ast.Name):
                raise _refused(stmt, _INSTEAD)
            targets.append(target.id)
        if self.is_ctx(value, "saved_tensors"):
            return Line("assign", tuple(targets), source="saved_tuple")
        return Line("assign", tuple(targets), self.expr(value))

    def condition(self, test: ast.expr) -> tuple[Cond, ...]:
        """``if`` on ``ctx.needs_input_grad[i]`` and ``name is (not) None``, with and/or."""
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or):
            return tuple(c for v in test.values for c in self.condition(v))
        if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
            parts = [self.condition(v) for v in test.values]
            if any(len(p) != 1 for p in parts):
                raise _refused(test, _CONDITION)
            return (tuple(a for p in parts for a in p[0]),)
        if isinstance(test, ast.Subscript) and self.is_ctx(test.value, "needs_input_grad"):
            index = test.slice
            if isinstance(index, ast.Constant) and type(index.value) is int:
                return ((("needs", index.value),),)
        if (
            isinstance(test, ast.Compare)
            and len(test.ops) == 1
            and isinstance(test.left, ast.Name)
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value is None
            and isinstance(test.ops[0], (ast.Is, ast.IsNot))
        ):
            kind = "given" if isinstance(test.ops[0], ast.IsNot) else "none"
            return (((kind, test.left.id),),)
        raise _refused(test, _CONDITION)


_INSTEAD = (
    "assignments, ctx.save_for_backward(...), a, b = ctx.saved_tensors, ctx.name = value, "
    "if ctx.needs_input_grad[i]: / if x is not None:, and return"
)
_CONDITION = "ctx.needs_input_grad[i] or x is not None (with and / or)"


# --- running a method's lines ------------------------------------------------------------


class Domain(Protocol):
    """What the lines compute with: tensors (torch side) or trees (the reference)."""

    def value(self, node: Node, env: dict[str, Any]) -> Any: ...

    def save(self, values: list[Any]) -> None: ...

    def saved(self) -> tuple[Any, ...]: ...

    def needs(self, index: int) -> bool: ...


class Returned(Exception):
    """A ``return``: its values."""

    def __init__(self, values: tuple[Any, ...], many: bool) -> None:
        self.values, self.many = values, many


def run(method: Method, env: dict[str, Any], domain: Domain) -> Any:
    """The method's lines over ``domain``: what it returns (a tuple when it returns several)."""
    try:
        _lines(method.lines, env, domain)
    except Returned as done:
        return done.values if done.many else done.values[0]
    if method.name == "setup_context":  # it returns nothing
        return None
    raise ExpressionError("custom_function_return", name=method.name)


def _lines(lines: tuple[Line, ...], env: dict[str, Any], domain: Domain) -> None:
    for line in lines:
        if line.kind == "assign":
            if line.source:
                found = domain.saved() if line.source.startswith("saved") else env[line.source]
                if line.source == "saved_tuple":
                    for target in line.targets:
                        env[target] = tuple(found)
                    continue
                if len(found) != len(line.targets):
                    raise ExpressionError(
                        "custom_function_unpack", count=len(found), names=", ".join(line.targets)
                    )
                env.update(zip(line.targets, found, strict=True))
            elif line.values:
                found = [_value(v, env, domain) for v in line.values]
                env.update(zip(line.targets, found, strict=True))
            else:
                value = _value(line.value, env, domain)
                env.update(dict.fromkeys(line.targets, value))
        elif line.kind == "ctx":
            env[line.targets[0]] = _value(line.value, env, domain)
        elif line.kind == "save":
            domain.save([_value(v, env, domain) for v in line.values])
        elif line.kind == "if":
            _lines(line.body if _holds(line.cond, env, domain) else line.orelse, env, domain)
        elif line.kind == "return":
            raise Returned(tuple(_value(v, env, domain) for v in line.values), line.many)


def _value(node: Node | None, env: dict[str, Any], domain: Domain) -> Any:
    if isinstance(node, Name) and node.id in env:  # a local as it is (None, a tuple)
        return env[node.id]
    return None if node is None else domain.value(node, env)


def _holds(cond: tuple[Cond, ...], env: dict[str, Any], domain: Domain) -> bool:
    def atom(kind: str, arg: Any) -> bool:
        if kind == "needs":
            return domain.needs(arg)
        present = env.get(arg) is not None
        return present if kind == "given" else not present

    return any(all(atom(k, a) for k, a in conj) for conj in cond)


# --- the reference side: the forward as one tree -----------------------------------------


class Substitute(Rebuild):
    """Names replaced by trees (a name not given stays)."""

    def __init__(self, env: dict[str, Any]) -> None:
        super().__init__()
        self.env = env

    def name(self, node: Name) -> Node:
        found = self.env.get(node.id)
        return found if isinstance(found, (Name, Call)) or _is_node(found) else node


def _is_node(value: object) -> bool:
    from autogradcli.lang import tree

    return isinstance(value, (tree.Num, tree.Unary, tree.Binary, tree.Index))


@dataclass
class TreeDomain:
    """Lines over trees: each local is the tree of what it holds; ``needs`` from
    ``wanted``."""

    wanted: tuple[bool, ...] = ()
    kept: list[Any] = field(default_factory=list)

    def value(self, node: Node, env: dict[str, Any]) -> Any:
        return Substitute(env)(node)

    def save(self, values: list[Any]) -> None:
        self.kept = list(values)

    def saved(self) -> tuple[Any, ...]:
        return tuple(self.kept)

    def needs(self, index: int) -> bool:
        return self.wanted[index] if index < len(self.wanted) else False


def forward_tree(fn: CustomFunction, args: dict[str, Node | None]) -> Any:
    """The forward's result as trees of its arguments (one, or a tuple)."""
    env: dict[str, Any] = dict(args)
    return run(fn.forward, env, TreeDomain())


Expander = Callable[..., Node]


REGISTERED: dict[str, CustomFunction] = {}  # by entry name: the class each was read from
# how PyTorch runs a Function's .apply: set by torchside.custom when the torch side loads
# (the language never imports the torch side)
RUNNER: dict[str, Callable[[CustomFunction, tuple[Any, ...], dict[str, Any]], Any]] = {}


def outputs(fn: CustomFunction) -> int:
    """How many tensors the forward returns (0: one, not a tuple)."""
    tree = forward_tree(fn, {p: Name(p) for p in fn.inputs})
    return len(tree) if isinstance(tree, tuple) else 0


def output_name(fn: CustomFunction, k: int) -> str:
    """The entry of output ``k`` of a Function that returns several."""
    return f"{fn.op_name}[{k}]"


def register(fn: CustomFunction, limits: Limits) -> None:
    """The Function's ``.apply`` as an entry of the vocabulary (``NAME.apply``, and
    ``NAME.apply[k]`` for each output of a forward that returns several): PyTorch runs the
    class (``torchside.custom``), the reference reads the forward inlined. A class of the
    same name read again replaces the entries."""
    count = outputs(fn)
    _register(fn, limits, None)
    for k in range(count):
        _register(fn, limits, k)


def _register(fn: CustomFunction, limits: Limits, output: int | None) -> None:
    from autogradcli.lang import vocabulary
    from autogradcli.lang.ops import Op
    from autogradcli.lang.shapes import infer_shape

    name = fn.op_name if output is None else output_name(fn, output)
    existing = vocabulary.OPS.get(name)
    REGISTERED[name] = fn
    if existing is not None and getattr(existing.torch, "key", None) == fn.key:
        return
    params = fn.inputs

    def expand(*nodes: Node, **optional: Node) -> Node:
        args: dict[str, Node | None] = dict(zip(params, nodes, strict=False))
        args.update(optional)
        tree = forward_tree(fn, {p: args.get(p) for p in params})
        if isinstance(tree, tuple) and output is not None:
            return tree[output]
        if isinstance(tree, tuple):
            raise ExpressionError("custom_function_outputs", name=fn.name, count=len(tree))
        return tree

    def shape(shapes: list[tuple[int, ...]], **_: Any) -> tuple[int, ...]:
        holders = {f"#{k}": s for k, s in enumerate(shapes)}
        return infer_shape(expand(*(Name(h) for h in holders)), holders, limits)

    def run_torch(torch: Any, *tensors: Any, **optional: Any) -> Any:
        found = RUNNER["apply"](fn, tensors, optional)
        return found if output is None else found[output]

    run_torch.key = fn.key  # type: ignore[attr-defined]
    if existing is not None:
        vocabulary.remove(name)
    vocabulary.add(
        Op(
            name,
            torch=run_torch,
            expand=expand,
            shape=shape,
            tensors=params,
            optional=frozenset(fn.forward.optional),
            spelled=("bare",),
            kind="structural",
        )
    )
