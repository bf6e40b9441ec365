"""Read variable values: numbers, nested lists, constructors such as ``ones(2,2)``, and files.

Value text is parsed with the same whitelist approach as expressions (``ast`` walk, no
evaluation). Element counts are checked before anything is allocated. Files load with
``allow_pickle=False`` (NumPy) and ``weights_only=True`` (PyTorch).
"""

from __future__ import annotations

import ast
import json
import math
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.expression import Limits

CONSTRUCTORS = ("ones", "zeros", "full", "arange", "linspace", "reshape", "rand", "randn")
FILE_TYPES = (".npy", ".pt", ".csv", ".json")
HINT = (
    "give a number (2, -1.5e-3), a nested list ([[1,2],[3,4]]), a constructor "
    "(ones(2,2), zeros(3), full(2,3,0.5), arange(1,16), linspace(0,1,5), "
    "reshape(arange(1,16),5,3), rand(2,3), randn(2,3)) or a file (@data.npy, .pt, .csv, .json)"
)


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

    def draw(self, kind: str, shape: tuple[int, ...]) -> np.ndarray:
        import torch

        if self._generator is None:
            self._generator = torch.Generator().manual_seed(self.seed)
        sample = getattr(torch, kind)(
            shape, generator=self._generator, dtype=getattr(torch, self.dtype_name)
        )
        return sample.to(torch.float64).numpy()


def read_value(spec: Any, limits: Limits, random: RandomSource | None = None) -> np.ndarray:
    """A float64 array from value text (or, for the Python API, a number, list or array)."""
    if isinstance(spec, str):
        text = spec.strip()
        if not text:
            raise ValueSpecError(f"empty value; {HINT}")
        if len(text) > limits.max_length * 100:
            raise LimitError(f"value text is {len(text)} characters long; use a file (@data.npy)")
        if text.startswith("@"):
            return read_file(text[1:], limits)
        try:
            tree = ast.parse(text, mode="eval")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            raise ValueSpecError(f"cannot read the value '{_short(text)}'; {HINT}") from None
        return _Reader(limits, random).value(tree.body)
    if hasattr(spec, "detach"):  # a torch tensor given through the Python API
        import torch

        spec = spec.detach().to("cpu", torch.float64, copy=True).numpy()
    return _as_array(spec, limits)


def _short(text: str) -> str:
    return text if len(text) <= 60 else text[:57] + "..."


def _as_array(data: Any, limits: Limits) -> np.ndarray:
    try:
        array = np.asarray(data, dtype=np.float64)
    except (ValueError, TypeError):
        raise ValueSpecError(
            "ragged or non-numeric list: every row must have the same length and hold numbers"
        ) from None
    check_elements(array.shape, limits)
    return array


def check_elements(shape: tuple[int, ...], limits: Limits) -> None:
    """Refuse a shape with more elements than ``limits.max_elements`` (before allocating)."""
    size = math.prod(shape)
    if size > limits.max_elements:
        raise LimitError(
            f"a value of shape {list(shape)} has {size} elements; the limit is "
            f"{limits.max_elements} (raise it with --max-elements)"
        )


