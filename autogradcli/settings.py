"""One settings object, shared by every command, the shell and the Python API."""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field, fields, replace
from typing import Any

from autogradcli.errors import DeviceError, OptionError
from autogradcli.memory import DEFAULT as DEFAULT_MEMORY
from autogradcli.memory import parse_memory

DTYPES = ("float32", "float64", "float16", "bfloat16")
# PyTorch's other names for them (torch.double is torch.float64), with or without "torch.".
DTYPE_ALIASES: dict[str, str] = {"double": "float64", "float": "float32", "half": "float16"}


def dtype_name(text: str) -> str:
    """The dtype ``text`` names, in ``DTYPES``' spelling: ``"double"``, ``"torch.float64"``
    and ``"float64"`` are all ``"float64"``; an unknown name is an ``unknown_dtype`` error
    that suggests the nearest."""
    bare = text.strip().removeprefix("torch.")
    name = DTYPE_ALIASES.get(bare, bare)
    if name not in DTYPES:
        import difflib

        known = [*DTYPES, *DTYPE_ALIASES]
        near = difflib.get_close_matches(bare, known, n=1, cutoff=0.6)
        hint = DTYPE_ALIASES.get(near[0], near[0]) if near else ""
        raise DeviceError("unknown_dtype", dtype=text, dtypes=list(DTYPES), near=hint)
    return name


# Default (rtol, atol) per dtype, as torch.testing.assert_close documents them.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


# The numbers settings and passes take: name -> (whole number, smallest, largest).
NUMBERS: dict[str, tuple[bool, float, float]] = {
    "rtol": (False, 0, math.inf),
    "atol": (False, 0, math.inf),
    "seed": (True, 0, 2**63 - 1),
    "max_length": (True, 1, math.inf),
    "max_depth": (True, 1, math.inf),
    "max_exponent": (True, 1, math.inf),
    "max_elements": (True, 1, math.inf),
    "max_entries": (True, 1, math.inf),
    "max_iterations": (True, 1, math.inf),
    "max_lines": (True, 1, math.inf),
    "max_file_bytes": (True, 1, math.inf),
    "memory": (True, 1, math.inf),  # bytes; text such as 4G is read by parse_memory
    "sympy_seconds": (False, 0, math.inf),
    "repeat": (True, 1, 10_000),
    "order": (True, 1, 8),
    "jobs": (True, 1, 64),
    "points": (True, 2, 100_000),
}


def number(name: str, value: Any) -> Any:
    """``value`` as a Python int or float if it is a number ``name`` takes (``NUMBERS``),
    else a ``bad_number`` error."""
    if name == "memory":
        return parse_memory(value)
    whole, low, high = NUMBERS[name]
    kind = numbers.Integral if whole else numbers.Real
    fits = isinstance(value, kind) and not isinstance(value, bool)
    if not (fits and math.isfinite(value) and low <= value <= high):
        raise OptionError("bad_number", name=name, value=value, whole=whole, low=low, high=high)
    return int(value) if whole else float(value)


def parse_number(name: str, text: str) -> int | float:
    """A number ``name`` takes, read from text (the command line's options); an error
    quotes the text as given."""
    if name == "memory":
        return parse_memory(text)
    try:
        return number(name, int(text) if NUMBERS[name][0] else float(text))
    except (ValueError, OptionError):
        whole, low, high = NUMBERS[name]
        raise OptionError(
            "bad_number", name=name, value=text, whole=whole, low=low, high=high
        ) from None


@dataclass(frozen=True)
class Limits:
    """Bounds that stop abusive input before it costs time or memory."""

    max_length: int = 10_000  # characters of an expression
    max_depth: int = 200  # nesting of an expression
    max_exponent: int = 1_000  # constant exponent of a variable
    max_elements: int = 20_000_000  # elements of any tensor
    max_entries: int = 100_000  # entries of a Jacobian or Hessian
    max_iterations: int = 100_000  # passes of a cell's loops, all together
    max_lines: int = 200_000  # lines a cell runs, its loops unrolled
    sympy_seconds: float = 20.0  # SymPy's exact check; past it, the numeric check stands in
    max_file_bytes: int | None = None  # bytes of a file read (None: 64 per element + 4 KiB)
    memory: int = DEFAULT_MEMORY  # bytes the run may hold in all (autogradcli.memory); 4G

    def __post_init__(self) -> None:
        for f in fields(self):
            if getattr(self, f.name) is not None:
                object.__setattr__(self, f.name, number(f.name, getattr(self, f.name)))

    @property
    def file_bytes(self) -> int:
        """The most bytes read from one file: ``max_file_bytes``, else 64 per element (a
        number written as text) and 4 KiB of headers."""
        if self.max_file_bytes is not None:
            return self.max_file_bytes
        return self.max_elements * 64 + 4096

    @property
    def line_bytes(self) -> int:
        """The longest line of a batch file or the shell: four bytes per character of an
        expression and 4 KiB of options."""
        return self.max_length * 4 + 4096


@dataclass(frozen=True)
class Settings:
    """Where and how autograd runs and how it is checked.

    ``device``: auto (CUDA when available, else CPU), cpu, cuda, cuda:N or mps. ``dtype``:
    one of ``DTYPES``. ``rtol``/``atol``: the check's tolerance (None: the dtype's
    default, ``TOLERANCES``). ``seed``: for rand()/randn() values (None: drawn and
    reported). ``numeric``: add central differences as a third opinion. ``strict``: a ≈
    verdict (within rounding) fails ``agree``.
    """

    device: str = "auto"
    dtype: str = "float32"
    rtol: float | None = None
    atol: float | None = None
    seed: int | None = None
    limits: Limits = field(default_factory=Limits)
    numeric: bool = False
    strict: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "dtype", dtype_name(self.dtype))
        for name in ("rtol", "atol", "seed"):
            if getattr(self, name) is not None:
                object.__setattr__(self, name, number(name, getattr(self, name)))

    @property
    def tolerance(self) -> tuple[float, float]:
        """(rtol, atol): the ones given, else the dtype's defaults."""
        rtol, atol = TOLERANCES[self.dtype]
        return (rtol if self.rtol is None else self.rtol, atol if self.atol is None else self.atol)

    def but(self, **changes: Any) -> Settings:
        """A copy with ``changes`` (limits fields may be given by name)."""
        limit_fields = {k: changes.pop(k) for k in list(changes) if hasattr(Limits, k)}
        if limit_fields:
            changes["limits"] = replace(self.limits, **limit_fields)
        return replace(self, **changes)
