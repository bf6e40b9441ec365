"""Domain exceptions: a stable ``code`` and the numbers and names behind it.

The core raises them and never writes their sentences: ``str(error)`` asks
``render.messages`` for the sentence in the Python API's words (parameters such as
``repeat=2``); the CLI asks for the same sentence with its flags (``--repeat 2``). ``kind``
names the family in JSON (``{"error": {"type": kind, "code": code, ...}}``).
"""

from __future__ import annotations

from typing import Any


class AutogradCliError(Exception):
    """Bad input or a request that cannot be carried out."""

    kind = "error"

    def __init__(self, code: str, **data: Any) -> None:
        super().__init__(code)
        self.code = code
        self.data = data

    def __str__(self) -> str:
        from autogradcli.messages import error_text

        return error_text(self)

    def __reduce__(self) -> tuple[Any, ...]:  # picklable, for worker processes
        return (_rebuild, (type(self), self.code, self.data))


def _rebuild(cls: type[AutogradCliError], code: str, data: dict[str, Any]) -> AutogradCliError:
    error = cls.__new__(cls)
    AutogradCliError.__init__(error, code, **data)
    return error


class ExpressionError(AutogradCliError):
    """The expression is not in the supported language."""

    kind = "expression"


class LimitError(AutogradCliError):
    """An input exceeds a resource limit."""

    kind = "limit"


class OptionError(AutogradCliError):
    """An option's value is not one it takes (a number out of range, say)."""

    kind = "usage"


class VariableError(AutogradCliError):
    """A variable is missing, unknown, or given twice; or options that do not fit."""

    kind = "variable"


class UnknownVariableError(VariableError):
    """A value was given for a name that is not a variable of the expression."""

    def __init__(self, name: str, variables: list[str]) -> None:
        super().__init__("unknown_variable", name=name, variables=list(variables))

    @property
    def name(self) -> str:
        return str(self.data["name"])


class ValueSpecError(AutogradCliError):
    """A value (number, list, constructor or file) cannot be read."""

    kind = "value"


class ShapeError(AutogradCliError):
    """Shapes do not fit: broadcasting, external gradient, non-scalar output."""

    kind = "shape"


class DeviceError(AutogradCliError):
    """The requested device or dtype is not available."""

    kind = "device"


class ComputationError(AutogradCliError):
    """PyTorch or the symbolic side refused to compute the expression."""

    kind = "computation"


class TorchError(ComputationError):
    """PyTorch itself raised: ``torch_message`` is its text, ``entry`` the glossary's key
    for it (if any); ``pass_index`` the pass on one graph it happened in, ``shape`` the
    output's shape when backward() had no weights for a non-scalar output."""

    kind = "pytorch"

    def __init__(
        self,
        torch_message: str,
        pass_index: int | None = None,
        shape: list[int] | None = None,
        in_cell: bool = False,
    ) -> None:
        from autogradcli.glossary import lookup

        text = " ".join(torch_message.split())
        entry = lookup(text)
        super().__init__(
            "pytorch",
            torch_message=text,
            pass_index=pass_index,
            shape=shape,
            entry=None if entry is None else entry.key,
            in_cell=in_cell,
        )

    @property
    def torch_message(self) -> str:
        return str(self.data["torch_message"])