class _Reader:
    """Walks the ``ast`` of a value: numbers, lists and the constructors, nothing else."""

    def __init__(self, limits: Limits, random: RandomSource | None) -> None:
        self.limits = limits
        self.random = random

    def value(self, node: ast.AST) -> np.ndarray:
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, (ast.List, ast.Tuple)):
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
                raise LimitError(f"the number {node.value} is too large for a float") from None
        if isinstance(node, ast.Name) and node.id in ("inf", "nan"):
            return float(node.id)
        raise ValueSpecError(f"{_short(ast.unparse(node))} is not a number; {HINT}")

    def nested(self, node: ast.AST, depth: int) -> Any:
        if depth > 32:
            raise LimitError("the list is nested more than 32 levels deep")
        if isinstance(node, (ast.List, ast.Tuple)):
            return [self.nested(item, depth + 1) for item in node.elts]
        return self.number(node)

    def integer(self, node: ast.AST, what: str) -> int:
        number = self.number(node)
        if not number.is_integer():
            raise ValueSpecError(f"{what} must be a whole number, not {number:g}")
        return int(number)

    def shape(self, nodes: list[ast.expr], name: str) -> tuple[int, ...]:
        if not nodes:
            raise ValueSpecError(f"{name}() needs a shape, e.g. {name}(2,3)")
        shape = tuple(self.integer(n, f"a size in {name}()") for n in nodes)
        if any(size < 0 for size in shape):
            raise ValueSpecError(f"sizes in {name}() cannot be negative: {list(shape)}")
        check_elements(shape, self.limits)
        if any(size > self.limits.max_elements for size in shape):  # zeros(0, 10**19)
            raise LimitError(
                f"a size in {name}() is larger than the limit {self.limits.max_elements} "
                "(raise it with --max-elements)"
            )
        return shape

    def call(self, node: ast.Call) -> np.ndarray:
        name = node.func.id if isinstance(node.func, ast.Name) else ast.unparse(node.func)
        if name not in CONSTRUCTORS:
            raise ValueSpecError(f"unknown constructor '{_short(name)}'; {HINT}")
        if node.keywords:
            raise ValueSpecError(f"{name}() takes positional arguments only, e.g. {name}(2,3)")
        args = node.args
        builders: dict[str, Callable[[list[ast.expr]], np.ndarray]] = {
            "ones": lambda a: np.ones(self.shape(a, name)),
            "zeros": lambda a: np.zeros(self.shape(a, name)),
            "full": self.full,
            "arange": self.arange,
            "linspace": self.linspace,
            "reshape": self.reshape,
            "rand": self.random_draw("rand"),
            "randn": self.random_draw("randn"),
        }
        return builders[name](args)

    def full(self, args: list[ast.expr]) -> np.ndarray:
        if len(args) < 2:
            raise ValueSpecError("full() needs a shape and a fill value, e.g. full(2,3,0.5)")
        return np.full(self.shape(args[:-1], "full"), self.number(args[-1]))

    def arange(self, args: list[ast.expr]) -> np.ndarray:
        if not 1 <= len(args) <= 3:
            raise ValueSpecError("arange() takes (end), (start, end) or (start, end, step)")
        numbers = [self.number(a) for a in args]
        start, end, step = (0.0, numbers[0], 1.0) if len(numbers) == 1 else (*numbers[:2], 1.0)
        if len(numbers) == 3:
            step = numbers[2]
        if step == 0 or not all(map(math.isfinite, (start, end, step))):
            raise ValueSpecError("arange() needs finite numbers and a step that is not 0")
        count = (end - start) / step
        if not math.isfinite(count):
            raise LimitError("arange() would have too many elements; use a larger step")
        check_elements((max(math.ceil(count), 0),), self.limits)
        return np.arange(start, end, step, dtype=np.float64)

    def linspace(self, args: list[ast.expr]) -> np.ndarray:
        if len(args) != 3:
            raise ValueSpecError("linspace() takes (start, end, steps), e.g. linspace(0,1,5)")
        start, end = self.number(args[0]), self.number(args[1])
        steps = self.integer(args[2], "steps in linspace()")
        if steps < 0:
            raise ValueSpecError("steps in linspace() cannot be negative")
        check_elements((steps,), self.limits)
        return np.linspace(start, end, steps)

    def reshape(self, args: list[ast.expr]) -> np.ndarray:
        if len(args) < 2:
            raise ValueSpecError("reshape() needs a value and a shape, e.g. reshape(arange(6),2,3)")
        data = self.value(args[0])
        shape = tuple(self.integer(a, "a size in reshape()") for a in args[1:])
        try:
            return data.reshape(shape)
        except ValueError:
            raise ValueSpecError(
                f"cannot reshape {data.size} elements into shape {list(shape)}"
            ) from None

    def random_draw(self, kind: str) -> Callable[[list[ast.expr]], np.ndarray]:
        def draw(args: list[ast.expr]) -> np.ndarray:
            shape = self.shape(args, kind)
            if self.random is None:
                raise ValueSpecError(f"{kind}() is not available here")
            return self.random.draw(kind, shape)

        return draw


