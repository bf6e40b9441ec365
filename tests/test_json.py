"""``--json``: one strict RFC 8259 object with the documented keys."""

from __future__ import annotations

import json

from autogradcli.render.json import dumps
from autogradcli.results import strict
from tests.conftest import cli


def _strict_loads(text: str):
    def refuse(constant: str):
        raise AssertionError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_schema_keys_and_types():
    run = cli(
        "grad",
        "x*y",
        "--x",
        "[1.0, 2.0]",
        "--y",
        "3",
        "--const",
        "y",
        "--weights",
        "ones",
        "--repeat",
        "2",
        "--json",
    )
    assert run.exit_code == 0
    doc = _strict_loads(run.stdout)
    assert run.stdout.count("\n") == 1  # one object, one line
    assert {"expression", "device", "dtype", "output", "variables", "passes", "agree"} <= set(doc)
    assert doc["output"]["shape"] == [2] and doc["output"]["value"] == [3.0, 6.0]
    x, y = doc["variables"]["x"], doc["variables"]["y"]
    assert set(x) >= {
        "value",
        "shape",
        "requires_grad",
        "grad",
        "expected",
        "derivative",
        "max_abs_error",
        "agree",
    }
    assert x["grad"] == [6.0, 6.0] and x["expected"] == [6.0, 6.0] and x["derivative"] == "y"
    assert y == {
        **y,
        "requires_grad": False,
        "grad": None,
        "expected": None,
        "derivative": None,
        "max_abs_error": None,
        "agree": None,
    }
    assert [p["pass"] for p in doc["passes"]] == [1, 2]
    assert doc["passes"][0]["grads"] == {"x": [3.0, 3.0]}
    assert doc["agree"] is True


def test_non_finite_numbers_are_strings():
    run = cli("grad", "log(x)", "--x", "[0.0, -1.0]", "--weights", "ones", "--json")
    doc = _strict_loads(run.stdout)
    assert doc["output"]["value"] == ["-Infinity", "NaN"]
    assert doc["variables"]["x"]["grad"] == ["Infinity", -1.0]


def test_strict_helpers():
    assert strict([float("nan"), float("inf"), -float("inf"), 1.5]) == [
        "NaN",
        "Infinity",
        "-Infinity",
        1.5,
    ]
    assert dumps({"a": float("nan")}) == '{"a": "NaN"}'
