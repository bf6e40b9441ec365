"""Write docs/cli.md, the CLI reference, from the Typer app itself (every command's help).

Usage: ``python scripts/cli_reference.py`` (``--check`` exits 1 when docs/cli.md differs).
tests/test_docs.py checks that the committed page is what this script writes, so the
reference cannot drift from the options the commands really take.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
PAGE = ROOT / "docs" / "cli.md"


def help_of(words: list[str]) -> str:
    """What ``autograd-cli WORDS --help`` prints at 80 columns."""
    os.environ["COLUMNS"] = "80"
    from typer.testing import CliRunner

    from autogradcli.cli.app import app

    result = CliRunner().invoke(
        app, [*words, "--help"], prog_name="autograd-cli", env={"COLUMNS": "80"}
    )
    return "\n".join(line.rstrip() for line in result.output.rstrip().splitlines())


def page() -> str:
    from typer.main import get_command

    from autogradcli.cli.app import app

    commands = list(get_command(app).commands)  # type: ignore[attr-defined]
    parts = [
        "# CLI reference",
        "",
        "Generated from the commands themselves by `scripts/cli_reference.py`; a test keeps it",
        "equal to what `autograd-cli COMMAND --help` prints.",
        "",
        "```text",
        help_of([]),
        "```",
    ]
    for name in commands:
        parts += ["", f"## autograd-cli {name}", "", "```text", help_of([name]), "```"]
    return "\n".join(parts) + "\n"


if __name__ == "__main__":
    text = page()
    if "--check" in sys.argv:
        sys.exit(0 if PAGE.read_text() == text else 1)
    PAGE.write_text(text)
