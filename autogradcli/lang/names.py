"""The names a program shows: after the lines are read, the last binding of each written
name takes that name back from its fresh step name (``y_``), where nothing else holds it."""

from __future__ import annotations

import dataclasses
import re

from autogradcli.lang.tree import (
    Hook,
    InPlace,
    Leaf,
    Name,
    Node,
    Rebuild,
    Reset,
    Statement,
    Step,
)


class Renames:
    """The program builder's renaming (mixed into ``program._Builder``)."""

    # the builder's state these methods read and write (see program._Builder)
    current: dict[str, str]
    free: list[str]
    hooked: set[str]
    idents: set[str]
    leaves: dict[str, Leaf]
    names: dict[str, str]
    root: Node | None
    statements: list[Statement]
    steps: list[Step]
    taken: set[str]

    def name_last_bindings(self) -> None:
        """A program that runs as a whole (not line by line) ends with each written name
        on its last binding: ``y`` is the tensor ``y`` holds after the last line (as
        PyTorch holds it), and an earlier binding takes ``y_1``, ``y_2``, ... (shown as
        ``y``). An input, or a value the program defines, keeps its name."""
        renames: dict[str, str] = {}
        chosen: set[str] = set()
        by_name: dict[str, list[str]] = {}  # one pass, not one per written name
        for n, w in self.names.items():
            by_name.setdefault(w, []).append(n)
        for written, bindings in by_name.items():
            if len(bindings) < 2 or bindings[-1] == written or written in self.free:
                continue
            if any(b in self.leaves for b in bindings) or self._in_leaf_source(bindings):
                continue
            earlier: list[str] = []
            k = 0
            for _ in bindings[:-1]:
                k += 1
                while (
                    f"{written}_{k}" in self.idents
                    or f"{written}_{k}" in chosen
                    or (f"{written}_{k}" in self.taken and f"{written}_{k}" not in bindings)
                ):
                    k += 1
                earlier.append(f"{written}_{k}")
            chosen.update(earlier)
            renames.update(zip(bindings, [*earlier, written], strict=True))
        if renames:
            self.apply_renames(renames)

    def _in_leaf_source(self, names: list[str]) -> bool:
        """Whether a constructor's text reads one of ``names`` (``len(y_2)``)."""
        words = {w for leaf in self.leaves.values() for w in re.findall(r"\w+", leaf.source)}
        return any(n in words for n in names)

    def apply_renames(self, renames: dict[str, str]) -> None:
        """Every step, reference and statement with its step renamed by ``renames``."""

        def new(name: str) -> str:
            base, dot, attr = name.partition(".")
            return renames.get(base, base) + dot + attr

        class _Renamed(Rebuild):
            def name(self, found: Name) -> Node:
                return Name(new(found.id)) if new(found.id) != found.id else found

        rename = _Renamed()
        changed: dict[int, Statement] = {}
        for step in self.steps:
            in_place = step.in_place
            if in_place is not None:
                live = tuple(new(n) for n in in_place.live)
                in_place = InPlace(in_place.method, new(in_place.target), in_place.text, live)
            changed[id(step)] = Step(new(step.name), rename(step.node), in_place)
        statements: list[Statement] = []
        for statement in self.statements:
            if isinstance(statement, Step):
                statement = changed[id(statement)]
            elif isinstance(statement, Hook):
                statement = dataclasses.replace(statement, target=new(statement.target))
            elif isinstance(statement, Reset):
                statement = dataclasses.replace(statement, name=new(statement.name))
            statements.append(statement)
        self.steps = [changed[id(s)] for s in self.steps]
        self.statements = statements
        if self.root is not None:
            self.root = rename(self.root)
        self.names = {new(n): w for n, w in self.names.items()}
        self.taken = {new(n) for n in self.taken}
        self.hooked = {new(n) for n in self.hooked}
        self.current = {w: new(n) for w, n in self.current.items()}
