"""The last line of defence against deep recursion: a ``RecursionError`` from any stage
(ours, SymPy's, PyTorch's) becomes a ``LimitError`` that says where, and which limit."""

from __future__ import annotations

import functools
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar, cast

from autogradcli.errors import LimitError

F = TypeVar("F", bound=Callable[..., Any])


def recursion_as_limit(func: F) -> F:
    """``func`` with a ``RecursionError`` raised as the ``LimitError`` ``recursion_limit``
    (the stages are written without recursion over a program's length; this is for what
    they call)."""

    @functools.wraps(func)
    def guarded(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except RecursionError as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            where = frames[-1].filename if frames else "?"
            module = where.rsplit("site-packages/", 1)[-1].rsplit("autogradcli/", 1)[-1]
            raise LimitError(
                "recursion_limit", limit=sys.getrecursionlimit(), where=module
            ) from None

    return cast(F, guarded)
