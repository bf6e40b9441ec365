"""Shared helpers: run the CLI in-process with fixed width and no colour."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass
from typing import Any

import pytest
from typer.testing import CliRunner

from autogradcli.cli import app
from tests.schemas import validate_text

ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> Any:
        return json.loads(self.stdout)


def cli(*args: str) -> Run:
    """Invoke ``autograd-cli ARGS`` in-process; a single string is split like a shell.
    Every JSON document it prints is validated against the published schema."""
    argv = shlex.split(args[0]) if len(args) == 1 else list(args)
    result = CliRunner(env=ENV).invoke(app, argv)
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise result.exception
    if "--json" in argv:
        validate_text(result.stdout)
    return Run(result.exit_code, result.stdout, result.stderr)


def grad_json(*args: str) -> dict[str, Any]:
    """``autograd-cli grad ARGS --json``, asserting exit code 0."""
    run = cli("grad", *args, "--json")
    assert run.exit_code == 0, (run.stdout, run.stderr)
    return run.json()


@pytest.fixture
def run_cli():
    return cli


@pytest.fixture
def wrong_sin(monkeypatch):
    """``sin`` whose backward returns 2*cos(x): a real autograd error for the checks to catch."""
    import torch

    from autogradcli.lang import vocabulary

    class WrongSin(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, a: torch.Tensor) -> torch.Tensor:
            ctx.save_for_backward(a)
            return torch.sin(a)

        @staticmethod
        def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
            (a,) = ctx.saved_tensors
            return grad * torch.cos(a) * 2

    wrong = vocabulary.Function(
        "sin", torch=lambda t, a: WrongSin.apply(a), sympy=lambda s, a: s.sin(a)
    )
    monkeypatch.setitem(vocabulary.FUNCTIONS, "sin", wrong)
