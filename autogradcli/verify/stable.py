"""Stable PyTorch forms of expressions that lose precision or overflow.

``rewrite`` replaces each known pattern by its stable form (``log(1 + exp(x))`` by
``softplus(x)``, ...). The caller re-runs the rewritten expression and suggests it only
when that run agrees: a rewrite is a hypothesis, the re-run is the proof.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from autogradcli.lang.text import unparse
from autogradcli.lang.tree import (
    Binary,
    Call,
    Index,
    Name,
    Node,
    Num,
    Program,
    Step,
    Unary,
    call,
)


def _call(node: Node, func: str) -> Node | None:
    """The argument of ``func(arg)``, or None."""
    if isinstance(node, Call) and node.func == func and not node.params and len(node.args) == 1:
        return node.arg
    return None


def _one_plus(node: Node) -> Node | None:
    """``u`` of ``1 + u`` or ``u + 1``."""
    if isinstance(node, Binary) and node.op == "+":
        if isinstance(node.left, Num) and node.left.value == 1:
            return node.right
        if isinstance(node.right, Num) and node.right.value == 1:
            return node.left
    return None


def _softplus(node: Node) -> Node | None:
    inner = _call(node, "log")
    inner = None if inner is None else _one_plus(inner)
    u = None if inner is None else _call(inner, "exp")
    return None if u is None else call("softplus", u)


def _logsigmoid(node: Node) -> Node | None:
    inner = _call(node, "log")
    if inner is None:
        return None
    u = _call(inner, "sigmoid")
    if u is not None:
        return call("logsigmoid", u)
    if isinstance(inner, Binary) and inner.op == "-" and isinstance(inner.left, Num):
        u = _call(inner.right, "sigmoid") if inner.left.value == 1 else None
        if u is not None:
            return call("logsigmoid", Unary("-", u))
    return None


def _log1p(node: Node) -> Node | None:
    inner = _call(node, "log")
    u = None if inner is None else _one_plus(inner)
    return None if u is None else call("log1p", u)


def _expm1(node: Node) -> Node | None:
    if isinstance(node, Binary) and node.op == "-" and isinstance(node.right, Num):
        u = _call(node.left, "exp") if node.right.value == 1 else None
        if u is not None:
            return call("expm1", u)
    return None


def _sigmoid(node: Node) -> Node | None:
    if isinstance(node, Binary) and node.op == "/" and isinstance(node.left, Num):
        inner = _one_plus(node.right) if node.left.value == 1 else None
        e = None if inner is None else _call(inner, "exp")
        if isinstance(e, Unary) and e.op == "-":
            return call("sigmoid", e.operand)
    return None


# Tried in order at each node; the first that matches wins.
RULES: tuple[Callable[[Node], Node | None], ...] = (
    _softplus,
    _logsigmoid,
    _log1p,
    _expm1,
    _sigmoid,
)


def _rewrite(node: Node, done: list[tuple[str, str]]) -> Node:
    if isinstance(node, Unary):
        node = Unary(node.op, _rewrite(node.operand, done))
    elif isinstance(node, Binary):
        node = Binary(node.op, _rewrite(node.left, done), _rewrite(node.right, done))
    elif isinstance(node, Call):
        node = Call(node.func, tuple(_rewrite(a, done) for a in node.args), node.params)
    elif isinstance(node, Index):
        node = Index(_rewrite(node.value, done), node.items)
    for rule in RULES:
        stable = rule(node)
        if stable is not None:
            done.append((unparse(node), unparse(stable)))
            return stable
    return node


def rewrite(expression: Program) -> tuple[str, list[tuple[str, str]]]:
    """The expression's text with every known unstable pattern in its stable form, and the
    (pattern, replacement) pairs; no pairs when nothing matched."""
    done: list[tuple[str, str]] = []
    steps = tuple(Step(s.name, _rewrite(s.node, done), s.in_place) for s in expression.steps)
    root = _rewrite(expression.root, done)
    return text_of(replace(expression, steps=steps, root=root)), done


def text_of(expression: Program) -> str:
    """Program text for an expression tree: its steps, then the output."""
    lines = [f"{s.name} = {unparse(s.node)}" for s in expression.steps]
    last = expression.steps[-1].name if expression.steps else None
    if not (isinstance(expression.root, Name) and expression.root.id == last):
        lines.append(unparse(expression.root))
    return "; ".join(lines)
