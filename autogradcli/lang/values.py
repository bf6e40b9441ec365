"""Read variable values: numbers, nested lists, constructors such as ``ones(2,2)``, and files.

Value text is parsed with the same whitelist approach as expressions (``ast`` walk, no
evaluation). Element counts are checked before anything is allocated. Files load with
``allow_pickle=False`` (NumPy) and ``weights_only=True`` (PyTorch).
"""

from __future__ import annotations

import ast
import io
import json
import math
import os
import re
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.memory import FLOAT64, LIST_PER_ELEMENT, Budget, array_cost, parse_cost
from autogradcli.reads import open_regular, read_open
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


FILE_TYPES = (".npy", ".pt", ".csv", ".json")


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


def read_value(
    spec: Any,
    limits: Limits,
    random: RandomSource | None = None,
    budget: Budget | None = None,
) -> np.ndarray:
    """A float64 array from value text (or, for the Python API, a number, list or array);
    its bytes are counted in ``budget`` (the run's; else one of ``limits.memory`` for this
    value) before they are allocated."""
    budget = Budget(limits.memory) if budget is None else budget
    if isinstance(spec, str):
        text = spec.strip()
        if not text:
            raise ValueSpecError("value_empty")
        if len(text) > limits.max_length * 100:
            raise LimitError("value_too_long", length=len(text))
        if text.startswith("@"):
            return read_file(text[1:], limits, budget)
        tree = parse_text(text, limits, budget, "the value")
        reader = _Reader(limits, random, budget=budget)
        array = reader.value(tree.body)
        if reader.dtype not in (None, "integer"):  # the settings' dtype runs everything
            raise ValueSpecError("value_dtype", dtype=reader.dtype)
        flag = getattr(reader, "requires_grad", None)
        if isinstance(flag, ast.Constant) and flag.value is False:
            raise ValueSpecError("value_requires_grad")
        return array
    if hasattr(spec, "detach"):  # a torch tensor given through the Python API
        import torch

        check_elements(tuple(spec.shape), limits, budget, peak=2 * FLOAT64)
        spec = spec.detach().to("cpu", torch.float64, copy=True).numpy()
    elif isinstance(spec, np.ndarray):
        check_elements(spec.shape, limits, budget)
    else:  # a number or a list: its size is known once it is an array
        array = _as_array(spec, limits)
        budget.take(array.nbytes, f"the inputs with a value of shape {list(array.shape)}")
        return array
    array = _as_array(spec, limits)
    if isinstance(spec, np.ndarray) and np.may_share_memory(array, spec):
        array = array.copy()  # the caller may change their array later; the run keeps its own
    return array


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def parse_text(text: str, limits: Limits, budget: Budget, what: str) -> ast.Expression:
    """``ast.parse`` of value text, once its lists are known to be within the element cap
    (``check_literals``) and its parse within the memory budget."""
    check_literals(text, limits)
    budget.need(parse_cost(text), f"parsing {what} ({len(text)} characters)")
    try:
        return ast.parse(text, mode="eval")
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        raise ValueSpecError("value_unreadable", text=_short(text)) from None


_LIST_PARTS = re.compile(rb"[\[\]]|[0-9.]+(?:[eE][+-]?[0-9]+)?")


def check_literals(text: str, limits: Limits) -> None:
    """Refuse text holding a bracketed list of more numbers than ``limits.max_elements``
    before anything parses it (the parse costs hundreds of bytes per number). A list of
    N numbers is at least 2N - 1 characters long, so shorter text is not scanned."""
    if len(text) < 2 * limits.max_elements + 1:
        return
    data = text.encode("utf-8", "replace")
    depth, count = 0, 0
    for part in _LIST_PARTS.finditer(data):
        token = part.group()
        if token == b"[":
            depth += 1
        elif token == b"]":
            depth = max(depth - 1, 0)
            if depth == 0:
                count = 0
        elif depth and token != b".":
            count += 1
            if count > limits.max_elements:
                raise LimitError("list_too_large", limit=limits.max_elements)


def _literal_shape(node: ast.List | ast.Tuple) -> tuple[int, ...]:
    """The shape a literal list will have (its first elements' lengths), or its count of
    numbers as one size when it is ragged: known before any list is built."""
    shape: list[int] = []
    first: ast.AST = node
    while isinstance(first, (ast.List, ast.Tuple)) and len(shape) <= 33:
        shape.append(len(first.elts))
        if not first.elts:
            break
        first = first.elts[0]
    count, stack = 0, [node]
    while stack:
        item = stack.pop()
        if isinstance(item, (ast.List, ast.Tuple)):
            stack.extend(item.elts)
        else:
            count += 1
    return tuple(shape) if math.prod(shape) == count else (count,)


def _as_array(data: Any, limits: Limits) -> np.ndarray:
    try:
        array = np.asarray(data, dtype=np.float64)
    except (ValueError, TypeError):
        raise ValueSpecError("ragged_list") from None
    check_elements(array.shape, limits)
    return array


