"""Input that may never end: a byte stream read with a cap on its total size."""

from __future__ import annotations

from typing import BinaryIO

from autogradcli.errors import LimitError


class Capped:
    """A binary stream that refuses to give more than ``cap`` bytes in all: past them,
    ``LimitError("stream_too_large")`` (``check - < /dev/zero`` and ``shell < /dev/zero``
    end there instead of skipping one endless line forever)."""

    def __init__(self, stream: BinaryIO, cap: int, path: str = "-") -> None:
        self.stream = stream
        self.cap = cap
        self.path = path
        self.total = 0

    def _count(self, data: bytes) -> bytes:
        self.total += len(data)
        if self.total > self.cap:
            where = "standard input" if self.path == "-" else f"'{self.path}'"
            raise LimitError("stream_too_large", where=where, limit=self.cap)
        return data

    def readline(self, size: int = -1) -> bytes:
        return self._count(self.stream.readline(size))

    def read(self, size: int = -1) -> bytes:
        return self._count(self.stream.read(size))
