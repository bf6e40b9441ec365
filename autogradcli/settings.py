"""One settings object, shared by every command, the shell and the Python API."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from autogradcli.errors import DeviceError

DTYPES = ("float32", "float64", "float16", "bfloat16")

# Default (rtol, atol) per dtype, as torch.testing.assert_close documents them.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


@dataclass(frozen=True)
class Limits:
    """Bounds that stop abusive input before it costs time or memory."""

    max_length: int = 10_000  # characters of an expression
    max_depth: int = 200  # nesting of an expression
    max_exponent: int = 1_000  # constant exponent of a variable
    max_elements: int = 20_000_000  # elements of any tensor
    max_entries: int = 100_000  # entries of a Jacobian or Hessian
    sympy_seconds: float = 20.0  # SymPy's exact check; past it, the numeric check stands in


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
        if self.dtype not in DTYPES:
            raise DeviceError("unknown_dtype", dtype=self.dtype, dtypes=list(DTYPES))

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
