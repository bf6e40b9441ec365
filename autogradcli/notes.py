"""Notes on a run: a stable code and its numbers; ``str(note)`` is the sentence."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Note:
    """A remark the report shows beside the verdict (``messages.NOTES`` has the sentences)."""

    code: str
    data: dict[str, Any] = field(default_factory=dict)

    def __hash__(self) -> int:
        return hash((self.code, repr(sorted(self.data.items()))))

    def __str__(self) -> str:
        from autogradcli.messages import note_text

        return note_text(self)

    def to_dict(self) -> dict[str, Any]:
        return {"code": self.code, **self.data}
