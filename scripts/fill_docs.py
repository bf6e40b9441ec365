"""Refresh every ```console block in the given pages with the tool's real output.

Usage: ``python scripts/fill_docs.py README.md docs/*.md``. Runs each ``$ autograd-cli ...`` line
in-process with the tests' settings (COLUMNS=100, NO_COLOR) so that tests/test_docs.py passes,
and redraws the pictures in docs/images/ (scripts/make_pictures.py). The site is styled to hold
100 columns of console output (docs/stylesheets/extra.css; tests/test_docs.py checks both).
"""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.conftest import cli

PROMPT = "$ autograd-cli "


def fill_block(match: re.Match[str]) -> str:
    """Return the console block with each command's output replaced by what it prints now."""
    lines: list[str] = []
    for line in match.group(1).splitlines():
        if line.startswith(PROMPT):
            run = cli(*shlex.split(line[len(PROMPT) :]))
            shown = (run.stdout + run.stderr).rstrip("\n")
            lines.append(line)
            lines.extend(out.rstrip() for out in shown.splitlines())
    return "```console\n" + "\n".join(lines) + "\n```"


def main(paths: list[str]) -> None:
    for path in map(Path, paths):
        text = re.sub(r"```console\n(.*?)```", fill_block, path.read_text(), flags=re.S)
        path.write_text(text)
    # the pictures of real output (Rich's SVG export of the reports, the plots), with them
    from scripts.make_pictures import ROOT, captures, plots

    folder = ROOT / "docs" / "images"
    captures(folder)
    plots(folder)


if __name__ == "__main__":
    main(sys.argv[1:])
