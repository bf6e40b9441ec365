"""Strict JSON (RFC 8259): non-finite numbers become the strings "NaN", "Infinity", "-Infinity"."""

from __future__ import annotations

import json
import math
from typing import Any


def strict(value: Any) -> Any:
    """``value`` with every non-finite float replaced by its JSON string spelling."""
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, dict):
        return {k: strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [strict(v) for v in value]
    return value


def dumps(value: Any) -> str:
    """One strict JSON document; refuses NaN/Infinity literals if any slipped through."""
    return json.dumps(strict(value), allow_nan=False)


def error_document(kind: str, code: str, message: str) -> str:
    """The JSON printed on stdout for bad input under ``--json``."""
    from autogradcli.results import SCHEMA_VERSION

    error = {"type": kind, "code": code, "message": message}
    return dumps({"schema_version": SCHEMA_VERSION, "error": error})