def read_file(path_text: str, limits: Limits) -> np.ndarray:
    """Load ``.npy``, ``.pt`` (``weights_only=True``), ``.csv`` or ``.json`` as float64."""
    path = Path(path_text)
    suffix = path.suffix.lower()
    if suffix not in FILE_TYPES:
        raise ValueSpecError(
            f"cannot read '@{path_text}': unsupported file type '{suffix or path.name}'; "
            f"use {', '.join(FILE_TYPES)}"
        )
    try:
        if path.is_dir():
            raise ValueSpecError(f"cannot read '@{path_text}': it is a directory, not a file")
        size = os.path.getsize(path)
        if size > limits.max_elements * 64 + 4096:
            raise LimitError(
                f"'@{path_text}' is {size} bytes, too large for {limits.max_elements} elements "
                "(raise it with --max-elements)"
            )
        return _LOADERS[suffix](path, limits)
    except OSError as exc:
        raise ValueSpecError(f"cannot read '@{path_text}': {exc.strerror or exc}") from None


def _load_npy(path: Path, limits: Limits) -> np.ndarray:
    try:
        mapped = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError as exc:
        raise ValueSpecError(f"cannot read '@{path}' as a NumPy array: {exc}") from None
    if not isinstance(mapped, np.ndarray) or mapped.dtype.kind not in "biuf":
        raise ValueSpecError(f"'@{path}' does not hold a numeric array")
    check_elements(mapped.shape, limits)
    return np.array(mapped, dtype=np.float64)


def _load_pt(path: Path, limits: Limits) -> np.ndarray:
    import torch

    try:
        with warnings.catch_warnings():  # protocol notes from the safe unpickler are noise here
            warnings.simplefilter("ignore")
            data = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # torch raises many types for foreign or malicious files
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ValueSpecError(
            f"cannot read '@{path}' with torch.load(weights_only=True): {first}"
        ) from None
    if not isinstance(data, torch.Tensor):
        raise ValueSpecError(f"'@{path}' holds a {type(data).__name__}, not a tensor")
    if data.is_complex() or data.dtype == torch.bool:
        raise ValueSpecError(f"'@{path}' holds a {data.dtype} tensor; give a real-valued one")
    check_elements(tuple(data.shape), limits)
    return data.to(torch.float64, copy=True).numpy()


def _load_csv(path: Path, limits: Limits) -> np.ndarray:
    try:
        return _as_array(np.loadtxt(path, delimiter=",", dtype=np.float64), limits)
    except ValueError as exc:
        raise ValueSpecError(f"cannot read '@{path}' as CSV numbers: {exc}") from None


def _load_json(path: Path, limits: Limits) -> np.ndarray:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as exc:
        raise ValueSpecError(f"cannot read '@{path}' as JSON: {exc}") from None
    if not _is_numeric_nest(data):
        raise ValueSpecError(f"'@{path}' must hold a number or a nested list of numbers")
    return _as_array(data, limits)


def _is_numeric_nest(data: Any, depth: int = 0) -> bool:
    if isinstance(data, list) and depth < 32:
        return all(_is_numeric_nest(item, depth + 1) for item in data)
    return isinstance(data, (int, float)) and not isinstance(data, bool)


_LOADERS: dict[str, Callable[[Path, Limits], np.ndarray]] = {
    ".npy": _load_npy,
    ".pt": _load_pt,
    ".csv": _load_csv,
    ".json": _load_json,
}
