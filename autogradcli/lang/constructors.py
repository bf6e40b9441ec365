"""Constructors a value may be written with (``ones(2,2)``, ``torch.linspace(0, 1, 5)``,
``torch.tensor([1., 2.])``...), read from their ``ast`` without evaluating anything; the
seeded random source of ``rand``/``randn``."""

from __future__ import annotations

import ast
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.lang.literals import (
    as_array,
    check_elements,
    is_len,
    literal_shape,
    parse_text,
    short,
)
from autogradcli.memory import FLOAT64, LIST_PER_ELEMENT, Budget
from autogradcli.settings import Limits

CONSTRUCTORS = (
    "ones",
    "zeros",
    "full",
    "arange",
    "linspace",
    "reshape",
    "rand",
    "randn",
    "eye",
    "tensor",
)
# PyTorch's and NumPy's names for the constructors above.
SPELLED = {"as_tensor": "tensor", "array": "tensor", "asarray": "tensor"}
PREFIXES = ("torch.", "np.", "numpy.")
# dtype= as PyTorch and NumPy write it: the tool's dtype names, or "integer".
DTYPES = {
    "float32": "float32",
    "float": "float32",
    "float64": "float64",
    "double": "float64",
    "float16": "float16",
    "half": "float16",
    "bfloat16": "bfloat16",
    **dict.fromkeys(
        ("int", "int8", "int16", "int32", "int64", "long", "short", "uint8"), "integer"
    ),
}


@dataclass(frozen=True)
class Constructed:
    """A value a program defines, and what its constructor says of its dtype: ``dtype``
    as written (``float64``...), and whether PyTorch would make it an integer tensor."""

    array: np.ndarray
    dtype: str | None = None
    integer: bool = False


class RandomSource:
    """``torch.rand``/``torch.randn`` from one seeded generator, as after ``torch.manual_seed``."""

    def __init__(self, seed: int, dtype_name: str) -> None:
        self.seed = seed
        self.dtype_name = dtype_name
        self._generator: Any = None

    @property
    def used(self) -> bool:
        """Whether any random value was drawn (so the seed matters)."""
        return self._generator is not None

    def draw(self, kind: str, shape: tuple[int, ...], dtype: str | None = None) -> np.ndarray:
        """A draw in ``dtype`` (the constructor's ``dtype=``; the settings' without one):
        PyTorch's generator gives other numbers in another dtype."""
        import torch

        if self._generator is None:
            self._generator = torch.Generator().manual_seed(self.seed)
        sample = getattr(torch, kind)(
            shape, generator=self._generator, dtype=getattr(torch, dtype or self.dtype_name)
        )
        return sample.to(torch.float64).numpy()


