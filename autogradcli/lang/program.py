"""Programs and notebook cells: the lines around the maths, read without running any.

A line is one of: an assignment (``y = x * 2``, ``c += c + 1``; a name assigned again is a
new step, as in Python), a value the program defines (``x = torch.tensor([2., 3.],
requires_grad=True)``; without ``requires_grad=True`` it is a constant), a backward call
(``Q.backward(gradient=v, retain_graph=True)``), ``x.grad.zero_()`` or ``x.grad = None``,
``print(...)`` or a bare line (shown at that point), ``import`` of the known modules
(``torch``, ``torch.nn.functional as F``, ``numpy as np``, ``math``),
``torch.manual_seed(n)``, and ``with torch.no_grad():`` or ``with
torch.inference_mode():`` around assignments. Anything
else is refused with what to write instead.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from autogradcli.errors import ExpressionError
from autogradcli.lang.analysis import check_constants
from autogradcli.lang.cellstatements import DeviceUse
from autogradcli.lang.converter import CONSTRUCTORS, NAMESPACES, Converter, module_of
from autogradcli.lang.customlines import CustomLines
from autogradcli.lang.flow import PATH_ORACLE, UNBOUND, FlowLines, Stop, seed_of
from autogradcli.lang.guards import Guard as Guard
from autogradcli.lang.guards import PythonSemantics, literal
from autogradcli.lang.hooks import HookLines, as_lambda
from autogradcli.lang.hooks import active_hooks as active_hooks
from autogradcli.lang.inplace import InPlaceLines
from autogradcli.lang.loops import Unroller
from autogradcli.lang.names import Renames
from autogradcli.lang.prints import PrintLines
from autogradcli.lang.syntax import (
    fresh_name,
    is_none,
    keyword_flag,
    method_of,
    owner_of,
    statement_text,
    survey,
    truth,
)
from autogradcli.lang.text import source_segment
from autogradcli.lang.tree import (
    Backward,
    Call,
    Hook,
    InPlace,
    Leaf,
    Name,
    Node,
    Num,
    Program,
    Rebuild,
    Reset,
    Show,
    Statement,
    Step,
    walk_names,
)
from autogradcli.lang.values import is_len
from autogradcli.lang.vocabulary import BARE, CONSTANTS, SPELLINGS
from autogradcli.settings import Limits

# import lines a cell may have, as (module, name it is bound to): nothing is imported.
IMPORTS: dict[tuple[str, str], str] = {
    ("torch", "torch"): "torch",
    ("torch.nn.functional", "F"): "F",
    ("torch.nn.functional", "functional"): "F",
    ("numpy", "np"): "np",
    ("numpy", "numpy"): "np",
    ("math", "math"): "math",
    ("torch.nn", "nn"): "nn",
}
# the blocks a cell may open, and the operation each wraps its assignments in: under
# no_grad a result is a constant copy (as detach() makes); under inference_mode an inference tensor,
# which PyTorch refuses to save for backward later (its own error).
GRAD_MODES: dict[str, str] = {
    "torch.no_grad": "no_grad",
    "torch.inference_mode": "inference_mode",
}
_STATEMENTS: dict[type, str] = {
    ast.AnnAssign: "annotated assignments",
    ast.FunctionDef: "function definitions",
    ast.AsyncFunctionDef: "function definitions",
    ast.ClassDef: "class definitions",
    ast.For: "loops",
    ast.While: "loops",
    ast.If: "if statements",
    ast.Delete: "del statements",
    ast.Return: "return",
    ast.Try: "try statements",
    ast.Raise: "raise",
    ast.Global: "global",
    ast.Assert: "assert",
}


@dataclass
class _Builder(InPlaceLines, HookLines, Renames, CustomLines, PrintLines, FlowLines):
    """Reads a cell line by line: names to their current step, leaves, and statements."""

    text: str
    limits: Limits
    given: frozenset[str]
    namespaces: dict[str, str] = field(default_factory=lambda: dict(NAMESPACES))
    current: dict[str, str] = field(default_factory=dict)  # written name -> step or leaf
    taken: set[str] = field(default_factory=set)
    steps: list[Step] = field(default_factory=list)
    leaves: dict[str, Leaf] = field(default_factory=dict)
    statements: list[Statement] = field(default_factory=list)
    free: list[str] = field(default_factory=list)
    names: dict[str, str] = field(default_factory=dict)
    used: set[str] = field(default_factory=set)
    idents: set[str] = field(default_factory=set)  # the names the text uses (survey)
    lifted: int = 0
    seed: int | None = None
    root: Node | None = None
    handles: dict[str, Hook] = field(default_factory=dict)  # h = y.register_hook(...)
    hooked: set[str] = field(default_factory=set)  # the tensors a hook is on
    functions: dict[str, ast.Lambda] = field(default_factory=dict)  # hook functions, by name
    registered: set[str] = field(default_factory=set)  # those register_hook was given
    cell: bool = False  # read as Python runs it: ^ is xor, np./math. see the tensors
    guards: list[Guard] = field(default_factory=list)  # the line's, before its statement
    mode: str = ""  # the grad mode of the line being read
    line_text: str = ""
    lifts: dict[int, Name] = field(default_factory=dict)  # a constructor lifted once
    counters: dict[str, int] = field(default_factory=dict)  # the last k of written_k
    segments: dict[tuple[int | None, ...], str] = field(default_factory=dict)
    oracle: Any = None  # reads a tensor condition from the run's values (cellrun's)
    frames: list[tuple[dict[str, str], frozenset[str]]] = field(default_factory=list)
    returning: Node | None = None
    branched: bool = False  # a tensor condition was read
    previous: dict[tuple[int, str], tuple[Any, int]] = field(default_factory=dict)

    def written(self, stmt: ast.AST) -> str:
        """The line as the cell writes it (its spacing kept), for showing."""
        key = tuple(getattr(stmt, a, None) for a in ("lineno", "col_offset", "end_lineno"))
        key += (getattr(stmt, "end_col_offset", None),)
        if key not in self.segments:  # a loop's lines are read once per iteration
            segment = source_segment(self.text, stmt) or statement_text(stmt)
            self.segments[key] = segment.strip()
        return self.segments[key]

    # --- names -------------------------------------------------------------------------

    def fresh(self, written: str) -> str:
        """The name for a new binding of ``written``: itself the first time, then
        ``written_2``, ``written_3``, ... (never a name the text uses)."""
        name, k = written, 1
        if self.current.get(written) or written in self.free or written in self.taken:
            k = self.counters.get(written, 1) + 1  # a loop binds a name thousands of times
            name = f"{written}_{k}"
            while name in self.taken or name in self.idents:
                k += 1
                name = f"{written}_{k}"
            self.counters[written] = k
        self.taken.add(name)
        self.names[name] = written
        return name

    def resolve(self, node: Node) -> Node:
        """A converted tree with each written name replaced by its current binding."""
        return _Current(self)(node)

    def converter(self, readable: bool = False) -> Converter:
        return Converter(self.limits, self.namespaces, self.lift, readable)

    def expression(self, node: ast.AST, readable: bool = False) -> Node:
        node = self.custom_calls(node)  # NAME.apply(x), P3(x): a custom Function's entry
        for part in ast.walk(node) if self.functions else ():
            called = part.func if isinstance(part, ast.Call) else None
            if isinstance(called, ast.Name) and called.id in self.functions:
                raise ExpressionError("function_not_hook", name=called.id)
        found: list[tuple[str, list[ast.expr], str]] = []
        if self.cell:
            python = PythonSemantics(self.converter().path)
            node = python.visit(node)
            found = python.found
        tree = self.resolve(self.converter(readable)(node))
        check_constants(tree, self.limits)
        for kind, args, func in found:
            operands = tuple(self.operand(a, readable) for a in args)
            self.guards.append(Guard(kind, operands, self.line_text, self.mode, func))
        return tree

    def operand(self, node: ast.expr, readable: bool) -> Node | float:
        """One operand of a guard: a number as it is, else its tree (a constructor in it
        is the value the line itself lifted)."""
        number = literal(node)
        if number is not None:
            return number
        tree = self.resolve(self.converter(readable)(node))
        return tree.value if isinstance(tree, Num) else tree

    def lift(self, node: ast.Call) -> Name:
        """A constructor inside an expression: a constant the program defines."""
        if id(node) in self.lifts:  # read again as a guard's operand: the same value
            return self.lifts[id(node)]
        original = node
        node = copy.deepcopy(node)
        for part in ast.walk(node):  # len(y) reads the y of this line, not an earlier one
            if is_len(part):
                arg = part.args[0]  # type: ignore[attr-defined]
                arg.id = self.current.get(arg.id, arg.id)
        source = ast.unparse(node)
        flag = keyword_flag(node, "requires_grad")
        name = source
        if "rand" in source or flag:  # each draw (and each leaf) is a value of its own
            self.lifted += 1
            name = f"{source}#{self.lifted}"
        if name not in self.leaves:
            self.leaves[name] = Leaf(name, source, flag)
            self.taken.add(name)
        self.lifts[id(original)] = Name(name)
        return Name(name)

    # --- lines -------------------------------------------------------------------------

    def line(self, stmt: ast.stmt, last: bool, no_grad: str = "") -> None:
        """One line; in a cell, the points where Python raises go just before it."""
        start = len(self.statements)
        self.guards, self.mode, self.line_text = [], no_grad, self.written(stmt)
        self.read_line(stmt, last, no_grad)
        if self.guards:
            self.statements[start:start] = self.guards  # type: ignore[assignment]
            self.guards = []

    def read_line(self, stmt: ast.stmt, last: bool, no_grad: str = "") -> None:
        if self.custom_line(stmt):  # class NAME(torch.autograd.Function), P3 = NAME.apply
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.imports(stmt)
        elif isinstance(stmt, ast.Assign):
            self.assign(stmt, no_grad)
        elif isinstance(stmt, ast.AugAssign):
            self.augmented(stmt, no_grad)
        elif isinstance(stmt, ast.Expr):
            self.bare(stmt, last, no_grad)
        elif isinstance(stmt, ast.With):
            self.with_block(stmt)
        elif isinstance(stmt, ast.Pass):
            return
        elif isinstance(stmt, ast.FunctionDef) and (fn := as_lambda(stmt)) is not None:
            self.functions[stmt.name] = fn  # def hook(g): return g * 2
        else:
            what = _STATEMENTS.get(type(stmt), f"'{type(stmt).__name__.lower()}' statements")
            raise ExpressionError("statement_not_allowed", what=what)

    def imports(self, stmt: ast.Import | ast.ImportFrom) -> None:
        """Known modules under known names; nothing is imported."""
        if isinstance(stmt, ast.Import):
            pairs = [
                (a.name, a.asname) if a.asname else (a.name.split(".")[0],) * 2 for a in stmt.names
            ]
        else:
            base = "." * stmt.level + (stmt.module or "")
            pairs = [(f"{base}.{a.name}", a.asname or a.name) for a in stmt.names]
        for module, alias in pairs:
            known = IMPORTS.get((module, alias))
            if known is None:
                raise ExpressionError("import_not_allowed", text=statement_text(stmt))
            self.namespaces[alias] = known

    def assign(self, stmt: ast.Assign, no_grad: str) -> None:
        if len(stmt.targets) != 1:
            raise ExpressionError("bad_assignment", text=ast.unparse(stmt).strip())
        target = stmt.targets[0]
        if isinstance(target, ast.Attribute):
            return self.set_attribute(target, stmt)
        if not isinstance(target, ast.Name):
            raise ExpressionError("bad_assignment", text=ast.unparse(stmt).strip())
        written = target.id
        if written in BARE and written not in self.current:
            raise ExpressionError("assign_function", name=written)
        if written in self.namespaces:
            raise ExpressionError("assign_namespace", name=written)
        if isinstance(stmt.value, ast.Lambda):  # hook = lambda g: g * 2
            self.functions[written] = stmt.value
            return None
        if method_of(stmt.value) == "register_hook":
            assert isinstance(stmt.value, ast.Call)
            return self.hook(stmt.value, stmt, written)
        if self.constructor(stmt.value):
            assert isinstance(stmt.value, ast.Call)
            name = self.fresh(written)
            flag = keyword_flag(stmt.value, "requires_grad")
            self.leaves[name] = Leaf(name, ast.unparse(stmt.value), flag)
            self.statements.append(self.leaves[name])
            self.current[written] = name
            return None
        node = self.expression(stmt.value)
        # k = x under no_grad binds the same tensor (nothing is computed, nothing detached)
        alias = isinstance(node, Name) and "." not in node.id
        self.add_step(written, Call(no_grad, (node,)) if no_grad and not alias else node)
        return None

    def add_step(self, written: str, node: Node, in_place: InPlace | None = None) -> None:
        name = self.fresh(written)
        step = Step(name, node, in_place)
        self.steps.append(step)
        self.statements.append(step)
        self.current[written] = name

    def set_attribute(self, target: ast.Attribute, stmt: ast.Assign) -> None:
        """``x.grad = None`` and ``x.requires_grad = True``."""
        value = stmt.value
        owner = target.value
        if not isinstance(owner, ast.Name) or not isinstance(value, ast.Constant):
            raise ExpressionError("attribute_assignment", text=statement_text(stmt))
        if target.attr == "grad" and value.value is None:
            self.statements.append(Reset(self.leaf_of(owner.id), "none", self.written(stmt)))
            return
        if target.attr == "requires_grad" and isinstance(value.value, bool):
            self.require_grad(owner.id, value.value, statement_text(stmt))
            return
        raise ExpressionError("attribute_assignment", text=statement_text(stmt))

    def leaf_of(self, written: str) -> str:
        """The input a ``.grad`` line names (a value given from outside if not defined)."""
        name = self.current.get(written)
        if name is not None:
            return name
        if written not in self.free:
            self.free.append(written)
        return written

    def require_grad(self, written: str, flag: bool, text: str) -> None:
        name = self.current.get(written)
        leaf = self.leaves.get(name or "")
        if leaf is None:
            raise ExpressionError("requires_grad_not_leaf", name=written, text=text)
        if name in self.used:
            raise ExpressionError("requires_grad_after_use", name=written, text=text)
        self.leaves[leaf.name] = Leaf(leaf.name, leaf.source, flag)
        self.statements = [self.leaves[leaf.name] if s is leaf else s for s in self.statements]

    def bare(self, stmt: ast.Expr, last: bool, no_grad: str = "") -> None:
        value = stmt.value
        if isinstance(value, ast.Call):
            method = value.func.attr if isinstance(value.func, ast.Attribute) else None
            path = self.converter().path(value.func)
            if method == "backward" and path is None:
                return self.backward(value, stmt)
            if method == "zero_" and path is None:
                return self.zero(value, stmt)
            if method == "requires_grad_" and path is None:
                return self.requires_grad_call(value, stmt)
            if method == "register_hook" and path is None:
                return self.hook(value, stmt, "")
            if method == "remove" and owner_of(value) in self.handles and not value.args:
                return self.unhook(value, stmt)
            if method and method.endswith("_") and not method.startswith("_") and path is None:
                return self.in_place_call(value, stmt, no_grad)
            if isinstance(value.func, ast.Name) and value.func.id == "print":
                return self.show(value.args, value.keywords, stmt)
            if path == "torch.manual_seed":
                return self.manual_seed(value)
        if last and not self.is_cell():
            self.root = self.expression(value)
            return None
        used = set(self.used)
        self.statements.append(Show((self.expression(value, readable=True),), self.written(stmt)))
        self.used = used  # showing a tensor builds nothing on it
        return None

    def is_cell(self) -> bool:
        return any(isinstance(s, Backward) for s in self.statements)

    def backward(self, node: ast.Call, stmt: ast.Expr) -> None:
        assert isinstance(node.func, ast.Attribute)
        target = self.expression(node.func.value)
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        if any(k.arg is None for k in node.keywords) or len(node.args) > 2:
            raise ExpressionError("backward_arguments", text=statement_text(stmt))
        for key in keywords:
            if key not in ("gradient", "retain_graph", "create_graph", "inputs"):
                raise ExpressionError("backward_arguments", text=statement_text(stmt))
        if keywords.get("create_graph") is not None and truth(keywords["create_graph"]):
            raise ExpressionError("create_graph_here", text=statement_text(stmt))
        if "inputs" in keywords:
            raise ExpressionError("backward_inputs", text=statement_text(stmt))
        gradient_node = node.args[0] if node.args else keywords.get("gradient")
        retain = node.args[1] if len(node.args) > 1 else keywords.get("retain_graph")
        gradient = None
        if gradient_node is not None and not is_none(gradient_node):
            gradient = self.expression(gradient_node)
        flag = retain is not None and truth(retain, statement_text(stmt))
        self.statements.append(Backward(target, gradient, flag, self.written(stmt)))

    def zero(self, node: ast.Call, stmt: ast.Expr) -> None:
        """``x.grad.zero_()`` (or ``x.grad.data.zero_()``)."""
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if isinstance(owner, ast.Attribute) and owner.attr == "data":
            owner = owner.value
        if (
            isinstance(owner, ast.Attribute)
            and owner.attr == "grad"
            and isinstance(owner.value, ast.Name)
            and not node.args
        ):
            self.statements.append(Reset(self.leaf_of(owner.value.id), "zero", self.written(stmt)))
            return
        raise ExpressionError("in_place", text=statement_text(stmt))

    def requires_grad_call(self, node: ast.Call, stmt: ast.Expr) -> None:
        owner = node.func.value if isinstance(node.func, ast.Attribute) else None
        if not isinstance(owner, ast.Name) or len(node.args) > 1 or node.keywords:
            raise ExpressionError(
                "requires_grad_not_leaf", name=ast.unparse(node), text=statement_text(stmt)
            )
        flag = truth(node.args[0], statement_text(stmt)) if node.args else True
        self.require_grad(owner.id, flag, statement_text(stmt))

    def manual_seed(self, node: ast.Call) -> None:
        if len(node.args) != 1 or node.keywords:
            raise ExpressionError("manual_seed", text=ast.unparse(node))
        arg = node.args[0]
        if not (isinstance(arg, ast.Constant) and type(arg.value) is int and arg.value >= 0):
            raise ExpressionError("manual_seed", text=ast.unparse(node))
        self.seed = arg.value

    def with_block(self, stmt: ast.With) -> None:
        if len(stmt.items) != 1 or stmt.items[0].optional_vars is not None:
            raise ExpressionError("with_not_allowed", text=statement_text(stmt).split("\n")[0])
        context = stmt.items[0].context_expr
        path = self.converter().path(context.func) if isinstance(context, ast.Call) else None
        block = GRAD_MODES.get(path or "")
        if block is None or context.args or context.keywords:  # type: ignore[union-attr]
            raise ExpressionError("with_not_allowed", text=statement_text(stmt).split("\n")[0])
        for inner in stmt.body:
            if not isinstance(inner, (ast.Assign, ast.AugAssign, ast.Expr, ast.Pass)):
                raise ExpressionError("with_not_allowed", text=statement_text(stmt).split("\n")[0])
            self.line(inner, last=False, no_grad=block)

    def constructor(self, node: ast.AST) -> bool:
        """Whether a right-hand side makes a new value (torch.tensor, torch.ones, ...)."""
        if not isinstance(node, ast.Call):
            return False
        path = self.converter().path(node.func)
        if path is None and isinstance(node.func, ast.Name):
            path = node.func.id
        return path is not None and path.split(".")[-1] in CONSTRUCTORS and path not in SPELLINGS

    # --- the whole -----------------------------------------------------------------------

    def build(self, module: ast.Module, lines: Iterable[Any] | None = None) -> Program:
        """The program of ``module``'s lines (``lines``: a cell's, unrolled as they come)."""
        body = module.body
        end = _place(body[-1]) if body else None
        try:
            for stmt in body if lines is None else lines:
                if isinstance(stmt, ast.stmt):
                    self.line(stmt, last=_place(stmt) == end)
                else:
                    self.flow(stmt)
        except Stop:
            pass
        for name in self.functions:
            if name not in self.registered:
                raise ExpressionError("function_not_hook", name=name)
        if self.root is None:
            self.root = self.output_root()
        if self.branched:  # values given for names only a path not taken reads
            read = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)}
            self.free += [n for n in sorted(self.given & read) if n not in self.free]
        if not any(isinstance(s, (Backward, Show)) for s in self.statements):
            self.name_last_bindings()
        cell = self.is_cell()
        if not cell and not any(isinstance(s, (Show, Reset)) for s in self.statements):
            self.check_used()
        leaves = tuple(self.leaves.values())
        free = [n for n in self.free if n not in self.leaves]
        variables = tuple(dict.fromkeys([*(v.name for v in leaves), *free]))
        root = self.root
        if isinstance(root, Name) and any(s.name == root.id for s in self.steps):
            output = root.id
        else:
            output = fresh_name("out", set(self.taken) | set(variables))
        return Program(
            self.text,
            root,
            variables,
            tuple(self.steps),
            output,
            leaves,
            tuple(self.statements),
            tuple(self.names.items()),
            self.seed,
            active_hooks(self.statements),
        )

    def output_root(self) -> Node:
        """Without a last bare expression: the last backward's target, else the last step."""
        targets = [s.target for s in self.statements if isinstance(s, Backward)]
        if targets:
            return targets[-1]
        if self.steps:
            return Name(self.steps[-1].name)
        if self.branched:  # the cell ends at a condition before computing anything
            return Num(0.0)
        raise ExpressionError("nothing_computed")

    def check_used(self) -> None:
        """In a program without backward() or print(...), every step feeds the output."""
        used = {n for step in self.steps for n in walk_names(step.node)}
        used |= set(walk_names(self.root)) if self.root is not None else set()
        for step in self.steps:
            if step.in_place is not None:  # it changes a tensor: not a value left unused
                continue
            if step.name not in used and not (
                isinstance(self.root, Name) and self.root.id == step.name
            ):
                raise ExpressionError("step_unused", name=self.names.get(step.name, step.name))


