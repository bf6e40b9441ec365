"""Read variable values: numbers, nested lists, constructors such as ``ones(2,2)``, and files.

Value text is parsed with the same whitelist approach as expressions (``ast`` walk, no
evaluation). Element counts are checked before anything is allocated. Files load with
``allow_pickle=False`` (NumPy) and ``weights_only=True`` (PyTorch).

The parts live beside this module: ``literals`` (the parse and the element and memory
checks), ``constructors`` (``ones``, ``linspace``, ``tensor``... and ``rand``'s seeded
source) and ``loaders`` (the files); this module reads a value of any kind.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.lang.constructors import Constructed, RandomSource, Reader, read_constructor
from autogradcli.lang.literals import (
    as_array,
    check_elements,
    check_literals,
    is_len,
    parse_text,
)
from autogradcli.lang.loaders import FILE_TYPES, read_file
from autogradcli.memory import FLOAT64, Budget
from autogradcli.settings import Limits

__all__ = [
    "FILE_TYPES",
    "Constructed",
    "RandomSource",
    "check_elements",
    "check_literals",
    "is_len",
    "read_constructor",
    "read_file",
    "read_value",
]


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
        reader = Reader(limits, random, budget=budget)
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
        array = as_array(spec, limits)
        budget.take(array.nbytes, f"the inputs with a value of shape {list(array.shape)}")
        return array
    array = as_array(spec, limits)
    if isinstance(spec, np.ndarray) and np.may_share_memory(array, spec):
        array = array.copy()  # the caller may change their array later; the run keeps its own
    return array
