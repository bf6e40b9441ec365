"""Every example in README.md and docs/ runs, and prints what the page shows."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest

from tests.conftest import cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def _blocks(language: str) -> list[tuple[str, str]]:
    found = []
    for page in PAGES:
        for body in re.findall(rf"```{language}\n(.*?)```", page.read_text(), flags=re.S):
            found.append((page.name, body))
    return found


def _console_examples() -> list[tuple[str, str, str]]:
    examples = []
    for page, body in _blocks("console"):
        for chunk in re.split(r"^(?=\$ )", body, flags=re.M):
            if chunk.startswith("$ autograd-cli "):
                command, _, shown = chunk.partition("\n")
                examples.append((page, command[len("$ autograd-cli ") :], shown.rstrip("\n")))
    return examples


CONSOLE = _console_examples()


@pytest.fixture(autouse=True)
def _auto_device_is_cpu(monkeypatch):
    """The pages show ``--device auto`` on a machine without CUDA (as CI has)."""
    import torch

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


PYTHON = _blocks("python")


def test_the_pages_have_examples():
    assert len(CONSOLE) >= 10 and len(PYTHON) >= 3


@pytest.mark.parametrize(("page", "command", "shown"), CONSOLE, ids=[c for _, c, _ in CONSOLE])
def test_console_example_prints_what_the_page_shows(page, command, shown):
    run = cli(*shlex.split(command))
    printed = "\n".join(
        line.rstrip() for line in (run.stdout + run.stderr).rstrip("\n").split("\n")
    )
    assert printed == shown, f"{page}: output of '{command}' changed"
    error = shown.startswith("Error:") or "\nError: " in shown  # a cell stops after its lines
    unsure = "disagree" in shown or "\n? not checked" in shown
    expected_code = 2 if error else 1 if unsure else 0
    assert run.exit_code == expected_code


@pytest.mark.parametrize(
    ("page", "code"), PYTHON, ids=[f"{p}-{i}" for i, (p, _) in enumerate(PYTHON)]
)
def test_python_example_runs(page, code):
    namespace: dict[str, object] = {"__name__": f"docs_example_{page}"}
    exec(compile(code, page, "exec"), namespace)  # our own docs, not user input


def test_ci_runs_exactly_the_readme_commands():
    readme = (ROOT / "README.md").read_text()
    commands = [b.strip() for _, b in _blocks("sh") if _ == "README.md"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert len(commands) == 2
    for command in commands:
        assert command in ci.splitlines(), command
    assert "pytest" in commands[1] and "autograd-cli grad" in commands[0]
    assert "-c constraints.txt" in readme


def _table_commands() -> list[str]:
    readme = (ROOT / "README.md").read_text()
    return re.findall(r"^\|[^|]*\| `autograd-cli ([^`]*)` \|$", readme, flags=re.M)


TABLE = _table_commands()


def test_the_readme_table_has_one_command_per_lesson():
    assert len(TABLE) >= 17


@pytest.mark.parametrize("command", TABLE)
def test_each_readme_lesson_command_runs(command):
    run = cli(*shlex.split(command))
    if "--same-graph" in command and "--retain-graph" not in command:
        assert run.exit_code == 2  # the lesson is PyTorch's error
        assert run.stderr.startswith("Error: backward pass 2 on the same graph: PyTorch: Trying")
    else:
        assert run.exit_code == 0, run.stderr


def test_the_cli_reference_is_what_the_commands_print():
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "cli_reference", ROOT / "scripts" / "cli_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert (ROOT / "docs" / "cli.md").read_text() == module.page(), (
        "run python scripts/cli_reference.py"
    )


def test_the_site_lists_every_page():
    nav = (ROOT / "mkdocs.yml").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        assert f": {page.name}" in nav, page.name
