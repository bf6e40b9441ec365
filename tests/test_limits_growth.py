"""Issue 29: limits that measure what they say, and a reference whose cost grows with the
work. Depth is counted as written (a chain of + or * is one level), long programs and long
sums are checked (exactly, by SymPy), and the length error says what was read. Timings are
in benchmarks/bench_growth.py, not here."""

from __future__ import annotations

import dataclasses
import math
import sys
from typing import Any

import numpy as np
import pytest

from autogradcli import api
from autogradcli.errors import LimitError
from autogradcli.lang.parser import parse_expression
from autogradcli.recursion import recursion_as_limit
from autogradcli.settings import Limits
from tests.conftest import cli

# x**1000 + x**999 + ... + x**2 + x + 1: 1,000 terms after the first, 8,891 characters
POLYNOMIAL = " + ".join(f"x**{e}" for e in range(1000, 1, -1)) + " + x + 1"
STEPS = 1000
PROGRAM = "\n".join(
    ["y1 = sin(x)", *(f"y{i} = y{i - 1}*0.5 + sin(y{i - 1})" for i in range(2, STEPS + 1))]
)
DEEP = "(" * 10_000 + "x" + ")" * 10_000


def _program_slope(x: float) -> float:
    """d y_STEPS / dx of PROGRAM by the chain rule in plain floats (forward mode)."""
    y, dy = math.sin(x), math.cos(x)
    for _ in range(STEPS - 1):
        y, dy = y * 0.5 + math.sin(y), dy * (0.5 + math.cos(y))
    return dy


def test_a_flat_sum_is_one_level_of_nesting() -> None:
    assert len(POLYNOMIAL) == 8_891 and len(POLYNOMIAL) < Limits().max_length
    parse_expression(POLYNOMIAL)  # the default max_depth of 200: accepted
    parse_expression(" + ".join(["x"] * 300), Limits(max_depth=2))
    parse_expression(" * ".join(["x"] * 300) + " / 2", Limits(max_depth=2))


def test_real_nesting_still_meets_the_depth_limit() -> None:
    message = "the expression is nested more than 200 levels deep (raise it with Limits.max_depth)"
    with pytest.raises(LimitError, match=r"^the expression is nested more than 200") as found:
        parse_expression(DEEP, Limits(max_length=30_000))
    assert found.value.code == "too_deep" and str(found.value) == message
    with pytest.raises(LimitError) as nested:
        parse_expression("((((x + 1) * 2) + 1) * 2)", Limits(max_depth=3))
    assert nested.value.code == "too_deep"
    parse_expression('y = x\nprint("((((((")\ny', Limits(max_depth=3))  # quoted: not nesting


def test_the_depth_error_on_the_command_line() -> None:
    run = cli("grad", DEEP, "--at", "x=1", "--max-length", "30000")
    assert run.exit_code == 2
    assert run.stderr == (
        "Error: the expression is nested more than 200 levels deep (raise it with --max-depth)\n"
    )


def test_a_long_polynomial_is_checked() -> None:
    """300 terms: more than the 200 levels of the default depth limit if a sum were nested,
    and checked by SymPy (bench_growth.py times 10 to 1,000 terms: SymPy's own
    differentiation of 1,000 terms takes seconds)."""
    terms = 300
    text = " + ".join(f"x**{e}" for e in range(terms, 1, -1)) + " + x + 1"
    result = api.grad(text, x=0.5, dtype="float64")
    assert result.verdict == "agree" and result.expected_by == "SymPy"
    want = sum(e * 0.5 ** (e - 1) for e in range(1, terms + 1))
    assert result.variables["x"].expected == pytest.approx(want, rel=1e-12)


def test_a_thousand_step_program_is_checked_exactly() -> None:
    result = api.grad(PROGRAM, x=0.3, dtype="float64", max_length=len(PROGRAM))
    assert result.verdict == "agree"
    assert result.expected_by == "SymPy" and not result.notes
    assert result.variables["x"].expected == pytest.approx(_program_slope(0.3), rel=1e-9)
    chain = result.variables["x"].chain  # said, not written out
    assert chain == ("∂y1000/∂x: the chain rule over 1000 steps (more than 32 are not written out)")


