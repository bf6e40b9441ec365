"""Values read from files (``@data.npy``, ``.pt``, ``.csv``, ``.json``): only a regular file,
at most ``limits.file_bytes`` of it (``autogradcli.reads``), its elements and bytes checked
against the caps and the memory budget before they are read. NumPy loads with
``allow_pickle=False``, PyTorch with ``weights_only=True``."""

from __future__ import annotations

import io
import json
import math
import os
import re
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from autogradcli.errors import LimitError, ValueSpecError
from autogradcli.lang.literals import as_array, check_elements
from autogradcli.memory import FLOAT64, Budget
from autogradcli.reads import open_regular, read_open
from autogradcli.settings import Limits

FILE_TYPES = (".npy", ".pt", ".csv", ".json")


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
        return as_array(table[0] if table.shape[1] > 1 else table.reshape(()), limits)
    return as_array(table, limits)  # a one-column file stays a column, (n, 1)


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
    array = as_array(data, limits)
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
