"""Parse text into a tree: an expression, a program of named steps or a notebook cell.

The front door of ``lang``: ``converter.py`` turns Python expressions (``ast``) into the
tree with a whitelist, ``program.py`` the statements around them. Nothing evaluates user
text: ``ast.parse`` only builds a syntax tree.
"""

from __future__ import annotations

from autogradcli.lang.program import parse_program
from autogradcli.lang.tree import Program
from autogradcli.settings import Limits


def parse_expression(
    text: str, limits: Limits | None = None, given: frozenset[str] = frozenset()
) -> Program:
    """Parse an expression, a program of named steps, or a notebook cell (program.py).

    ``given`` names that have values (so ``pi``/``e`` become variables).
    """
    return parse_program(text, limits or Limits(), given)


__all__ = ["parse_expression"]
