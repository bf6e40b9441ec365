"""Python expressions (``ast``) to the tree, by walking Python's ``ast`` with a whitelist.

Nothing here evaluates user text: ``ast.parse`` only builds a syntax tree, and each node
kind is either turned into the tree's own (numbers, names, operators, comparisons,
subscripts, calls of the vocabulary as PyTorch spells them) or refused with a line that
says what to write instead. ``^`` means power. Constant arithmetic (``2**3``) is checked
for size before anything computes it. Statements (a notebook cell) are in ``program.py``.
"""

from __future__ import annotations

import ast
import difflib
import re
import unicodedata
from collections.abc import Callable
from typing import Any

from autogradcli.errors import ExpressionError, LimitError
from autogradcli.lang.arguments import (
    built,
    example_call,
    given_params,
    integer,
    integers,
    is_int,
    keyword_name,
    modern_tensor,
    param_value,
    tensor_item,
)
from autogradcli.lang.casts import casts_in_constructors
from autogradcli.lang.lookalikes import lookalike
from autogradcli.lang.ops import REQUIRED, Op
from autogradcli.lang.picks import TENSOR
from autogradcli.lang.tree import (
    COMPARISONS,
    Binary,
    Call,
    Index,
    IndexItem,
    Name,
    Node,
    Num,
    Slice,
    Unary,
)
from autogradcli.lang.vocabulary import BARE, CONSTANTS, OPS, SPELLINGS, function_names
from autogradcli.settings import Limits

BINARY_OPS: dict[type, str] = {
    ast.Add: "+",
    ast.Sub: "-",
    ast.Mult: "*",
    ast.Div: "/",
    ast.Pow: "**",
    ast.MatMult: "@",
}
# Operators whose chains (``a + b - c``, ``a * b / c``) count as one level of nesting.
_CHAINS: dict[type, str] = {ast.Add: "+", ast.Sub: "+", ast.Mult: "*", ast.Div: "*"}
UNARY_OPS: dict[type, str] = {ast.USub: "-", ast.UAdd: "+"}
COMPARE_OPS: dict[type, str] = {
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
    ast.Eq: "==",
    ast.NotEq: "!=",
}
assert set(COMPARE_OPS.values()) == set(COMPARISONS)

# Integer constants are kept below the float range so every side can represent them.
MAX_INT_BITS = 1024

# The namespaces code may call into, by the names a cell gives them (``import`` adds more).
NAMESPACES: dict[str, str] = {
    "torch": "torch",
    "F": "F",
    "nn": "nn",
    "np": "np",
    "numpy": "np",
    "math": "math",
}
# Constructors of values (lifted into inputs of the program, see program.py).
CONSTRUCTORS = frozenset(
    {
        "tensor",
        "as_tensor",
        "array",
        "ones",
        "zeros",
        "full",
        "eye",
        "arange",
        "linspace",
        "rand",
        "randn",
        "reshape",
    }
)
# Attributes a print(...) may read; they are not part of the computation.
READABLE = ("grad", "requires_grad", "is_leaf", "grad_fn", "shape", "_version")
# Tensor methods that are not maths, and what to write instead.
OUTSIDE: dict[str, str] = {
    "cuda": "choose the device with --device cuda (device= in the API)",
    "cpu": "choose the device with --device cpu (device= in the API)",
    "to": "choose the device and dtype with --device and --dtype (device=, dtype= in the API)",
    "float": "choose the dtype with --dtype float32 (dtype= in the API)",
    "double": "choose the dtype with --dtype float64 (dtype= in the API)",
    "half": "choose the dtype with --dtype float16 (dtype= in the API)",
    "size": "print(x.shape) shows the shape",
    "numel": "print(x.shape) shows the shape",
    "dim": "print(x.shape) shows the shape",
    "item": "print(x) shows the value",
    "tolist": "print(x) shows the value",
    "numpy": "print(x) shows the value",
    "register_hook": "hooks are not supported yet; --explain shows each gradient on its way",
}
# Names people reach for, and what this language calls them.
SYNONYMS: dict[str, str] = {
    "ln": "log",
    "arcsin": "asin",
    "arccos": "acos",
    "arctan": "atan",
    "absolute": "abs",
    "fabs": "abs",
    "exponential": "exp",
    "logistic": "sigmoid",
    "expit": "sigmoid",
    "swish": "silu",
    "concat": "cat",
    "concatenate": "cat",
    "power": "pow",
    "transpose2d": "T",
    "clip": "clamp",
    "softmax2d": "softmax",
    "sqr": "square",
    "relu6": "hardtanh",
    "ce": "cross_entropy",
    "bce": "binary_cross_entropy",
    "mse": "mse_loss",
}

