"""Statements a cell's loops and updates add to the builder's: a parameter changed in
place under ``torch.no_grad()``, a ``print`` that shows what Python prints, and a
device a constructor names."""

from __future__ import annotations

from dataclasses import dataclass

from autogradcli.lang.tree import Node, Program, Show


@dataclass(frozen=True)
class Update:
    """``p -= lr * p.grad`` under ``torch.no_grad()`` on a leaf that requires grad: the
    leaf itself changes in place (``method``, e.g. ``sub_``, with ``operand``), as
    PyTorch changes it; later lines read the new values."""

    name: str
    method: str
    operand: Node
    text: str = ""


@dataclass(frozen=True)
class Printed(Show):
    """A ``print`` whose items Python formats: ``formats`` per item ("" a tensor as
    PyTorch prints it, "item" ``t.item()``, "tolist" ``t.tolist()``, "text" a string or a
    Python number as written), joined by ``sep`` (an f-string's parts by "")."""

    formats: tuple[str, ...] = ()
    sep: str = " "


@dataclass(frozen=True)
class DeviceUse:
    """A device a constructor names (``device=device``): it must be the run's."""

    device: str
    text: str = ""


@dataclass(frozen=True)
class Branch(Show):
    """A tensor condition of ``if``/``while`` (``kind``) at cell line ``line``: ``items``
    holds its tree; ``taken`` is its truth as the run read it when the cell was parsed
    (None: Python raises there, as for a tensor of several elements); ``open``: parsed
    without values, the rest of the cell waits for them; ``outcome``: the whole
    condition's truth (``not``, ``and``, ``or`` and Python numbers with it), on the last
    tensor part it read. The run reads it again and
    stops where it differs. A ``Show`` that shows nothing, so the cell is a cell."""

    kind: str = "if"
    line: int = 0
    taken: bool | None = None
    open: bool = False
    outcome: bool | None = None  # the whole condition's truth (on its last tensor part)


def stopped_at_condition(program: Program) -> bool:
    """Whether the program was read without values up to a tensor condition (an open
    ``Branch``): the run must read it again along the path its values take."""
    return any(isinstance(s, Branch) and s.open for s in program.statements)
