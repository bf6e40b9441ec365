"""Strict JSON (RFC 8259): non-finite numbers become the strings "NaN", "Infinity", "-Infinity"."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """One strict JSON document; refuses NaN/Infinity literals if any slipped through."""
    from autogradcli.results import strict

    return json.dumps(strict(value), allow_nan=False)


def error_document(
    kind: str, code: str, message: str, in_place: list[dict[str, Any]] | None = None
) -> str:
    """The JSON printed on stdout for bad input under ``--json`` (``in_place``: the in-place
    lines PyTorch ran before refusing, with their version counters)."""
    from autogradcli.results import SCHEMA_VERSION

    error: dict[str, Any] = {"type": kind, "code": code, "message": message}
    if in_place:
        error["in_place"] = in_place
    return dumps({"schema_version": SCHEMA_VERSION, "error": error})
