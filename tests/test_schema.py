"""The published JSON contract: schema/ holds a JSON Schema for every --json document, the
files are what scripts/make_schema.py writes, every document carries schema_version, and
the API's to_dict() documents validate too (the CLI's are validated in conftest.cli)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

import autogradcli as ag
from tests.conftest import cli
from tests.schemas import KINDS, SCHEMA, VALIDATED, validate

ROOT = Path(__file__).resolve().parent.parent


def test_the_committed_schemas_are_what_the_script_writes():
    spec = importlib.util.spec_from_file_location("make_schema", ROOT / "scripts/make_schema.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for name, schema in module.SCHEMAS.items():
        assert json.loads((SCHEMA / f"{name}.schema.json").read_text()) == schema, name


@pytest.mark.parametrize(
    "document",
    [
        lambda: ag.grad("sum(x**2)", x="[1.0, 2.0]", explain=True, inspect=True).to_dict(),
        lambda: ag.grad("log(1 + exp(x))", x=100).to_dict(),  # a cause and a suggestion
        lambda: ag.grad("x*y", x=2, y=3, const=["y"], repeat=2, numeric=True).to_dict(),
        lambda: ag.jacobian("x*sum(x)", x="[1.0, 2.0]").to_dict(),
        lambda: ag.hessian("sum(x**3)", x="[1.0, 2.0]").to_dict(),
        lambda: ag.derivative("sin(x)", x=1.0, order=3).to_dict(),
        lambda: ag.backward_graph("y = x*2; out = y + 1", x=1).to_dict(),
    ],
    ids=["grad-views", "grad-cause", "grad-passes", "jacobian", "hessian", "order", "graph"],
)
def test_api_documents_validate(document):
    doc = document()
    assert doc["schema_version"] == 1
    validate(doc)


@pytest.mark.parametrize(
    "args",
    [
        ("grad", "x.y", "--x", "1"),
        ("grad", "x", "--x", "1", "--repeat", "0"),
        ("grad", "x**2", "--x", "[1.0, 2.0]"),
        ("jacobian", "x", "--x", "[]"),
    ],
)
def test_error_documents_validate(args):
    run = cli(*args, "--json")
    assert run.exit_code == 2
    doc = run.json()
    assert doc["schema_version"] == 1 and doc["error"]["code"]


def test_a_document_that_breaks_the_contract_is_caught():
    doc = ag.grad("x", x=1).to_dict()
    doc["verdict"] = "maybe"
    with pytest.raises(AssertionError, match="verdict"):
        validate(doc)


def test_the_suite_validates_documents_of_every_schema():
    for name in ("grad", "derivative", "graph", "error"):
        cli(*{"grad": ("grad", "x", "--x", "1"), "derivative": ("hessian", "x**2", "--x", "1"),
              "graph": ("graph", "x*2", "--x", "1"), "error": ("grad", "", "--x", "1")}[name],
            "--json")  # fmt: skip
    assert {"grad", "derivative", "graph", "error"} <= set(VALIDATED)


TENSORS = [
    1,
    -2.5,
    "NaN",
    "-Infinity",
    [],
    [1, [2.0, ["Infinity"]]],
    [[1, 2], [3, 4]],
    True,
    None,
    "nan",
    "inf",
    {"a": 1},
    [1, False],
    [[1, 2], [3, None]],
    [1, ["NaN", "x"]],
]


@pytest.mark.parametrize("instance", TENSORS, ids=repr)
def test_the_fast_tensor_check_is_jsonschemas_rule(instance):
    from jsonschema import Draft202012Validator

    from tests.schemas import NUMBER, TENSOR, FastValidator, is_tensor

    schema = {"$defs": {"number": NUMBER, "tensor": TENSOR}, "$ref": "#/$defs/tensor"}
    expected = Draft202012Validator(schema).is_valid(instance)
    assert is_tensor(instance) is expected
    assert FastValidator(schema).is_valid(instance) is expected


def test_every_published_schema_uses_the_fast_tensor_check():
    from tests.schemas import FastValidator, validator

    for name in {*KINDS.values(), "check", "error"}:
        schema = json.loads((SCHEMA / f"{name}.schema.json").read_text())
        if "tensor" in schema.get("$defs", {}):
            assert isinstance(validator(name), FastValidator), name


def test_the_inlined_schemas_judge_as_jsonschema_does():
    """``validator`` inlines each schema's references: every document of the API test
    above, and each with one field broken, is valid under it exactly when it is under
    jsonschema's own validator of the published file."""
    from tests.schemas import reference_validator, schema_of, validator

    breaks = [("verdict", "maybe"), ("schema_version", "1"), ("rtol", [1]), ("notes", {})]
    for make in test_api_documents_validate.pytestmark[0].args[1]:
        document = make()
        name = schema_of(document)
        assert validator(name).is_valid(document) and reference_validator(name).is_valid(document)
        for key, value in breaks:
            if key in document:
                broken = {**document, key: value}
                assert not reference_validator(name).is_valid(broken), (name, key)
                assert not validator(name).is_valid(broken), (name, key)
        for key, part in document.items():
            if isinstance(part, dict) and part:
                inner = next(iter(part))
                broken = {**document, key: {**part, inner: {"not": "a document's"}}}
                expected = reference_validator(name).is_valid(broken)
                assert validator(name).is_valid(broken) is expected, (name, key, inner)
