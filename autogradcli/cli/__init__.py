"""The command line: a thin front end over the Python API (``autogradcli.api``)."""

from autogradcli.cli.app import app, main

__all__ = ["app", "main"]
