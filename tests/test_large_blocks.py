"""The bounded float64 reference a block at a time, and ``log(1 + t)`` as ``log1p(t)``.

``Checked.walk`` takes a large walk in blocks of ``WALK_BLOCK`` elements through the whole
formula (value and bound); the block size here is made small so that a few hundred
elements are many blocks. Its numbers, bounds and mpmath patches must be the whole
walk's.
"""

from __future__ import annotations

import math

import mpmath
import numpy as np
import pytest
import sympy as sp

import autogradcli as ag
from autogradcli.reference import bounds
from autogradcli.reference.bounds import STATS, Checked
from autogradcli.reference.evaluate import Untrusted, evaluate

x, y = sp.symbols("x y", real=True)


def walked(expr: sp.Expr, values: dict[sp.Symbol, np.ndarray]) -> tuple[np.ndarray, float]:
    """``expr`` through ``Checked`` (a fresh one): its numbers and its ``worst``."""
    arith = Checked()
    env = {s: arith.array(v) for s, v in values.items()}
    found = evaluate(expr, env, arith)
    return np.asarray(found), arith.worst


def test_blocks_give_the_whole_walks_numbers_and_worst_bound(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(3)
    values = {x: rng.uniform(-3, 3, 1000), y: rng.uniform(0.5, 2, 1000)}
    expr = sp.exp(x) * sp.tanh(y) / (1 + x**2) + sp.log(y) * x - 3
    whole, worst = walked(expr, values)
    monkeypatch.setattr(bounds, "WALK_BLOCK", 64)  # 16 blocks, the last one short
    checked = STATS.checked
    parts, part_worst = walked(expr, values)
    assert STATS.checked - checked == 1000  # every element bounded, once
    np.testing.assert_array_equal(parts, whole)
    assert part_worst <= worst  # each block's bound is its own: never wider
    assert part_worst > 0


def test_a_wide_element_in_a_late_block_is_evaluated_in_mpmath(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bounds, "WALK_BLOCK", 64)
    values = np.full(500, 2.0)
    values[437] = 1e-9  # (exp(x) - 1)/x cancels there: its bound is wide
    precise = STATS.precise
    found, _ = walked((sp.exp(x) - 1) / x, {x: values})
    assert STATS.precise - precise == 1
    with mpmath.workdps(50):
        right = float(mpmath.expm1(mpmath.mpf(1e-9)) / mpmath.mpf(1e-9))
    assert found[437] == right
    assert found[0] == pytest.approx(math.expm1(2.0) / 2.0, rel=1e-15)


def test_a_value_carried_from_elsewhere_is_untrusted_in_blocks_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(bounds, "WALK_BLOCK", 64)
    arith = Checked()
    arith.worst = 1e-3  # what earlier values carry: too much to trust a difference
    carried = np.linspace(1.0, 2.0, 500)  # not made by arith.array: carries ``worst``
    with pytest.raises(Untrusted):
        evaluate(x - 1, {x: carried}, arith)


def test_broadcast_inputs_are_walked_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bounds, "WALK_BLOCK", 8)
    rng = np.random.default_rng(4)
    values = {x: rng.uniform(1, 2, (30, 1)), y: rng.uniform(1, 2, (1, 40))}
    found, _ = walked(x * y + sp.sqrt(x), values)
    assert found.shape == (30, 40)
    np.testing.assert_allclose(found, values[x] * values[y] + np.sqrt(values[x]), rtol=1e-15)


def test_log_of_one_plus_a_small_term_is_log1p_without_mpmath() -> None:
    values = np.geomspace(1e-12, 1e-2, 400)
    precise = STATS.precise
    found, worst = walked(sp.log(x**2 + 1), {x: values})
    assert STATS.precise == precise  # log1p's bound is narrow: no element in mpmath
    assert worst < bounds.TRUST
    with mpmath.workdps(50):
        right = [float(mpmath.log1p(mpmath.mpf(v) ** 2)) for v in values]
    np.testing.assert_allclose(found, right, rtol=4 * bounds.U, atol=0)


def test_log1p_near_minus_one_is_still_bounded() -> None:
    values = np.linspace(-1 + 1e-6, 0.5, 300)
    values[0] = -1.0  # log1p(-1) is -inf: IEEE's, as exact arithmetic has it
    found, _ = walked(sp.log(1 + x), {x: values})
    assert found[0] == -math.inf
    with mpmath.workdps(50):
        assert found[1] == pytest.approx(float(mpmath.log1p(mpmath.mpf(values[1]))), rel=1e-15)


def test_the_longer_benchmark_expression_agrees_with_every_element_bounded() -> None:
    rng = np.random.default_rng(0)
    n = 2000
    xs = rng.random(n).astype("float32")
    xs[:50] = np.geomspace(1e-6, 1e-3, 50)  # where log(1 + x**2) cancelled before log1p
    ws = rng.random(n).astype("float32")
    checked, precise = STATS.checked, STATS.precise
    result = ag.grad("sum(w*(tanh(x)*sigmoid(x) + log1p(x**2)))", x=xs, w=ws)
    assert result.verdict == "agree"
    assert STATS.checked - checked >= 3 * n  # the output's terms and both gradients
    assert STATS.precise == precise
    x64 = xs.astype(np.float64)
    with mpmath.workdps(40):
        dw = [float(mpmath.tanh(v) / (1 + mpmath.exp(-v)) + mpmath.log1p(v * v)) for v in x64]
    np.testing.assert_allclose(result.variables["w"].expected, dw, rtol=1e-14, atol=0)
