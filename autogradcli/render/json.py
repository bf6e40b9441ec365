"""Strict JSON (RFC 8259): non-finite numbers become the strings "NaN", "Infinity", "-Infinity"."""

from __future__ import annotations

import json
from typing import Any


def dumps(value: Any) -> str:
    """One strict JSON document; refuses NaN/Infinity literals if any slipped through."""
    from autogradcli.results import strict

    return json.dumps(strict(value), allow_nan=False)


def error_document(kind: str, code: str, message: str) -> str:
    """The JSON printed on stdout for bad input under ``--json``."""
    from autogradcli.results import SCHEMA_VERSION

    error = {"type": kind, "code": code, "message": message}
    return dumps({"schema_version": SCHEMA_VERSION, "error": error})