def test_the_length_error_says_what_was_read(tmp_path) -> None:
    path = tmp_path / "long.py"
    path.write_text("x + " * 30_000 + "x")  # 120,001 bytes
    run = cli("grad", f"@{path}", "--at", "x=1")
    assert run.exit_code == 2
    assert run.stderr == (
        f"Error: the program in @{path} is more than 10000 characters long (reading stopped "
        "after 40004 bytes; the file has 120,001 bytes); the limit is 10000 (raise it with "
        "--max-length)\n"
    )
    with pytest.raises(LimitError) as found:
        api.grad("x + " * 30_000 + "x", x=1)
    assert str(found.value) == (
        "expression is 120001 characters long; the limit is 10000 (raise it with Limits.max_length)"
    )


def test_a_recursion_error_becomes_a_limit_error() -> None:
    @recursion_as_limit
    def endless(n: int) -> int:
        return endless(n + 1)

    with pytest.raises(LimitError) as found:
        endless(0)
    assert found.value.code == "recursion_limit"
    assert str(found.value).startswith(
        "the expression is nested too deeply to check: Python's recursion limit "
        f"({sys.getrecursionlimit()} calls) was reached in "
    )


def _product_inputs(n: int) -> tuple[np.ndarray, np.ndarray]:
    """x of n and W of n x n, mixed signs (the sums cancel in part), fixed."""
    rng = np.random.default_rng(29)
    return rng.standard_normal(n), rng.standard_normal((n, n))


def test_a_64_by_64_product_is_checked_against_the_exact_reference() -> None:
    x, W = _product_inputs(64)  # 4,160 input elements: past the 256 of other programs
    result = api.grad("sum(x @ W)", x=x.tolist(), W=W.tolist(), dtype="float64")
    assert result.verdict == "agree" and result.expected_by == "SymPy"
    assert "numeric_fallback" not in {note.code for note in result.notes}
    # d/dx_k = sum_j W[k, j] (correctly rounded by fsum), d/dW[k, j] = x_k exactly
    rows = np.array([math.fsum(row) for row in W])
    expected_x = np.asarray(result.variables["x"].expected, dtype=np.float64)
    expected_w = np.asarray(result.variables["W"].expected, dtype=np.float64)
    np.testing.assert_allclose(expected_x, rows, rtol=1e-12, atol=0)
    np.testing.assert_allclose(expected_w, np.outer(x, np.ones(64)), rtol=1e-12, atol=0)


def test_a_wrong_backward_of_a_product_past_the_old_cap_is_caught(monkeypatch) -> None:
    """``sum`` whose backward is off by 1e-5 (relative): central differences (rtol 1e-3)
    would pass it; the exact reference of ``sum(x @ W)`` with W of 16x16 does not."""
    import torch

    from autogradcli.lang import vocabulary

    class WrongSum(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
            ctx.shape = a.shape
            return torch.sum(a)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            return grad.expand(ctx.shape) * (1 + 1e-5)

    wrong = dataclasses.replace(
        vocabulary.OPS["sum"], torch=lambda t, a, dim=None, keepdim=False: WrongSum.apply(a)
    )
    x, W = _product_inputs(16)  # 272 input elements: numeric differences before issue 29
    right = api.grad("sum(x @ W)", x=x.tolist(), W=W.tolist(), dtype="float64")
    assert right.verdict == "agree" and right.expected_by == "SymPy"
    monkeypatch.setitem(vocabulary.OPS, "sum", wrong)
    result = api.grad("sum(x @ W)", x=x.tolist(), W=W.tolist(), dtype="float64")
    assert result.expected_by == "SymPy" and not result.notes
    assert result.verdict == "disagree"
    assert not result.variables["x"].agree and not result.variables["W"].agree
