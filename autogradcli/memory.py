"""One memory budget for a run: every input, every pass's saved ``.grad`` and every reference
array is estimated before it is allocated, and a run past the budget is refused.

The estimates are upper bounds in bytes, counted per element of each tensor the run will
hold (the shapes are known before torch loads); ``docs/trust.md`` ("Memory") says what
they cover and the margin the tests hold them to.
"""

from __future__ import annotations

import math
import re
from contextvars import ContextVar

from autogradcli.errors import LimitError, OptionError

DEFAULT = 4 * 2**30  # bytes: fixed, so that a refusal does not depend on the machine

# ast.parse costs about 520 bytes per character of a list of numbers ("1,1,1,...",
# measured with CPython 3.11); every text parsed is counted at this rate.
PARSE_PER_CHAR = 600
# A literal list of numbers is a Python list of floats (8-byte slot and a 24-byte float)
# before it is an array.
LIST_PER_ELEMENT = 32
FLOAT64 = 8
ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2}

# Bytes per element of every array a --json document prints, while it is made: a Python
# float and its list slot per number (to_dict), the text and the pieces json.dumps joins
# (measured: 81 bytes per element at its peak, tracemalloc, 1.4 million printed floats).
JSON_PER_ELEMENT = 96
# Bytes per printed array element the run's output will need: JSON_PER_ELEMENT when a front
# end prints the result as JSON (the CLI's --json sets it), 0 for Rich's report, which
# prints a summary of a large tensor, and for the Python API, which prints nothing.
PRINTED: ContextVar[int] = ContextVar("printed", default=0)

UNITS = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
_SIZE = re.compile(r"\s*([0-9]+(?:\.[0-9]*)?|\.[0-9]+)\s*([KMGT]?)(?:I?B)?\s*", re.IGNORECASE)


def parse_memory(value: object) -> int:
    """A budget in bytes from a whole number of bytes or text such as ``512M``, ``4G``,
    ``1.5GiB`` (K, M, G, T: powers of 1024, as ``docker --memory`` reads them)."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
        return value
    match = _SIZE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise OptionError("bad_memory", value=str(value))
    number = float(match.group(1)) * UNITS[match.group(2).upper()]
    if not math.isfinite(number) or number < 1:
        raise OptionError("bad_memory", value=str(value))
    return int(number)


def size_text(nbytes: float) -> str:
    """Bytes for a reader: ``4 GiB``, ``1.53 GiB``, ``64 MiB``, ``900 bytes``."""
    for unit, scale in (("TiB", 2**40), ("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if nbytes >= scale:
            return f"{nbytes / scale:.3g} {unit}"
    return f"{int(nbytes)} bytes"


def option_text(nbytes: float) -> str:
    """A budget that covers ``nbytes``, as one writes it: ``5G``, ``96M``."""
    for unit in ("T", "G", "M", "K"):
        if nbytes >= UNITS[unit]:
            return f"{math.ceil(nbytes / UNITS[unit])}{unit}"
    return str(math.ceil(nbytes))


def refuse(what: str, estimate: float, budget: int) -> LimitError:
    """The error that ``what`` would need ``estimate`` bytes, past the budget."""
    return LimitError(
        "memory_budget",
        what=what,
        estimate=size_text(estimate),
        budget=size_text(budget),
        suggest=option_text(estimate * 1.25),
        estimate_bytes=int(estimate),
        budget_bytes=budget,
    )


class Budget:
    """The bytes a run holds so far against its budget: ``take`` counts what stays, and
    what is needed only while it is made (``peak``), before it is allocated."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.held = 0

    def need(self, peak: float, what: str) -> None:
        """Refuse ``what`` if ``peak`` more bytes would pass the budget."""
        if self.held + peak > self.limit:
            raise refuse(what, self.held + peak, self.limit)

    def take(self, held: float, what: str, peak: float = 0) -> None:
        """Count ``held`` bytes that stay (refused first if ``max(held, peak)`` would not fit)."""
        self.need(max(held, peak), what)
        self.held += int(held)


def parse_cost(text: str) -> int:
    """The bytes ``ast.parse`` may take for ``text``."""
    return len(text) * PARSE_PER_CHAR


def array_cost(shape: tuple[int, ...], per_element: int = FLOAT64) -> int:
    """Bytes of an array of ``shape``."""
    return int(math.prod(shape)) * per_element