class _Current(Rebuild):
    """``_Builder.resolve``: each written name as the step or leaf it is bound to now."""

    def __init__(self, builder: _Builder) -> None:
        super().__init__()
        self.builder = builder

    def name(self, found: Name) -> Node:
        builder = self.builder
        if found.id in builder.leaves and found.id not in builder.current:
            return found  # a constructor lifted out of the expression
        base, dot, attr = found.id.partition(".")
        if base in builder.current:
            target = builder.current[base]
            if target == UNBOUND:
                raise ExpressionError("unbound_local", name=base)
            builder.used.add(target)
            return Name(f"{target}{dot}{attr}")
        if dot:
            raise ExpressionError("read_unknown", name=base, text=found.id)
        constant = found.id in CONSTANTS and found.id not in builder.given
        if not constant and found.id not in builder.free:
            builder.free.append(found.id)
        return found


def parse_program(text: str, limits: Limits, given: frozenset[str] = frozenset()) -> Program:
    """Parse an expression, a program of named steps, or a notebook cell. A cell (it calls
    backward() or print(...)) is PyTorch code and means what Python means: ``^`` is
    bitwise xor, ``np.f``/``math.f`` of a tensor do what NumPy and ``math`` do. In an
    expression ``^`` is power and ``np.``/``math.`` name the same functions as ``torch.``."""
    first = module_of(text, limits, caret_power=False)
    cell, idents = survey(first)
    same = cell or "^" not in text  # then the first parse is the one to build (read once)
    program = _build(text, limits, given, cell, (first, idents) if same else None)
    if program.is_cell != cell:
        program = _build(text, limits, given, program.is_cell)
    return program


def _build(
    text: str,
    limits: Limits,
    given: frozenset[str],
    cell: bool,
    parsed: tuple[ast.Module, set[str]] | None = None,
) -> Program:
    """The program of the text read as a cell or not (``parsed``: its tree, and its names,
    already read); a Branch where a cell stops at a tensor condition."""
    module = parsed[0] if parsed else module_of(text, limits, caret_power=not cell)
    idents = parsed[1] if parsed else survey(module)[1]
    builder = _Builder(text, limits, given, cell=cell, oracle=PATH_ORACLE.get(), idents=idents)
    if not cell:
        return builder.build(module)
    # Python's numbers, loops, ifs and functions around the tensors, read as they come
    builder.seed = seed_of(module)
    unroller = Unroller(
        limits.max_iterations,
        limits.max_lines,
        decide=builder.decide,
        text=text,
        settle=builder.settle,
    )
    program = builder.build(module, unroller.statements(module.body))
    devices = tuple(DeviceUse(d) for d in sorted(unroller.used_devices))
    return replace(program, statements=devices + program.statements)


def _place(stmt: ast.stmt) -> tuple[int, int]:
    return (stmt.lineno, stmt.col_offset)
