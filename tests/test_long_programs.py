"""A long program's parse and counts (issue 29): the faster walks give what the old ones gave."""

from __future__ import annotations

import ast

import pytest

from autogradcli.errors import LimitError
from autogradcli.lang.analysis import MANY_STEPS, check_constants, rounding_steps
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.syntax import caret_power, survey
from autogradcli.lang.tree import Binary, Call, Name, Num, Rebuild
from autogradcli.settings import Limits


def chain(steps: int) -> str:
    """``y1 = sin(x); y2 = y1*0.5 + sin(y1); ...``: each step uses the one before twice."""
    lines = ["y1 = sin(x)"]
    lines += [f"y{i} = y{i - 1}*0.5 + sin(y{i - 1})" for i in range(2, steps + 1)]
    return "\n".join(lines)


@pytest.mark.parametrize(
    "text",
    [
        chain(5),
        "x.backward()\nprint(y)\nz = [a, (b, c)]\nf(*k, **{q: r})\nh = lambda g: g * w",
        "def f(u):\n    return v\nclass C:\n    w = 1\nfor i in range(3):\n    s = s + i",
        "y = x.sum()\nprint",
    ],
)
def test_survey_finds_what_ast_walk_finds(text: str) -> None:
    module = ast.parse(text)
    names = {n.id for n in ast.walk(module) if isinstance(n, ast.Name)}
    cell = any(
        isinstance(n, ast.Call)
        and (
            (isinstance(n.func, ast.Attribute) and n.func.attr == "backward")
            or (isinstance(n.func, ast.Name) and n.func.id == "print")
        )
        for n in ast.walk(module)
    )
    assert survey(module) == (cell, names)


@pytest.mark.parametrize(
    ("text", "caret"),
    [("x^2", True), ("x**2", False), ("y = x\ny ^= 2", True), ("'^'", False), ("x ^", True)],
)
def test_caret_power(text: str, caret: bool) -> None:
    assert caret_power(text) is caret


def test_rounding_steps_of_a_long_doubling_chain_stay_finite() -> None:
    """Each step counts the one before twice: 2**1100 would overflow the float bound."""
    limits = Limits(max_length=100_000)
    small = parse_expression(chain(3), limits, frozenset({"x"}))
    # sin: 3; y2: 3 + (3 + 3) + (3 + 3) = 15; y3: 3 + (3 + 15) + (3 + 15) = 39
    assert rounding_steps(small, {"x": ()}, limits) == 39
    long = parse_expression(chain(1100), limits, frozenset({"x"}))
    assert rounding_steps(long, {"x": ()}, limits) == MANY_STEPS


def test_check_constants_reports_the_first_exponent_as_written() -> None:
    limits = Limits()
    check_constants(Binary("**", Name("x"), Num(1000)), limits)  # at the limit: allowed
    inner = Binary("**", Name("x"), Num(2000))
    with pytest.raises(LimitError) as raised:
        check_constants(Binary("**", inner, Num(3000)), limits)
    assert raised.value.code == "exponent_too_large"
    assert raised.value.data["exponent"] == 3000  # the outer power, first in the text


def test_rebuild_keeps_what_did_not_change() -> None:
    tree = Binary("+", Binary("*", Name("y"), Num(0.5)), Call("sin", (Name("y"),)))
    assert Rebuild()(tree) is tree

    class Rename(Rebuild):
        def name(self, node: Name) -> Name:
            return Name("z") if node.id == "y" else node

    renamed = Rename()(Binary("+", Name("x"), Call("sin", (Name("y"),))))
    assert renamed == Binary("+", Name("x"), Call("sin", (Name("z"),)))
