"""Names as the user wrote them (issue 28): a program keeps its own name for a value bound
again (``y_1``, ``x_2``); a report shows the written name, with its line where several values
share it (``y (line 3)``, ``x (input)``)."""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from autogradcli.errors import AutogradCliError
from autogradcli.lang.tree import Program


def displayed(
    text: str,
    given: frozenset[str] = frozenset(),
    seen: Iterable[str] = (),
    force: bool = False,
    known: dict[str, str] | None = None,
) -> dict[str, str]:
    """``display_names`` of the program ``text`` (read again: a result keeps the text, not
    the program), where a name the report shows (``seen``: names, words of its texts) is
    one the program made: a written name and a number (``x_2``, ``y_1``) the text does not
    hold, or where ``force`` (another part of the report labels names already). Else
    nothing (reading a long unrolled loop again would cost seconds), as for a text that
    does not read. ``known``: the map made when the program ran (then nothing is read)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return {}
    written = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    words = {w for s in seen for w in re.findall(r"[A-Za-z_]\w*", s)}
    made = [re.fullmatch(r"([A-Za-z_]\w*?)_\d+", w) for w in words - written]
    if not force and not any(m is not None and m.group(1) in written for m in made):
        return {}
    if known is not None:
        return known
    from autogradcli.lang.parser import parse_expression

    try:
        return display_names(parse_expression(text, given=given))
    except AutogradCliError:
        return {}


def display_names(program: Program) -> dict[str, str]:
    """Each name the program holds (inputs, values it defines, steps) as the user sees it:
    the name written, or where several values share it, the name and the line that binds
    it, ``y (line 3)`` (an input given from outside: ``x (input)``; several on one line:
    ``y (assignment 2)``). The program keeps its own names (``y_1``, ``x_2``)."""
    written = dict(program.names)
    groups: dict[str, list[str]] = {}
    for name in program.variables:
        if name not in written:  # given from outside: before every line
            groups.setdefault(name, []).append(name)
    for name, word in program.names:
        groups.setdefault(word, []).append(name)
    lines = _binding_lines(program.text)
    shown: dict[str, str] = {}
    for word, members in groups.items():
        if len(members) == 1:
            shown[members[0]] = word
            continue
        bound = [m for m in members if m in written]
        at = lines.get(word, [])
        by_line = len(at) == len(bound) and len(set(at)) == len(at)
        for member in members:
            if member not in written:
                shown[member] = f"{word} (input)"
            elif by_line:
                shown[member] = f"{word} (line {at[bound.index(member)]})"
            else:
                shown[member] = f"{word} (assignment {bound.index(member) + 1})"
    return shown


def _binding_lines(text: str) -> dict[str, list[int]]:
    """The lines that bind each name, in order: ``y = ...``, ``y += ...`` and in-place
    methods ``y.add_(...)``, inside with/if/try blocks too; a loop's lines twice (it binds
    them again)."""
    try:
        body = ast.parse(text).body
    except (SyntaxError, ValueError):
        return {}
    found: dict[str, list[int]] = {}
    stack = [(stmt, 1) for stmt in reversed(body)]
    while stack:
        stmt, times = stack.pop()
        targets: list[ast.expr] = []
        if isinstance(stmt, ast.Assign):
            targets = list(stmt.targets)
        elif isinstance(stmt, ast.AugAssign | ast.AnnAssign):
            targets = [stmt.target]
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
            method = stmt.value.func
            if (
                isinstance(method, ast.Attribute)
                and method.attr.endswith("_")
                and not method.attr.startswith("_")
                and method.attr != "requires_grad_"
            ):
                targets = [method.value]
        for target in targets:
            if isinstance(target, ast.Name):
                found.setdefault(target.id, []).extend([stmt.lineno] * times)
        inner = 2 if isinstance(stmt, ast.For | ast.While) else times
        for block in ("finalbody", "orelse", "handlers", "body"):  # popped body first
            stack.extend((s, inner) for s in reversed(getattr(stmt, block, []) or []))
    return found


def relabel(text: str | None, shown: dict[str, str]) -> str | None:
    """A derivative or chain-rule ``text`` with each name as the user sees it (``shown``);
    a name several values share in brackets, ``2*[x (line 2)]*[x (line 5)]``."""
    changes = {n: s if s.isidentifier() else f"[{s}]" for n, s in shown.items() if s != n}
    if not text or not changes:
        return text
    names = "|".join(re.escape(n) for n in sorted(changes, key=len, reverse=True))
    return re.sub(rf"(?<![\w.])({names})(?!\w)", lambda m: changes[m.group(1)], text)


def relabel_latex(tex: str | None, shown: dict[str, str]) -> str | None:
    """A LaTeX ``tex`` with each name as the user sees it: a name the program made, written
    as it is (``\\partial y_1``) or as SymPy writes it (``y_{1}``), becomes the written name
    and its line, ``\\left[y \\text{ (line 3)}\\right]``."""
    changes = {n: s for n, s in shown.items() if s != n}
    if not tex or not changes:
        return tex
    import sympy

    forms: dict[str, str] = {}
    for name, seen in changes.items():
        word, _, where = seen.partition(" ")
        written = sympy.latex(sympy.Symbol(word))
        new = rf"\left[{written} \text{{ {where}}}\right]" if where else written
        forms[name] = forms.get(name, new)
        forms.setdefault(sympy.latex(sympy.Symbol(name)), new)
    spelled = "|".join(re.escape(f) for f in sorted(forms, key=len, reverse=True))
    return re.sub(rf"(?<![\w\\])({spelled})(?![\w{{])", lambda m: forms[m.group(1)], tex)
