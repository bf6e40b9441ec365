"""Domain exceptions. The core raises them; only the CLI turns them into ``Error: ...``."""


class AutogradCliError(Exception):
    """Bad input or a request that cannot be carried out. ``kind`` names it in JSON."""

    kind = "error"


class ExpressionError(AutogradCliError):
    """The expression is not in the supported language."""

    kind = "expression"


class LimitError(AutogradCliError):
    """An input exceeds a resource limit."""

    kind = "limit"


class VariableError(AutogradCliError):
    """A variable is missing, unknown, or given twice."""

    kind = "variable"


class UnknownVariableError(VariableError):
    """A value was given for a name that is not a variable of the expression."""

    def __init__(self, name: str, variables: list[str]) -> None:
        self.name = name
        self.variables = variables
        known = ", ".join(variables) if variables else "none"
        super().__init__(f"no variable '{name}' in the expression (its variables: {known})")


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
    """PyTorch itself raised; ``message`` is PyTorch's text, explained by the glossary."""

    kind = "pytorch"

    def __init__(self, torch_message: str, context: str = "") -> None:
        from autogradcli.glossary import explain, lookup

        self.torch_message = " ".join(torch_message.split())
        self.entry = lookup(self.torch_message)
        super().__init__(f"{context}{explain(self.torch_message)}")