_REFUSED: dict[type, str] = {
    ast.Lambda: "lambda",
    ast.ListComp: "comprehensions",
    ast.SetComp: "comprehensions",
    ast.DictComp: "comprehensions",
    ast.GeneratorExp: "comprehensions",
    ast.BoolOp: "'and'/'or'",
    ast.IfExp: "conditional expressions",
    ast.List: "lists",
    ast.Tuple: "tuples",
    ast.Dict: "dicts",
    ast.Set: "sets",
    ast.JoinedStr: "f-strings",
    ast.NamedExpr: "assignments",
    ast.Starred: "starred arguments",
    ast.Await: "await",
    ast.Yield: "yield",
    ast.YieldFrom: "yield",
    ast.Slice: "slices",
}


def allowed() -> str:
    """What an expression may contain, for error messages."""
    return (
        "numbers, variables, + - * / ** (or ^) @, comparisons, x[i], parentheses and the "
        "functions (autograd-cli grad --help lists them)"
    )


def nearest(name: str, known: list[str]) -> str | None:
    """The known name closest to ``name`` (a synonym first), or None."""
    if name in SYNONYMS and SYNONYMS[name] in known:
        return SYNONYMS[name]
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
    return close[0] if close else None


def module_of(text: str, limits: Limits, caret_power: bool = True) -> ast.Module:
    """Python's syntax tree of the text, after the checks that come before parsing.
    ``caret_power``: ``^`` is read as ``**`` (an expression); False for a cell, where it
    is Python's bitwise xor."""
    if len(text) > limits.max_length:
        raise LimitError("expression_too_long", length=len(text), limit=limits.max_length)
    if not text.strip():
        raise ExpressionError("expression_empty")
    for word in re.findall(r"[^\W\d]\w*", text):
        plain = unicodedata.normalize("NFKC", word)
        if plain != word:  # Python would silently read it as another name
            raise ExpressionError("name_normalized", word=word, plain=plain)
    if _bracket_depth(text) > limits.max_depth:
        raise LimitError("too_deep", limit=limits.max_depth)
    source = _source(text.replace("^", "**") if caret_power else text)
    try:
        module = ast.parse(source, mode="exec")
    except SyntaxError as exc:
        where = f" at column {exc.offset}" if exc.offset else ""
        if exc.lineno and exc.lineno > 1:
            where = f" at line {exc.lineno}, column {exc.offset}"
        similar = lookalike(text)
        if similar is not None:
            raise ExpressionError("syntax_lookalike", where=where, **similar) from None
        product = IMPLICIT_PRODUCT.search(text)
        if product is not None and "decimal literal" in str(exc.msg):
            after = re.match(r"[^\W\d]\w*|\(", text[product.end() :])
            written = product.group(0) + (after.group(0) if after else "")
            fixed = IMPLICIT_PRODUCT.sub(r"\1*", text)
            raise ExpressionError(
                "syntax_product", where=where, written=written, fixed=fixed
            ) from None
        raise ExpressionError("syntax", where=where, detail=exc.msg) from None
    except (RecursionError, MemoryError):
        raise LimitError("nested_for_parser") from None
    except ValueError as exc:
        raise ExpressionError("unparsable", detail=str(exc)) from None
    if not module.body:
        raise ExpressionError("expression_empty")
    return casts_in_constructors(module, CONSTRUCTORS - {"reshape"}, text)


_STRINGS = re.compile(r"'(?:[^'\\\n]|\\.)*'" + r'|"(?:[^"\\\n]|\\.)*"')


# A number written against a name or a bracket, as on paper: 2x, 3(x + 1), 0.5sin(x).
IMPLICIT_PRODUCT = re.compile(r"(?<![\w.])(\d+(?:\.\d*)?)(?=[^\W\d]|\()(?![eE][+-]?\d)(?!j\b)")


