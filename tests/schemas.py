"""Validate --json documents against the published JSON Schemas in schema/."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator

from autogradcli import schemas

SCHEMA = Path(__file__).resolve().parent.parent / "schema"
KINDS = schemas()  # each document's "command" and its schema, from the command registry
VALIDATED: list[str] = []  # how many documents the suite validated, by schema


@cache
def validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


def schema_of(document: dict[str, Any]) -> str:
    if "case" in document or "summary" in document:
        return "check"
    return "error" if "error" in document else KINDS[document["command"]]


def validate(document: dict[str, Any]) -> None:
    """Raise if ``document`` does not match the schema its command publishes."""
    name = schema_of(document)
    errors = sorted(validator(name).iter_errors(document), key=lambda e: list(e.path))
    assert not errors, f"{name}: " + "; ".join(
        f"{'/'.join(map(str, e.path))}: {e.message[:200]}" for e in errors[:5]
    )
    VALIDATED.append(name)


def validate_text(text: str) -> None:
    """Validate each JSON document printed on its own line (what --json prints)."""
    for line in text.splitlines():
        if line.startswith("{"):
            validate(json.loads(line))