def check_elements(
    shape: tuple[int, ...],
    limits: Limits,
    budget: Budget | None = None,
    peak: int = FLOAT64,
) -> None:
    """Refuse a shape with more elements than ``limits.max_elements``, or whose float64
    array (and ``peak`` bytes per element while it is made) would pass the memory
    ``budget``; the array's bytes are counted in it. Before anything is allocated."""
    size = math.prod(shape)
    if size > limits.max_elements:
        raise LimitError("value_too_large", shape=list(shape), size=size, limit=limits.max_elements)
    if budget is not None:
        what = f"the inputs with a value of shape {list(shape)}"
        budget.take(array_cost(shape), what, peak=array_cost(shape, peak))


class _Reader:
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
            check_elements(_literal_shape(node), self.limits, self.budget, LIST_PER_ELEMENT)
            return _as_array(self.nested(node, 0), self.limits)
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
        raise ValueSpecError("not_a_number", text=_short(ast.unparse(node)))

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
            raise ValueSpecError("unknown_constructor", name=_short(name))
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


def is_len(node: ast.AST) -> bool:
    """``len(name)``."""
    return (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "len"
        and len(node.args) == 1
        and not node.keywords
        and isinstance(node.args[0], ast.Name)
    )


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
    reader = _Reader(limits, random, shapes, budget)
    array = reader.value(tree.body)
    integer = reader.integral if reader.dtype is None else reader.dtype == "integer"
    dtype = None if reader.dtype in (None, "integer") else reader.dtype
    return Constructed(array, dtype, integer)


def read_file(path_text: str, limits: Limits, budget: Budget | None = None) -> np.ndarray:
    """Load ``.npy``, ``.pt`` (``weights_only=True``), ``.csv`` or ``.json`` as float64;
    only a regular file, at most ``limits.file_bytes`` of it (``autogradcli.reads``), its
    elements and bytes checked against the caps and ``budget`` before they are read."""
    budget = Budget(limits.memory) if budget is None else budget
    path = Path(path_text)
    suffix = path.suffix.lower()
    if suffix not in FILE_TYPES:
        raise ValueSpecError(
            "file_type", path=path_text, suffix=suffix or path.name, types=", ".join(FILE_TYPES)
        )
    shown = f"@{path_text}"
    try:
        with open_regular(path_text, limits.file_bytes, shown) as handle:
            return _LOADERS[suffix](handle, shown, limits, budget)
    except OSError as exc:
        raise ValueSpecError(
            "file_unreadable", path=shown, detail=str(exc.strerror or exc)
        ) from None


def _load_npy(handle: BinaryIO, shown: str, limits: Limits, budget: Budget) -> np.ndarray:
    """NumPy's public reader, header first (format versions 1.0, 2.0 and 3.0): the shape
    and dtype are checked against the caps and the budget before the data is read."""
    fmt = np.lib.format
    try:  # 3.0 is 2.0's layout with a UTF-8 header; a numeric dtype's header is ASCII
        version = fmt.read_magic(handle)
        header = fmt.read_array_header_1_0 if version == (1, 0) else fmt.read_array_header_2_0
        shape, fortran, dtype = header(handle)
    except (ValueError, TypeError, OSError, SyntaxError) as exc:
        raise ValueSpecError("npy_unreadable", path=shown[1:], detail=str(exc)) from None
    if dtype.hasobject:
        detail = "Object arrays cannot be loaded when allow_pickle=False"
        raise ValueSpecError("npy_unreadable", path=shown[1:], detail=detail)
    if dtype.kind not in "biuf":
        raise ValueSpecError("npy_not_numeric", path=shown[1:])
    if any(size < 0 for size in shape):
        detail = f"the header gives a negative size: {list(shape)}"
        raise ValueSpecError("npy_unreadable", path=shown[1:], detail=detail)
    count = math.prod(shape)
    if count > limits.max_elements:
        check_elements(tuple(shape), limits)
    data_start = handle.tell()
    size = os.fstat(handle.fileno()).st_size - data_start
    if size < count * dtype.itemsize:
        detail = f"the header says {count * dtype.itemsize} bytes of data; the file holds {size}"
        raise ValueSpecError("npy_unreadable", path=shown[1:], detail=detail)
    check_elements(tuple(shape), limits, budget, peak=FLOAT64 + dtype.itemsize)
    try:
        array = np.fromfile(handle, dtype=dtype, count=count)
    except (ValueError, OSError) as exc:
        raise ValueSpecError("npy_unreadable", path=shown[1:], detail=str(exc)) from None
    array = array.reshape(shape[::-1]).T if fortran else array.reshape(shape)
    return np.ascontiguousarray(array, dtype=np.float64)


_STORAGE = re.compile(r"(?:^|/)data/[0-9]+$")


