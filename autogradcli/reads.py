"""Bounded reads of user files: regular files only (a FIFO, device or socket is refused
without blocking), at most a byte cap, and lines decoded one at a time."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from typing import BinaryIO

from autogradcli.errors import LimitError, ValueSpecError

CHUNK = 1 << 20


def open_regular(path: str, cap: int, shown: str | None = None) -> BinaryIO:
    """``path`` opened for binary reading once it is known to be a regular file of at most
    ``cap`` bytes (``O_NONBLOCK``: opening a FIFO cannot wait for a writer); errors name it
    as ``shown`` (``@x.npy``)."""
    name = path if shown is None else shown
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        raise ValueSpecError("file_unreadable", path=name, detail=_reason(exc)) from None
    try:
        info = os.fstat(fd)
        if stat.S_ISDIR(info.st_mode):
            raise ValueSpecError("file_is_directory", path=name)
        if not stat.S_ISREG(info.st_mode):
            raise ValueSpecError("file_not_regular", path=name, kind=_kind(info.st_mode))
        if info.st_size > cap:
            raise LimitError("file_too_large", path=name, size=info.st_size, limit=cap)
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_open(stream: BinaryIO, cap: int, path: str = "-") -> bytes:
    """At most ``cap`` bytes of an open file or stream (standard input); more is refused."""
    data = _read_at_most(stream, cap + 1)
    if len(data) > cap:
        raise LimitError("file_too_large", path=path, size=f"more than {cap}", limit=cap)
    return data


def _read_at_most(handle: BinaryIO, size: int) -> bytes:
    parts: list[bytes] = []
    left = size
    while left > 0:
        part = handle.read(min(CHUNK, left))
        if not part:
            break
        parts.append(part)
        left -= len(part)
    return b"".join(parts)


def lines(
    stream: BinaryIO, max_bytes: int, max_total: int | None = None, path: str = "-"
) -> Iterator[tuple[int, str | ValueSpecError]]:
    """Each line of a byte stream with its number: its text, or the error that it is longer
    than ``max_bytes``, holds a NUL byte or is not UTF-8 (the rest of a long line is skipped
    without keeping it, so one bad line never costs the others). Past ``max_total`` bytes in
    all, a ``file_too_large`` error."""
    number = 0
    total = 0
    while True:
        line = stream.readline(max_bytes + 1)
        if not line:
            return
        number += 1
        total += len(line)
        if len(line) > max_bytes and not line.endswith(b"\n"):
            while True:  # skip to the end of the line, a chunk at a time, within the total
                rest = stream.readline(CHUNK)
                total += len(rest)
                if not rest or rest.endswith(b"\n"):
                    break
                if max_total is not None and total > max_total:
                    break
        if max_total is not None and total > max_total:
            size = f"more than {max_total}"
            raise LimitError("file_too_large", path=path, size=size, limit=max_total)
        if len(line) > max_bytes and not line.endswith(b"\n"):
            yield number, ValueSpecError("line_too_long", line=number, limit=max_bytes)
            continue
        if b"\x00" in line:
            yield number, ValueSpecError("line_nul", line=number)
            continue
        try:
            text = line.decode("utf-8")
        except UnicodeDecodeError as exc:
            yield number, ValueSpecError("line_encoding", line=number, column=exc.start + 1)
            continue
        yield number, text.removesuffix("\n").removesuffix("\r")


def _reason(exc: OSError) -> str:
    return str(exc.strerror or exc)


def _kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"
