"""The command line: a thin front end over the Python API (``autogradcli.api``)."""

from autogradcli.cli.app import app

__all__ = ["app", "main"]


def main() -> None:
    """The console script's entry point before ``autogradcli.client:main`` replaced it (an
    install made from an older pyproject.toml): the client, which uses the warm worker."""
    from autogradcli.client import main as client

    client()
