"""Shared helpers: run the CLI in-process with fixed width and no colour."""

from __future__ import annotations

import atexit
import dataclasses
import functools
import gc
import json
import os
import shlex
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
import typer.testing
from hypothesis import settings
from typer.testing import CliRunner

from autogradcli.cli import app
from tests.schemas import validate, validate_text

os.environ["AUTOGRAD_CLI_NO_WORKER"] = "1"  # no test starts or uses a real warm worker
# One torch thread (set before torch loads; child processes inherit it): the suite's tensors
# are small and its machine's cores are shared, and OpenMP/MKL threads that spin waiting for
# a busy core made the numeric fallback's 11,000 tiny matmuls of one test take 90 s, not 2.5 s.
for _threads in ("OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_threads, "1")
# Hypothesis: the same examples on every run (derived from each test, no example database)
# unless AUTOGRAD_CLI_LONG=1 asks for the long, random profile; a test's own settings win.
settings.register_profile(
    "suite", derandomize=os.environ.get("AUTOGRAD_CLI_LONG") != "1", database=None
)
settings.load_profile("suite")
# At exit, everything the run made is moved out of the cycle collector's sight: the
# interpreter's last collections would walk a heap of SymPy and torch objects the process
# is about to drop (seconds at the end of an xdist worker, which the run waits on). An
# atexit handler: after pytest's own cleanup, which collects to find unraisable errors.
atexit.register(gc.freeze)
ENV = {"NO_COLOR": "1", "COLUMNS": "100", "TERM": "dumb"}
try:  # Click before 8.2 mixes stderr into stdout unless asked not to
    RUNNER = CliRunner(env=ENV, mix_stderr=False)  # type: ignore[call-arg]
except TypeError:
    RUNNER = CliRunner(env=ENV)

# Typer's runner builds the app's Click group on every invoke (about 40 ms, a quarter of a
# small command's run). The suite builds it once, as cli/lines.group() does for the shell
# and check: a command registered later is found by the group itself. Another app, or a
# build where Typer's own _TYPER_* variables are set (it reads them as it builds), is built
# as before; so does every build where Typer has no such function (another version).
_BUILD = getattr(typer.testing, "_get_command", None)


def _built_once(instance: typer.Typer) -> Any:
    if instance is app and not any(k.startswith("_TYPER") for k in os.environ):
        return _BUILT
    return _BUILD(instance)  # type: ignore[misc]


if _BUILD is not None:
    _BUILT = _BUILD(app)
    typer.testing._get_command = _built_once


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
    result = RUNNER.invoke(app, argv, prog_name="autograd-cli")
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


def largest_array(value: Any) -> int:
    """The most elements of any array in a result (its dataclasses, dicts and tuples)."""
    if isinstance(value, np.ndarray):
        return value.size
    if dataclasses.is_dataclass(value):
        value = [getattr(value, f.name) for f in dataclasses.fields(value)]
    elif isinstance(value, dict):
        value = list(value.values())
    if isinstance(value, list | tuple):
        return max((largest_array(v) for v in value), default=0)
    return 0


# The order the suite runs in (issue 24). ``pytest -n 2 --dist worksteal`` gives each of its
# two processes one half of the collected tests, in order, and a process that has run out
# takes the last half of the other's queue. Collected alphabetically, the modules of long
# tests that build a module-scoped fixture (test_worker's worker, test_tutorials' run of the
# tutorial) came last: a process that had run out took part of them and built the fixture a
# second time, and the run ended waiting on a long test. Here the modules of the longest
# tests (their seconds in a run of the whole suite) go first, some at the head of each half:
# they run early and whole, and the run ends with short tests that even out the two halves.
# Within a module the order is the file's (test_oracles' closing test runs last).
FIRST_HALF = ("test_docs", "test_oracles", "test_opinfo", "test_fallback", "test_limits_growth")
SECOND_HALF = ("test_worker", "test_tutorials", "test_time_limits", "test_plot", "test_cli")


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection loaded (torch, SymPy, the test modules: objects that live as long as
    the run) is moved out of the cycle collector's sight, as the warm worker does after its
    warm-up: each full collection then walks only what the tests made (the suite's full
    collections took about half the time in a measurement of four modules)."""
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``FIRST_HALF``'s modules, then other tests up to half of them, then ``SECOND_HALF``'s
    modules, then the rest; the collected order otherwise."""
    first = [item for item in items if item.path.stem in FIRST_HALF]
    second = [item for item in items if item.path.stem in SECOND_HALF]
    rest = [item for item in items if item.path.stem not in FIRST_HALF + SECOND_HALF]
    fill = max(0, len(items) // 2 - len(first))
    items[:] = first + rest[:fill] + second + rest[fill:]


@pytest.fixture(autouse=True, scope="session")
def _every_result_matches_its_schema():
    """Every result the API returns in any test is validated as its ``to_dict()`` document
    (the CLI's ``--json``), so the schemas cover every case the suite runs."""
    import importlib

    from autogradcli import COMMANDS

    where = [c.function.partition(":") for c in COMMANDS.values() if c.function is not None]
    originals = {
        (module, name): getattr(importlib.import_module(module), name) for module, _, name in where
    }

    def checked(function: Any) -> Any:
        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            result = function(*args, **kwargs)
            if largest_array(result) <= 10_000:  # the schema costs per element
                validate(result.to_dict())
            return result

        return call

    for (module, name), function in originals.items():
        setattr(importlib.import_module(module), name, checked(function))
    yield
    for (module, name), function in originals.items():
        setattr(importlib.import_module(module), name, function)


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

    wrong = dataclasses.replace(vocabulary.OPS["sin"], torch=lambda t, a: WrongSin.apply(a))
    monkeypatch.setitem(vocabulary.OPS, "sin", wrong)
