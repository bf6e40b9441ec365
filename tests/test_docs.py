"""Every example in README.md and docs/ runs, and prints what the page shows."""

from __future__ import annotations

import doctest
import importlib
import re
import shlex
from pathlib import Path

import pytest
from rich.cells import cell_len

from tests.conftest import ENV, cli

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]


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
    readme = README.read_text()
    commands = [b.strip() for _, b in _blocks("sh") if _ == "README.md"]
    ci = (ROOT / ".ci" / "run").read_text()
    assert len(commands) == 2
    for command in commands:
        assert command in ci.splitlines(), command
    assert "pytest" in commands[1] and "autograd-cli grad" in commands[0]
    assert "-c constraints.txt" in readme
    for heading, command in zip(["Install and run", "Test"], commands, strict=True):
        section = readme.partition(f"\n## {heading}\n")[2].partition("\n## ")[0]
        assert command in section and f'# README "{heading}"\n{command}\n' in ci, heading
    # the site's install and test lines are the same two
    index = (ROOT / "docs" / "index.md").read_text()
    assert all(f"```shell\n{command}\n```" in index for command in commands)


def _lessons() -> list[str]:
    """The command cell of each row of the notebook lessons table (docs/index.md)."""
    page = (ROOT / "docs" / "index.md").read_text()
    table = page.partition("| notebook lesson | command |\n| --- | --- |\n")[2]
    rows = table[: table.find("\n\n")].splitlines()
    return [row.rsplit(" | ", 1)[1].removesuffix(" |") for row in rows]


LESSONS = _lessons()
TABLE = [cell.removeprefix("`autograd-cli ").removesuffix("`") for cell in LESSONS]


def test_the_lessons_table_has_one_whole_command_per_lesson():
    assert len(LESSONS) >= 20
    for cell in LESSONS:  # each can be pasted: no `...` standing for an earlier command
        assert re.fullmatch(r"`autograd-cli (grad|graph|jacobian|hessian) [^`]+`", cell), cell


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


# --- the README: what it is, the install, one example, what else, the tests, the licence ---


def test_the_readme_reads_in_two_minutes():
    text = README.read_text()
    assert len(text.splitlines()) <= 120
    headings = re.findall(r"^## (.+)$", text, flags=re.M)
    assert headings == ["Install and run", "What else it does", "Documentation", "Test", "License"]
    assert len(_blocks_of(text, "console")) == 1  # one example, with its real output
    for named in ("grad", "jacobian", "hessian", "jvp", "graph", "plot", "check", "shell"):
        assert f"**`{named}" in text, named  # every command in the list
    assert "%%autograd" in text and "(docs/api.md)" in text
    assert "--index-url https://download.pytorch.org/whl/cpu" in text  # the CPU wheel, one line
    assert "MIT" in text and (ROOT / "LICENSE").read_text().startswith("MIT License")


def _blocks_of(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.S)


def _headings(page: Path) -> set[str]:
    """The anchors MkDocs (and GitHub) make of a page's headings."""
    from pymdownx.slugs import slugify

    slug = slugify(case="lower")
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
    return {slug(h.replace("`", ""), "-") for h in re.findall(r"^#+ (.+)$", text, flags=re.M)}


def test_the_readme_links_are_not_broken():
    links = re.findall(r"\]\(([^)]+)\)", README.read_text())
    assert len(links) >= 10
    for link in links:
        if link.startswith("https://"):
            continue
        path, _, anchor = link.partition("#")
        target = ROOT / path
        assert target.exists(), link
        if anchor:
            assert anchor in _headings(target), link


# --- the site -------------------------------------------------------------------------------

COLUMNS = int(ENV["COLUMNS"])  # the width the console blocks are drawn at (fill_docs.py)


def test_console_blocks_fit_the_site():
    """Every line that draws a table fits COLUMNS, and docs/stylesheets/extra.css gives the
    content column room for COLUMNS of code on screens that hold its grid; longer lines are
    plain text (an error message, JSON), which the CSS wraps there."""
    for page, body in _blocks("console"):
        for line in body.splitlines():
            if re.search("[\u2500-\u257f]", line):
                assert cell_len(line) <= COLUMNS, (page, line)
    assert "extra_css:\n  - stylesheets/extra.css\n" in (ROOT / "mkdocs.yml").read_text()
    css = (ROOT / "docs" / "stylesheets" / "extra.css").read_text()
    grid = float(re.search(r"\.md-grid \{\s*max-width: ([\d.]+)rem;", css)[1])
    # Material 9: two 12.1rem sidebars, 1.2rem margins, code at 0.8rem * 0.85 with 1.1765em
    # padding each side; 0.62em per character is wider than the fonts extra.css names
    code = 0.8 * 0.85
    assert COLUMNS * 0.62 * code + 2 * 1.1765 * code <= grid - 2 * 12.1 - 2 * 1.2
    wrap = re.search(
        r"min-width: ([\d.]+)em\) \{\s*\.md-typeset \.language-console pre > code \{"
        r"\s*white-space: pre-wrap;",
        css,
    )
    assert wrap is not None
    # lines wrap only where the whole grid fits (Material's root font: 20px, 22px from 100em,
    # 24px from 125em), so a table line never wraps
    assert grid * 20 <= float(wrap[1]) * 16 and grid * 22 <= 100 * 16 and grid * 24 <= 125 * 16


def _documented() -> list[str]:
    return re.findall(r"^::: ([\w.]+)$", (ROOT / "docs" / "api.md").read_text(), flags=re.M)


@pytest.mark.parametrize("name", _documented())
def test_the_api_reference_examples_run(name):
    module, _, attribute = name.rpartition(".")
    target = getattr(importlib.import_module(module), attribute)
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    for test in doctest.DocTestFinder().find(target, name, globs={}):
        runner.run(test)
    assert runner.failures == 0, name


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site built once, as ``mkdocs build --strict`` builds it (any warning fails)."""
    pytest.importorskip("material")
    pytest.importorskip("mkdocstrings_handlers.python")
    from mkdocs.commands.build import build
    from mkdocs.config import load_config

    folder = tmp_path_factory.mktemp("site")
    build(load_config(str(ROOT / "mkdocs.yml"), site_dir=str(folder)))
    return folder


def test_the_site_opens_from_disk(site):
    index = (site / "index.html").read_text()
    for page in sorted((ROOT / "docs").glob("*.md")):
        name = "index" if page.stem == "index" else page.stem
        assert (site / f"{name}.html").exists(), page.name  # no folder/index.html
        assert f'href="{name}.html"' in index, page.name  # the navigation opens files
        assert 'href="stylesheets/extra.css"' in (site / f"{name}.html").read_text()
    assert (site / "search" / "search_index.js").exists()  # search without fetch()
    assert '<div class="language-console highlight">' in index  # what extra.css styles


def test_the_api_page_shows_examples_as_code_and_no_internal_names(site):
    page = (site / "api.html").read_text()
    reference = page[page.index('id="reference"') :]
    assert "<blockquote>" not in reference and "<strong>" not in reference
    example = '<span class="gp">&gt;&gt;&gt; </span><span class="n">r</span>'
    assert example in reference  # the doctest as highlighted Python
    assert "Bases:" not in page and ".py)" not in page and "autogradcli.api.grad(" not in page
