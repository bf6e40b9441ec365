"""Validate --json documents against the published JSON Schemas in schema/."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator, ValidationError, validators

from autogradcli import schemas

SCHEMA = Path(__file__).resolve().parent.parent / "schema"
KINDS = schemas()  # each document's "command" and its schema, from the command registry
VALIDATED: list[str] = []  # how many documents the suite validated, by schema


# The schemas' ``tensor``: a number (or "NaN", "Infinity", "-Infinity") or an array of
# tensors. Checked in plain Python when a schema defines it exactly so: the same rule as
# jsonschema's, per element about 100 times faster (the suite validates every result).
NUMBER = {"oneOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}]}
TENSOR = {
    "anyOf": [{"$ref": "#/$defs/number"}, {"type": "array", "items": {"$ref": "#/$defs/tensor"}}]
}
NONFINITE = ("NaN", "Infinity", "-Infinity")


def is_tensor(value: Any) -> bool:
    """Whether ``value`` is valid under ``TENSOR`` (with ``NUMBER``): a JSON number (not a
    boolean), a non-finite number's string, or a list of tensors."""
    if isinstance(value, list):
        return all(is_tensor(v) for v in value)
    if isinstance(value, bool):
        return False
    return isinstance(value, int | float) or (isinstance(value, str) and value in NONFINITE)


def _any_of(validator: Any, any_of: Any, instance: Any, schema: Any) -> Any:
    """jsonschema's ``anyOf``, with the tensor's checked by ``is_tensor``."""
    if schema == TENSOR:
        if not is_tensor(instance):
            yield ValidationError(f"{instance!r} is not a tensor (numbers, 'NaN', 'Infinity')")
        return
    yield from ANY_OF(validator, any_of, instance, schema)


ANY_OF = Draft202012Validator.VALIDATORS["anyOf"]
FastValidator = validators.extend(Draft202012Validator, {"anyOf": _any_of})


def inlined(node: Any, defs: dict[str, Any], inside: tuple[str, ...] = ()) -> Any:
    """``node`` with each ``{"$ref": "#/$defs/NAME"}`` replaced by NAME's schema (itself
    inlined): the same rules, without jsonschema resolving a reference at every element
    (about half its time). A reference back into a definition being inlined stays, and so
    does ``TENSOR``, which ``_any_of`` checks whole; ``$defs`` stays for them."""
    if isinstance(node, list):
        return [inlined(v, defs, inside) for v in node]
    if not isinstance(node, dict):
        return node
    ref = node.get("$ref", "")
    if len(node) == 1 and ref.startswith("#/$defs/"):
        name = ref.removeprefix("#/$defs/")
        if name in inside:
            return node
        if defs[name] == TENSOR:
            return defs[name]
        return inlined(defs[name], defs, (*inside, name))
    return {k: v if k == "$defs" else inlined(v, defs, inside) for k, v in node.items()}


@cache
def validator(name: str) -> Draft202012Validator:
    """The schema's validator: with the fast tensor check where its ``tensor`` and
    ``number`` are the ones ``is_tensor`` implements, and its references inlined."""
    schema = json.loads((SCHEMA / f"{name}.schema.json").read_text())
    Draft202012Validator.check_schema(schema)
    defs = schema.get("$defs", {})
    fast = defs.get("tensor") == TENSOR and defs.get("number") == NUMBER
    schema = inlined(schema, defs)
    return FastValidator(schema) if fast else Draft202012Validator(schema)  # type: ignore[no-any-return]


@cache
def reference_validator(name: str) -> Draft202012Validator:
    """jsonschema's own validator of the schema (no fast path): what ``validator`` must
    agree with."""
    schema = json.loads((SCHEMA / f"{name}.schema.json").read_text())
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