def _bracket_depth(text: str) -> int:
    """How deep the brackets of the text nest, as written (quoted text left out): each
    pair of parentheses is a level the user wrote, counted before Python's parser (which
    gives up at 200 with a message about its own limit)."""
    depth = deepest = 0
    for char in _STRINGS.sub("", text):
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    return deepest


def _source(text: str) -> str:
    """The text as Python reads it: a program's lines lose the common indentation (lines
    of a ``with`` block keep theirs)."""
    lines = text.strip("\n").splitlines()
    if len(lines) == 1 or not any(line.rstrip().endswith(":") for line in lines):
        return "\n".join(line.strip() for line in lines)
    import textwrap

    return textwrap.dedent("\n".join(lines)).strip()


class Converter:
    """Python expressions (``ast``) to the tree, through the vocabulary's spellings.

    ``lift(call, text)`` turns a constructor (``torch.tensor([1., 2.])``) into a name of a
    value the program defines; without it constructors are refused. ``readable`` allows
    ``x.grad`` and the other attributes of ``READABLE`` (in print(...))."""

    def __init__(
        self,
        limits: Limits,
        namespaces: dict[str, str] | None = None,
        lift: Callable[[ast.Call], Name] | None = None,
        readable: bool = False,
    ) -> None:
        self.limits = limits
        self.namespaces = dict(NAMESPACES if namespaces is None else namespaces)
        self.lift = lift
        self.readable = readable

    def __call__(self, node: ast.AST, depth: int = 0) -> Node:
        return self.convert(node, depth)

    def convert(self, node: ast.AST, depth: int = 0) -> Node:
        if depth > self.limits.max_depth:
            raise LimitError("too_deep", limit=self.limits.max_depth)
        if isinstance(node, ast.Constant):
            return _constant(node.value)
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.UnaryOp) and type(node.op) in UNARY_OPS:
            return Unary(UNARY_OPS[type(node.op)], self.convert(node.operand, depth + 1))
        if isinstance(node, ast.BinOp) and type(node.op) in BINARY_OPS:
            return self.chain(node, depth)
        if isinstance(node, ast.Compare):
            return self.compare(node, depth)
        if isinstance(node, ast.Call):
            return self.call(node, depth)
        if isinstance(node, ast.Attribute):
            return self.attribute(node, depth)
        if isinstance(node, ast.Subscript):
            return self.subscript(node, depth)
        if isinstance(node, (ast.BinOp, ast.UnaryOp)):
            symbol = ast.unparse(node).strip()
            raise ExpressionError("operator_not_allowed", symbol=symbol, allowed=allowed())
        what = _REFUSED.get(type(node), type(node).__name__)
        raise ExpressionError("syntax_not_allowed", what=what, allowed=allowed())

    def chain(self, node: ast.BinOp, depth: int) -> Node:
        """A binary operation; a chain of ``+``/``-`` or of ``*``/``/`` as written
        (``a + b - c + ...``) is one level of nesting, read along its left side without
        recursion, so a long sum is no deeper than one term."""
        group = _CHAINS.get(type(node.op))
        spine = [node]
        while group is not None:
            left = spine[-1].left
            if not (isinstance(left, ast.BinOp) and _CHAINS.get(type(left.op)) == group):
                break
            spine.append(left)
        result = self.convert(spine[-1].left, depth + 1)
        for link in reversed(spine):
            right = self.convert(link.right, depth + 1)
            result = Binary(BINARY_OPS[type(link.op)], result, right)
        return result

    # --- names, attributes, subscripts, comparisons ---------------------------------------

    def name(self, node: ast.Name) -> Node:
        if node.id in self.namespaces:
            raise ExpressionError("namespace_alone", name=node.id)
        return Name(node.id)

    def path(self, node: ast.AST) -> str | None:
        """``torch.nn.functional.relu`` as ``F.relu``, ``numpy.sin`` as ``np.sin``: the
        spelling of a name in a known namespace, or None (a variable's attribute)."""
        parts: list[str] = []
        while isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        if not isinstance(node, ast.Name) or node.id not in self.namespaces:
            return None
        text = ".".join([self.namespaces[node.id], *reversed(parts)])
        for long, short in (("torch.nn.functional.", "F."), ("nn.functional.", "F.")):
            if text.startswith(long):
                text = short + text[len(long) :]
        return text

    def attribute(self, node: ast.Attribute, depth: int) -> Node:
        spelled = self.path(node)
        if spelled is not None:
            parts = spelled.split(".")
            if parts[-1] in CONSTANTS and parts[0] in ("math", "np", "torch"):
                return Name(parts[-1])
            raise ExpressionError("namespace_value", text=spelled)
        if node.attr in ("T", "mT", "mH"):  # a real tensor's .mH is .mT: TransposeBackward0
            swap = () if node.attr == "T" else (("dim0", -2), ("dim1", -1))
            return Call("transpose" if swap else "T", (self.convert(node.value, depth + 1),), swap)
        if node.attr == "H":  # PyTorch takes .H on 2-D only, a shape this line cannot tell
            raise ExpressionError("unknown_spelling", what="'.H' (2-D only)", hint=_hint(".mH"))
        if node.attr == "data":
            return Call("detach", (self.convert(node.value, depth + 1),))
        if node.attr in ("values", "indices"):
            return self.pair(node.value, node.attr == "values", depth, f".{node.attr}")
        if node.attr in READABLE:
            if self.readable and isinstance(node.value, ast.Name):
                return Name(f"{node.value.id}.{node.attr}")
            raise ExpressionError("readable_only", text=ast.unparse(node), attr=node.attr)
        if node.attr.startswith(("_saved_", "_raw_saved_")):
            raise ExpressionError("saved_attribute", text=ast.unparse(node), attr=node.attr)
        if node.attr in ("next_functions", "metadata"):
            raise ExpressionError("node_attribute", text=ast.unparse(node))
        if node.attr in ("backward", "zero_", "requires_grad_"):
            raise ExpressionError("statement_method", text=ast.unparse(node))
        raise ExpressionError("attribute_not_allowed", text=ast.unparse(node), attr=node.attr)

    def pair(self, node: ast.AST, values: bool, depth: int, how: str) -> Node:
        """``torch.max(x, 1).values`` / ``[0]``: the values of a (values, indices) pair."""
        found = self.call(node, depth + 1, pair=True) if isinstance(node, ast.Call) else None
        if found is None or not _is_pair(found):
            raise ExpressionError("not_a_pair", text=ast.unparse(node) + how)
        if not values:
            raise ExpressionError("indices_not_differentiable", text=ast.unparse(node) + how)
        return found

    def subscript(self, node: ast.Subscript, depth: int) -> Node:
        picked = node.slice.value if isinstance(node.slice, ast.Constant) else None
        if isinstance(node.value, ast.Call) and picked in (0, 1) and self._pair_call(node.value):
            return self.pair(node.value, picked == 0, depth, f"[{picked}]")
        value = self.convert(node.value, depth + 1)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if any(tensor_item(i) for i in items):  # x[torch.arange(4), ys]: integer tensors
            tensors = [self.convert(i, depth + 1) for i in items if tensor_item(i)]
            pattern = tuple(TENSOR if tensor_item(i) else self.item(i) for i in items)
            return Call("take", (value, *tensors), (("pattern", pattern),))
        return Index(value, tuple(self.item(i) for i in items))

    def _pair_call(self, node: ast.Call) -> bool:
        try:
            return _is_pair(self.call(node, 1, pair=True))
        except ExpressionError:
            return False

    def item(self, node: ast.AST) -> IndexItem:
        if isinstance(node, ast.Slice):
            parts = [
                None if p is None else integer(p, "a slice")
                for p in (node.lower, node.upper, node.step)
            ]
            if parts[2] is not None and parts[2] <= 0:
                raise ExpressionError("slice_step", step=parts[2])
            return Slice(*parts)
        if isinstance(node, ast.Constant) and node.value is Ellipsis:
            return Ellipsis
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.List):
            return tuple(integer(e, "an index") for e in node.elts)
        return integer(node, "an index")

    def compare(self, node: ast.Compare, depth: int) -> Node:
        if len(node.ops) != 1 or type(node.ops[0]) not in COMPARE_OPS:
            raise ExpressionError("chained_comparison", text=ast.unparse(node))
        return Binary(
            COMPARE_OPS[type(node.ops[0])],
            self.convert(node.left, depth + 1),
            self.convert(node.comparators[0], depth + 1),
        )

    # --- calls ---------------------------------------------------------------------------

    def call(self, node: ast.Call, depth: int, pair: bool = False) -> Node:
        receiver: ast.AST | None = None
        spelled = self.path(node.func)
        if spelled is None and isinstance(node.func, ast.Attribute):
            receiver, spelled = node.func.value, f"Tensor.{node.func.attr}"
        elif spelled is None and isinstance(node.func, ast.Name):
            spelled = node.func.id
        elif spelled is None:
            raise ExpressionError("call_not_plain", text=ast.unparse(node.func))
        short = spelled.split(".")[-1]
        if spelled == "torch.Tensor" and receiver is None and self.lift is not None:
            return self.lift(modern_tensor(node))  # PyTorch's legacy constructor
        if receiver is None and short in CONSTRUCTORS and spelled not in SPELLINGS:
            if self.lift is None:
                raise ExpressionError("constructor_here", text=ast.unparse(node))
            return self.lift(node)
        op = SPELLINGS.get(spelled)
        if op is None:
            raise self.unknown(spelled, node)
        args = [receiver, *node.args] if receiver is not None else list(node.args)
        if any(isinstance(a, ast.Starred) for a in args) or any(
            k.arg is None for k in node.keywords
        ):
            raise ExpressionError("starred_call", name=op.name)
        if op.name in ("max", "min"):
            return self.extreme(op, spelled, args, node, depth, pair)
        return self.bind(op, args, {k.arg: k.value for k in node.keywords if k.arg}, depth, node)

    def extreme(
        self, op: Op, spelled: str, args: list[Any], node: ast.Call, depth: int, pair: bool
    ) -> Node:
        """max/min: of all elements, along a dim, or of two tensors (PyTorch's maximum)."""
        keywords = {k.arg: k.value for k in node.keywords if k.arg}
        second = args[1] if len(args) > 1 else keywords.get("other")
        if second is not None and not is_int(second) and "dim" not in keywords:
            if spelled == op.name:  # Python's max(x, y) of two tensors
                raise ExpressionError("max_of_two", name=op.name)
            pick = OPS["maximum" if op.name == "max" else "minimum"]
            return self.bind(pick, args, keywords, depth, node)
        found = self.bind(op, args, keywords, depth, node)
        dim_given = isinstance(found, Call) and found.dim is not None
        if dim_given and spelled != op.name and not pair:  # torch.max(x, 1): (values, indices)
            raise ExpressionError("pair_result", text=ast.unparse(node), name=op.name)
        return found

    def unknown(self, spelled: str, node: ast.Call) -> ExpressionError:
        short = spelled.split(".")[-1]
        if "." not in spelled:
            if short == "len":
                return ExpressionError("len_here")
            guess = nearest(short, sorted(BARE))
            return ExpressionError("unknown_function", name=short, hint=_hint(guess))
        prefix = spelled.rsplit(".", 1)[0]
        what = f".{short}()" if prefix == "Tensor" else spelled
        if prefix == "Tensor" and short in OUTSIDE:
            return ExpressionError("outside_maths", what=what, instead=OUTSIDE[short])
        same = sorted(k.split(".")[-1] for k in SPELLINGS if k.startswith(prefix + "."))
        if short.endswith("_") and short[:-1] in same:
            return ExpressionError("in_place", text=ast.unparse(node))
        guess = nearest(short, same)
        if guess is not None:
            guess = f"{prefix}.{guess}"
        elif short in BARE:
            guess = short
        return ExpressionError("unknown_spelling", what=what, hint=_hint(guess))

    def bind(
        self, op: Op, args: list[ast.AST], keywords: dict[str, ast.AST], depth: int, node: ast.Call
    ) -> Node:
        """The call's arguments matched to the entry's tensors and parameters, as PyTorch
        matches them (positions first, then names)."""
        example = example_call(op)
        keywords = {keyword_name(op, k): v for k, v in keywords.items()}
        tensors: dict[str, ast.AST] = {}
        positional = list(args)
        if op.order and len(positional) > 1:  # gather(x, dim, index): by PyTorch's order
            for name, given_arg in zip(op.order, positional, strict=False):
                if name in keywords:
                    raise ExpressionError("given_twice_arg", name=op.name, arg=name)
                keywords[name] = given_arg
            positional = positional[len(op.order) :]
        if op.sequence:
            if not positional or not isinstance(positional[0], (ast.List, ast.Tuple)):
                if op.tensors[0] not in keywords:
                    raise ExpressionError("sequence_needed", name=op.name, example=example)
                positional.insert(0, keywords.pop(op.tensors[0]))
            items = positional.pop(0)
            if not isinstance(items, (ast.List, ast.Tuple)) or not items.elts:
                raise ExpressionError("sequence_needed", name=op.name, example=example)
            nodes = [self.convert(e, depth + 1) for e in items.elts]
        else:
            for name in op.tensors:
                if positional:
                    tensors[name] = positional.pop(0)
            for name in op.tensors:
                if name in keywords:
                    if name in tensors:
                        raise ExpressionError("given_twice_arg", name=op.name, arg=name)
                    tensors[name] = keywords.pop(name)
            nodes = []
            for name in op.tensors:
                given = tensors.get(name)
                if given is None or (isinstance(given, ast.Constant) and given.value is None):
                    if name not in op.optional:
                        raise ExpressionError(
                            "argument_missing", name=op.name, arg=name, example=example
                        )
                    nodes.append(None)
                else:
                    nodes.append(self.convert(given, depth + 1))
        params = self.params(op, positional, keywords, example)
        if op.build is not None:
            return built(op, nodes, params)
        if op.sequence:
            return Call(op.name, tuple(n for n in nodes if n is not None), given_params(op, params))
        present = tuple(n for n in nodes if n is not None)
        given: tuple[tuple[str, Any], ...] = ()
        if op.optional:  # which of the optional tensors are there (clamp(x, max=1))
            names = tuple(t for t, n in zip(op.tensors, nodes, strict=True) if n is not None)
            given = (("given", names),)
        return Call(op.name, present, given_params(op, params) + given)

    def params(
        self, op: Op, positional: list[ast.AST], keywords: dict[str, ast.AST], example: str
    ) -> dict[str, Any]:
        values: dict[str, Any] = {}
        if op.varargs and positional:
            if len(positional) == 1 and isinstance(positional[0], (ast.Tuple, ast.List)):
                values[op.varargs] = integers(positional[0], op.varargs)
            else:
                values[op.varargs] = tuple(integer(p, op.varargs) for p in positional)
            positional = []
        for param in op.params:
            if positional and param.name not in values:
                values[param.name] = param_value(param, positional.pop(0), op)
        if positional:
            raise ExpressionError("too_many_arguments", name=op.name, example=example)
        for key, node in keywords.items():
            param = op.param(key)
            if param is None:
                known = ", ".join([*op.tensors, *(p.name for p in op.params)])
                raise ExpressionError("unknown_keyword", name=op.name, keyword=key, known=known)
            if key in values:
                raise ExpressionError("given_twice_arg", name=op.name, arg=key)
            values[key] = param_value(param, node, op)
        for param in op.params:
            if param.name not in values and param.default is REQUIRED:
                raise ExpressionError(
                    "argument_missing", name=op.name, arg=param.name, example=example
                )
        return values


def _is_pair(node: Node) -> bool:
    return isinstance(node, Call) and node.func in ("max", "min") and node.dim is not None


def _hint(guess: str | None) -> str:
    return f"; did you mean {guess}?" if guess else ""


def _constant(value: object) -> Num:
    if isinstance(value, bool) or value is None or value is Ellipsis:
        raise ExpressionError("constant_not_allowed", value=str(value), allowed=allowed())
    if isinstance(value, complex):
        raise ExpressionError("complex_number")
    if isinstance(value, (str, bytes)):
        raise ExpressionError("string_not_allowed", allowed=allowed())
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise LimitError("integer_too_large", digits=len(str(value)))
    if not isinstance(value, (int, float)):
        raise ExpressionError("constant_kind", value=repr(value))
    return Num(value)


__all__ = ["Converter", "allowed", "function_names", "module_of", "nearest"]