class Reader:
    """Walks the ``ast`` of a value: numbers, lists and the constructors, nothing else
    (PyTorch's spellings included: ``torch.tensor([1., 2.])``, ``torch.ones((2, 2))``,
    ``torch.eye(4, 5)``, ``torch.arange(4.0)``, ``len(y)`` of a value of the program)."""

    def __init__(
        self,
        limits: Limits,
        random: RandomSource | None,
        shapes: Mapping[str, tuple[int, ...]] | None = None,
        budget: Budget | None = None,
    ) -> None:
        self.limits = limits
        self.random = random
        self.budget = Budget(limits.memory) if budget is None else budget
        self.shapes = shapes or {}
        # the dtype PyTorch computes a constructor in without dtype=: the run's
        self.default = "float64" if random is None else random.dtype_name
        self.dtype: str | None = None
        self.integral = False
        self.sized = False  # a shape written as a tuple: () is a single number

    def value(self, node: ast.AST) -> np.ndarray:
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.List, ast.Tuple)):
            check_elements(literal_shape(node), self.limits, self.budget, LIST_PER_ELEMENT)
            return as_array(self.nested(node, 0), self.limits)
        return np.asarray(self.number(node), dtype=np.float64)

    def number(self, node: ast.AST) -> float:
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            inner = self.number(node.operand)
            return -inner if isinstance(node.op, ast.USub) else inner
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, (int, float))
            and not isinstance(node.value, bool)
        ):
            try:
                return float(node.value)
            except OverflowError:
                raise LimitError("number_too_large", value=str(node.value)) from None
        if isinstance(node, ast.Name) and node.id in ("inf", "nan"):
            return float(node.id)
        if is_len(node):
            return float(self.length(node))  # type: ignore[arg-type]
        raise ValueSpecError("not_a_number", text=short(ast.unparse(node)))

    def length(self, node: ast.Call) -> int:
        """``len(y)``: the first size of a value or step the program has before this line."""
        name = node.args[0].id  # type: ignore[attr-defined]
        if name not in self.shapes:
            raise ValueSpecError("len_unknown", name=name)
        shape = self.shapes[name]
        if not shape:
            raise ValueSpecError("len_of_number", name=name)
        return shape[0]

    def nested(self, node: ast.AST, depth: int) -> Any:
        if depth > 32:
            raise LimitError("list_too_deep", limit=32)
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.nested(item, depth + 1) for item in node.elts]
        return self.number(node)

    def integer(self, node: ast.AST, what: str) -> int:
        number = self.number(node)
        if not number.is_integer():
            raise ValueSpecError("not_whole", what=what, number=number)
        return int(number)

    def shape(self, nodes: list[ast.expr], name: str) -> tuple[int, ...]:
        if not nodes and not self.sized:
            raise ValueSpecError("shape_needed", name=name)
        shape = tuple(self.integer(n, f"a size in {name}()") for n in nodes)
        if any(size < 0 for size in shape):
            raise ValueSpecError("negative_size", name=name, shape=list(shape))
        check_elements(shape, self.limits, self.budget, peak=2 * FLOAT64)
        if any(size > self.limits.max_elements for size in shape):  # zeros(0, 10**19)
            raise LimitError("size_too_large", name=name, limit=self.limits.max_elements)
        return shape

    def call(self, node: ast.Call) -> np.ndarray:
        name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
        for prefix in PREFIXES:
            name = name.removeprefix(prefix)
        name = SPELLED.get(name, name)
        if name not in CONSTRUCTORS:
            raise ValueSpecError("unknown_constructor", name=short(name))
        args, keywords = self.keywords(node, name)
        builders: dict[str, Callable[[list[ast.expr]], np.ndarray]] = {
            "ones": lambda a: np.ones(self.shape(a, name)),
            "zeros": lambda a: np.zeros(self.shape(a, name)),
            "full": self.full,
            "arange": self.arange,
            "linspace": self.linspace,
            "reshape": self.reshape,
            "rand": self.random_draw("rand"),
            "randn": self.random_draw("randn"),
            "eye": self.eye,
            "tensor": self.tensor,
        }
        return builders[name]([*args, *keywords])

    def keywords(self, node: ast.Call, name: str) -> tuple[list[ast.expr], list[ast.expr]]:
        """Positional arguments, and the keywords PyTorch takes as positions (size=,
        fill_value=, m=, steps=...); dtype= is noted, requires_grad= is the program's."""
        args = list(node.args)
        if len(args) == 1 and isinstance(args[0], (ast.Tuple, ast.List)) and name in _SIZED:
            args = list(args[0].elts)  # ones((2, 2)) as ones(2, 2)
            self.sized = True
        tail: list[ast.expr] = []
        for keyword in node.keywords:
            key = keyword.arg
            if key == "dtype":
                self.note_dtype(keyword.value)
            elif key == "requires_grad":
                self.requires_grad = keyword.value
            elif key == "device":
                continue
            elif key == "size" and name in _SIZED:
                value = keyword.value
                args = list(value.elts) if isinstance(value, (ast.Tuple, ast.List)) else [value]
                self.sized = True
            elif key in _POSITIONS.get(name, ()):
                tail.append(keyword.value)
            else:
                known = (*(("size",) if name in _SIZED else ()), *_POSITIONS.get(name, ()))
                known += ("dtype", "requires_grad")
                raise ValueSpecError(
                    "constructor_keyword",
                    name=name,
                    keyword=str(key),
                    known=", ".join(f"{k}=" for k in known),
                )
        return args, tail

    def note_dtype(self, node: ast.expr) -> None:
        text = ast.unparse(node)
        for prefix in ("torch.", "np.", "numpy."):
            text = text.removeprefix(prefix)
        text = text.strip("'\"")
        if text not in DTYPES:
            raise ValueSpecError("constructor_dtype", dtype=ast.unparse(node))
        self.dtype = DTYPES[text]

    def tensor(self, args: list[ast.expr]) -> np.ndarray:
        """``torch.tensor(data)``: PyTorch makes it an integer tensor when every number is
        written as an integer."""
        if len(args) != 1:
            raise ValueSpecError("tensor_arguments")
        if not any(
            isinstance(n, ast.Constant) and isinstance(n.value, float) for n in ast.walk(args[0])
        ):
            self.integral = True
        return self.value(args[0])

    def eye(self, args: list[ast.expr]) -> np.ndarray:
        if not 1 <= len(args) <= 2:
            raise ValueSpecError("eye_arguments")
        shape = self.shape(args if len(args) == 2 else [args[0], args[0]], "eye")
        return np.eye(*shape)

    def full(self, args: list[ast.expr]) -> np.ndarray:
        if len(args) == 2 and isinstance(args[0], (ast.Tuple, ast.List)):
            args = [*args[0].elts, args[1]]  # full((2, 3), 0.5)
        if len(args) < 2:
            raise ValueSpecError("full_arguments")
        fill = args[-1]
        if isinstance(fill, ast.Constant) and type(fill.value) is int:
            self.integral = True
        return np.full(self.shape(args[:-1], "full"), self.number(fill))

    def arange(self, args: list[ast.expr]) -> np.ndarray:
        if not 1 <= len(args) <= 3:
            raise ValueSpecError("arange_arguments")
        if all(isinstance(a, ast.Constant) and type(a.value) is int for a in args):
            self.integral = True  # torch.arange(4) is int64; torch.arange(4.0) is float
        numbers = [self.number(a) for a in args]
        start, end, step = (0.0, numbers[0], 1.0) if len(numbers) == 1 else (*numbers[:2], 1.0)
        if len(numbers) == 3:
            step = numbers[2]
        if step == 0 or not all(map(math.isfinite, (start, end, step))):
            raise ValueSpecError("arange_step")
        count = (end - start) / step
        if not math.isfinite(count):
            raise LimitError("arange_too_many")
        check_elements((max(math.ceil(count), 0),), self.limits, self.budget, 2 * FLOAT64)
        whole = self.integral or self.dtype == "integer"
        bounds = [int(n) if whole and n.is_integer() else n for n in (start, end, step)]
        return self.computed("arange", *bounds)

    def linspace(self, args: list[ast.expr]) -> np.ndarray:
        if len(args) != 3:
            raise ValueSpecError("linspace_arguments")
        start, end = self.number(args[0]), self.number(args[1])
        steps = self.integer(args[2], "steps in linspace()")
        if steps < 0:
            raise ValueSpecError("linspace_negative")
        check_elements((steps,), self.limits, self.budget, 2 * FLOAT64)
        return self.computed("linspace", start, end, steps)

    def computed(self, name: str, *args: float) -> np.ndarray:
        """``torch.linspace``/``torch.arange`` as PyTorch computes them, in the dtype it
        computes them in (``dtype=``, else an integer one for integer ``arange``
        arguments, else the run's): not float64 values rounded afterwards, which differ
        in the last place. The arguments are numbers read from the text."""
        import torch

        if self.dtype == "integer" or (self.dtype is None and self.integral):
            dtype = torch.int64
        else:
            dtype = getattr(torch, self.dtype or self.default)
        try:
            made = getattr(torch, name)(*args, dtype=dtype)
        except RuntimeError as exc:
            raise ValueSpecError("constructor_refused", name=name, detail=str(exc)) from None
        return made.to(torch.float64).numpy()

    def reshape(self, args: list[ast.expr]) -> np.ndarray:
        if len(args) < 2:
            raise ValueSpecError("reshape_arguments")
        data = self.value(args[0])
        shape = tuple(self.integer(a, "a size in reshape()") for a in args[1:])
        try:
            return data.reshape(shape)
        except ValueError:
            raise ValueSpecError("reshape_size", size=data.size, shape=list(shape)) from None

    def random_draw(self, kind: str) -> Callable[[list[ast.expr]], np.ndarray]:
        def draw(args: list[ast.expr]) -> np.ndarray:
            shape = self.shape(args, kind)
            if self.random is None:
                raise ValueSpecError("random_unavailable", kind=kind)
            dtype = self.dtype if self.dtype not in (None, "integer") else None
            return self.random.draw(kind, shape, dtype)

        return draw


_SIZED = ("ones", "zeros", "rand", "randn")
_POSITIONS = {
    "full": ("fill_value",),
    "eye": ("m",),
    "linspace": ("steps",),
    "arange": ("end", "step"),
}


def read_constructor(
    source: str,
    limits: Limits,
    random: RandomSource | None,
    shapes: Mapping[str, tuple[int, ...]],
    budget: Budget | None = None,
) -> Constructed:
    """A value a program defines, from its constructor's text (never evaluated); its
    bytes are counted in ``budget`` as for ``read_value``."""
    budget = Budget(limits.memory) if budget is None else budget
    tree = parse_text(source, limits, budget, "a value of the program")
    reader = Reader(limits, random, shapes, budget)
    array = reader.value(tree.body)
    integer = reader.integral if reader.dtype is None else reader.dtype == "integer"
    dtype = None if reader.dtype in (None, "integer") else reader.dtype
    return Constructed(array, dtype, integer)
