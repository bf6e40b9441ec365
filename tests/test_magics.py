"""The IPython extension: ``%load_ext autogradcli``, ``%%autograd`` and ``%autograd``,
driven through IPython's own test shell."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("IPython")

from IPython.utils.capture import capture_output

from autogradcli.magics import check, words_of

ROOT = Path(__file__).resolve().parent.parent
CELL = """import torch
x = torch.tensor(2.0, requires_grad=True)
y = x**3
y.backward()
print(x.grad)
"""


@pytest.fixture
def ip(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.setenv("COLUMNS", "100")
    from IPython.testing import globalipapp  # half a second: not at collection

    globalipapp.start_ipython()  # IPython's test shell: the first call starts it
    shell = globalipapp.get_ipython()
    shell.run_line_magic("load_ext", "autogradcli")
    shell.user_ns.pop("_autograd", None)
    yield shell
    if hasattr(shell, "kernel"):
        del shell.kernel


def test_the_words_of_a_magic_are_the_command_line():
    assert words_of('"x**2" --x 3') == ["grad", "x**2", "--x", "3"]
    assert words_of('jacobian "x*y" --x 2') == ["jacobian", "x*y", "--x", "2"]
    assert words_of("--dtype float64", CELL) == ["grad", "-", "--dtype", "float64"]


def test_a_cell_magic_checks_the_cell_in_a_terminal(ip):
    with capture_output() as out:
        ip.run_cell_magic("autograd", "--dtype float64", CELL)
    result = ip.user_ns["_autograd"]
    assert result.agree and result.dtype == "float64"
    assert len(result.events) == 2  # the backward() and the print
    assert "x.grad = 12" in out.stdout and "✓ every line agrees with SymPy" in out.stdout
    assert out.stderr == "" and not out.outputs  # Rich text, no HTML display


def test_a_cell_magic_shows_html_in_a_notebook(ip):
    ip.kernel = object()  # what a Jupyter kernel's shell has
    with capture_output() as out:
        ip.run_cell_magic("autograd", "", CELL)
    (shown,) = out.outputs
    assert shown.data["text/html"].startswith("<pre ")
    assert shown.data["text/plain"] == "autograd-cli: agree"
    assert "every line agrees with SymPy" in shown.data["text/html"]
    assert out.stdout == ""


def test_a_line_magic_checks_one_expression(ip):
    with capture_output() as out:
        ip.run_line_magic("autograd", '"2*x**4+x**3+3*x**2+5*x+1" --x 2')
    result = ip.user_ns["_autograd"]
    assert result.grads["x"].tolist() == 93.0 and result.agree
    assert "✓ autograd and SymPy agree" in out.stdout


def test_a_disagreement_is_shown_and_kept(ip, wrong_sin):
    with capture_output() as out:
        ip.run_line_magic("autograd", '"sin(x)" --x 1')
    assert ip.user_ns["_autograd"].verdict == "disagree"
    assert "✗ autograd and SymPy disagree" in out.stdout


def test_bad_options_are_the_command_lines_error_line(ip):
    with capture_output() as out:
        ip.run_cell_magic("autograd", "--dtype float65", CELL)
    assert "_autograd" not in ip.user_ns
    assert out.stdout == ""
    assert out.stderr.startswith("Error: ") and "float65" in out.stderr
    assert check("--x '1", None) == (
        None,
        2,
        "Error: the magic's options cannot be read: No closing quotation\n",
    )


def test_a_cell_that_stops_shows_what_ran_and_the_error(ip):
    cell = "import torch\nx = torch.tensor(2.0, requires_grad=True)\nx.grad.zero_()\n"
    cell += "(x*x).backward()\n"
    result, code, errors = check("", cell)
    assert code == 2 and result is not None and result.error is not None
    assert errors.startswith("Error: 'x.grad.zero_()': the .grad is None here")


def _ipython_blocks() -> list[str]:
    import re

    page = (ROOT / "docs" / "shell.md").read_text()
    return re.findall(r"```ipython\n(.*?)```", page, flags=re.S)


def test_the_docs_magic_examples_run(ip):
    blocks = _ipython_blocks()
    assert len(blocks) == 3 and blocks[0] == "%load_ext autogradcli\n"
    for block in blocks:
        with capture_output() as out:
            ip.run_cell(block)
        assert "Error" not in out.stderr and "Traceback" not in out.stdout, block
        if block.startswith("%%autograd") or block.startswith("%autograd"):
            assert ip.user_ns["_autograd"].agree, block
    assert ip.user_ns["_autograd"].to_dict()["command"] == "jacobian"
