"""The command line's side of the warm worker (docs/worker.md): the ``worker`` command,
and the one Click command the worker builds before it forks its questions."""

from __future__ import annotations

import os
from enum import Enum
from typing import Annotated, Any

import typer


class Action(str, Enum):
    """What ``autograd-cli worker`` does."""

    STATUS = "status"
    STOP = "stop"


def worker(
    action: Annotated[
        Action,
        typer.Argument(
            metavar="ACTION",
            help="status: whether this user's worker runs, since when, its memory and the "
            "questions it answered; stop: make it exit now.",
        ),
    ] = Action.STATUS,
) -> None:
    """Show or stop the background worker that answers commands without loading torch."""
    from autogradcli.worker import wire

    raise typer.Exit(wire.control(action.value, os.environ, typer.echo))


def keep_built(app: Any) -> None:
    """Make ``app()`` reuse one Click command built now rather than build it on every call
    (Typer builds it in ``typer.main.get_command``). The worker calls this before it forks:
    each question's process then runs its own copy of that command."""
    import typer.main

    built = typer.main.get_command(app)
    original = typer.main.get_command

    def get_command(instance: Any) -> Any:
        if instance is not app or any(k.startswith("_TYPER") for k in os.environ):
            return original(instance)  # Typer reads those variables as it builds
        return built

    typer.main.get_command = get_command