def _load_pt(handle: BinaryIO, shown: str, limits: Limits, budget: Budget) -> np.ndarray:
    """``torch.load(weights_only=True)`` of a zip archive (``torch.save``'s format), once
    the sizes its directory declares are within the caps and the budget: the storages at
    most 8 bytes per element of ``max_elements``, everything at most ``file_bytes``."""
    import zipfile

    import torch

    try:  # the archive's entries are measured before anything is unpacked
        with zipfile.ZipFile(handle) as archive:
            entries = archive.infolist()
    except (zipfile.BadZipFile, ValueError, OSError):
        detail = "not a zip archive; save the tensor with torch.save (PyTorch 1.6 or later)"
        raise ValueSpecError("pt_unreadable", path=shown[1:], detail=detail) from None
    unpacked = sum(entry.file_size for entry in entries)
    if unpacked > limits.file_bytes:
        raise LimitError("pt_too_large", path=shown, size=unpacked, limit=limits.file_bytes)
    storage = sum(e.file_size for e in entries if _STORAGE.search(e.filename))
    if storage > FLOAT64 * limits.max_elements:
        raise LimitError(
            "pt_storage_too_large", path=shown, size=storage, limit=limits.max_elements
        )
    budget.need(unpacked, f"unpacking '{shown}'")
    handle.seek(0)
    try:
        with warnings.catch_warnings():  # protocol notes from the safe unpickler are noise here
            warnings.simplefilter("ignore")
            data = torch.load(handle, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for foreign or malicious files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueSpecError("pt_unreadable", path=shown[1:], detail=first) from None
    if not isinstance(data, torch.Tensor):
        raise ValueSpecError("pt_not_tensor", path=shown[1:], kind=type(data).__name__)
    if data.is_complex() or data.dtype == torch.bool:
        raise ValueSpecError("pt_not_real", path=shown[1:], dtype=str(data.dtype))
    check_elements(tuple(data.shape), limits)
    budget.take(data.numel() * FLOAT64, f"the inputs with '{shown}'", unpacked + data.numel() * 8)
    return data.to(torch.float64, copy=True).numpy()


# Bytes per byte of text while it is parsed: the text, its str, and NumPy's parser (CSV)
# or a Python float and list slot per number of at least two characters (JSON).
CSV_PER_BYTE = 6
JSON_PER_BYTE = 20


def _load_csv(handle: BinaryIO, shown: str, limits: Limits, budget: Budget) -> np.ndarray:
    text = _text(handle, shown, limits, "csv_unreadable", budget, CSV_PER_BYTE)
    try:
        table = np.loadtxt(io.StringIO(text), delimiter=",", dtype=np.float64, ndmin=2)
    except ValueError as exc:
        raise ValueSpecError("csv_unreadable", path=shown[1:], detail=str(exc)) from None
    del text
    budget.take(table.nbytes, f"the inputs with '{shown}'")
    if table.shape[0] == 1:  # one line: a vector (one number: a scalar)
        return _as_array(table[0] if table.shape[1] > 1 else table.reshape(()), limits)
    return _as_array(table, limits)  # a one-column file stays a column, (n, 1)


def _load_json(handle: BinaryIO, shown: str, limits: Limits, budget: Budget) -> np.ndarray:
    text = _text(handle, shown, limits, "json_unreadable", budget, JSON_PER_BYTE)
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise ValueSpecError("json_unreadable", path=shown[1:], detail=str(exc)) from None
    except RecursionError:
        raise ValueSpecError("json_too_deep", path=shown) from None
    if _depth_past(data, 32):
        raise ValueSpecError("json_too_deep", path=shown)
    if not _is_numeric_nest(data):
        raise ValueSpecError("json_not_numbers", path=shown[1:])
    array = _as_array(data, limits)
    budget.take(array.nbytes, f"the inputs with '{shown}'")
    return array


def _text(
    handle: BinaryIO, shown: str, limits: Limits, code: str, budget: Budget, per_byte: int
) -> str:
    """The file's text, once ``per_byte`` bytes of parsing per byte of it fit the budget."""
    size = os.fstat(handle.fileno()).st_size
    budget.need(size * per_byte, f"reading '{shown}' ({size} bytes)")
    data = read_open(handle, limits.file_bytes, shown)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ValueSpecError(code, path=shown[1:], detail=str(exc)) from None


def _depth_past(data: Any, limit: int) -> bool:
    """Whether lists nest more than ``limit`` deep (without recursion)."""
    level = [data]
    for _ in range(limit + 1):
        level = [item for x in level if isinstance(x, list) for item in x]
        if not level:
            return False
    return True


def _is_numeric_nest(data: Any, depth: int = 0) -> bool:
    if isinstance(data, list) and depth < 32:
        return all(_is_numeric_nest(item, depth + 1) for item in data)
    return isinstance(data, (int, float)) and not isinstance(data, bool)


_LOADERS: dict[str, Callable[[BinaryIO, str, Limits, Budget], np.ndarray]] = {
    ".npy": _load_npy,
    ".pt": _load_pt,
    ".csv": _load_csv,
    ".json": _load_json,
}
