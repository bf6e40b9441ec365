"""One memory budget for a run (issue 25): every input, every pass and every reference
array counted together, estimated before anything is allocated, and refused past it with
one ``Error:`` line naming the budget, the estimate and ``--memory``.

The last test runs one real process and reads its peak resident set (``ru_maxrss``): a
refused run loads no torch and allocates nothing big, and a run within its budget stays
within it plus the documented margin (``docs/trust.md``, "Memory") above the same
command's peak on two-element inputs (the interpreter, torch and SymPy, which no budget
can shrink). Everything else runs in-process through the Python API and ``cli``.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
import tracemalloc
import zipfile
from pathlib import Path

import pytest

import autogradcli as ag
from autogradcli.bind import bind
from autogradcli.errors import LimitError, OptionError
from autogradcli.footprint import grad_printed, run_bytes
from autogradcli.memory import JSON_PER_ELEMENT, PRINTED, option_text, parse_memory, size_text
from autogradcli.render.json import dumps
from autogradcli.settings import Limits, Settings
from tests.conftest import cli

MIB = 2**20


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("4G", 4 * 2**30),
        ("512M", 512 * MIB),
        ("1.5GiB", 3 * 2**29),
        ("64mb", 64 * MIB),
        ("100000", 100_000),
        (" 2k ", 2048),
        ("1T", 2**40),
    ],
)
def test_a_budget_is_bytes_with_binary_suffixes(text, size):
    assert parse_memory(text) == size
    assert Limits(memory=text).memory == size


def test_the_default_budget_is_4_gib_and_a_bad_one_is_refused():
    assert Limits().memory == 4 * 2**30
    for bad in ("4X", "", "-1G", "0", "G", "nan"):
        with pytest.raises(OptionError):
            parse_memory(bad)
    run = cli("grad", "x*2", "--x", "1", "--memory", "4X")
    assert (run.exit_code, run.stdout) == (2, "")
    assert run.stderr == (
        "Error: --memory takes a size in bytes such as 512M or 4G (K, M, G, T: powers of "
        "1024), not '4X'\n"
    )


def test_every_pass_counts_and_a_run_past_the_budget_is_refused_before_it_starts():
    settings = Settings(limits=Limits(memory=32 * MIB))
    bound = bind("sum(x*x)", {"x": "ones(100000)"}, settings)
    one, many = run_bytes(bound, passes=1), run_bytes(bound, passes=10_000)
    assert one < 32 * MIB < many
    # each pass before the last keeps its .grad (4 bytes in float32) and its expected
    # multiple (8 bytes in float64): 12 bytes per element
    assert run_bytes(bound, passes=3) - run_bytes(bound, passes=2) == 12 * 100_000
    run = cli("grad", "sum(x*x)", "--x", "ones(100000)", "--repeat", "10000", "--memory", "32M")
    assert (run.exit_code, run.stdout) == (2, "")
    assert run.stderr == (
        f"Error: grad (10000 passes) on 100000 input elements would need about "
        f"{size_text(many)} of memory, more than the budget of 32 MiB; raise it with "
        f"--memory {option_text(many * 1.25)} or give smaller inputs\n"
    )
    assert ag.grad("sum(x*x)", x="ones(100000)", memory="32M").verdict == "agree"


@pytest.mark.parametrize(
    ("command", "expression", "keywords", "what"),
    [
        ("grad", "sum(x*x)", {"repeat": 10_000}, "grad (10000 passes)"),
        ("jacobian", "x*2", {}, "the Jacobian"),
        ("jvp", "x*2", {}, "the Jacobian-vector product"),
        ("hessian", "sum(x*x)", {}, "the Hessian"),
        ("derivative", "x*x", {"order": 8}, "the derivative of order 8"),
    ],
)
def test_a_refusal_comes_before_torch_and_sympy_load(
    monkeypatch, command, expression, keywords, what
):
    import autogradcli.api

    def no_loading() -> None:
        raise AssertionError("the refused run went on to load torch and SymPy")

    monkeypatch.setattr(autogradcli.api, "loading", no_loading)
    with pytest.raises(LimitError) as caught:
        getattr(ag, command)(expression, x="ones(300)", memory="64K", **keywords)
    assert str(caught.value).startswith(f"{what} on 300 input elements would need about ")


def test_json_output_counts_its_arrays(monkeypatch):
    bound = bind("sum(x*x)", {"x": "ones(100000)"}, Settings())
    printed = grad_printed(bound)  # x's value; .grad, expected, numeric, suggested; a pass's 2
    assert printed == 4 + 7 * 100_000
    plain = run_bytes(bound, printed=printed)  # the Rich report and the API print no arrays
    token = PRINTED.set(JSON_PER_ELEMENT)
    try:
        assert run_bytes(bound, printed=printed) == plain + printed * JSON_PER_ELEMENT
    finally:
        PRINTED.reset(token)
    assert plain < 40 * MIB < plain + printed * JSON_PER_ELEMENT
    args = ("grad", "sum(x*x)", "--x", "ones(100000)", "--memory", "40M")
    refused = cli(*args, "--json")
    message = (
        "grad (1 pass) on 100000 input elements would need about 79.7 MiB of memory, more "
        "than the budget of 40 MiB; raise it with --memory 100M or give smaller inputs"
    )
    assert (refused.exit_code, refused.stderr) == (2, f"Error: {message}\n")
    assert refused.json()["error"]["message"] == message
    assert cli(*args).exit_code == 0  # the same run, printed as a report, fits


def test_the_json_count_covers_what_printing_allocates():
    n = 5_000
    values = {"x": f"linspace(0.5, 1, {n})", "y": f"linspace(1, 2, {n})"}
    result = ag.grad("sum(x*y)", values, repeat=2)
    tracemalloc.start()
    try:
        document = dumps(result.to_dict())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(json.loads(document)["passes"]) == 2
    counted = grad_printed(bind("sum(x*y)", values, Settings()), repeat=2) * JSON_PER_ELEMENT
    # 14 arrays printed of the 18 counted (no numeric check, no suggestion): about 81 bytes
    # per element at the peak, against 96 counted
    assert counted / 2 < peak <= counted


def test_inputs_are_counted_together_not_each_against_the_cap():
    settings = Settings(limits=Limits(memory=20 * MIB))
    values = {n: "ones(1000000)" for n in "abc"}
    bind("sum(a)", {"a": values["a"]}, settings)  # one of them fits
    with pytest.raises(LimitError) as caught:
        bind("sum(a + b + c)", values, settings)
    assert str(caught.value) == (
        "the inputs with a value of shape [1000000] would need about 22.9 MiB of memory, "
        'more than the budget of 20 MiB; raise it with memory="29M" or give smaller inputs'
    )
    assert caught.value.data["budget_bytes"] == 20 * MIB


def test_a_long_literal_is_counted_before_it_is_parsed(monkeypatch):
    numbers = ", ".join(["1.5"] * 3000)
    cell = f"x = torch.tensor([{numbers}])\nout = sum(x*x)"
    limits = Limits(max_length=len(cell) + 1, max_elements=1000)

    parse = ast.parse

    def short_only(text: str, *args: object, **kwargs: object) -> ast.AST:
        assert len(text) < 1000, "the long text was parsed before the element check"
        return parse(text, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", short_only)
    message = (
        "a list in the text holds more than 1000 numbers, the limit of elements (raise it "
        "with Limits.max_elements, or give the values in a file: @data.npy)"
    )
    with pytest.raises(LimitError) as caught:
        bind(cell, {}, Settings(limits=limits))
    assert str(caught.value) == message
    with pytest.raises(LimitError) as caught:
        bind("sum(x)", {"x": f"[{numbers}]"}, Settings(limits=limits))
    assert str(caught.value) == message


def test_parsing_long_value_text_counts_against_the_budget():
    text = "[" + ", ".join(["1.5"] * 50_000) + "]"  # 250,000 characters
    with pytest.raises(LimitError) as caught:
        ag.grad("sum(x)", x=text, memory="64M")
    assert str(caught.value) == (
        "parsing the value (250000 characters) would need about 143 MiB of memory, more "
        'than the budget of 64 MiB; raise it with memory="179M" or give smaller inputs'
    )
    assert ag.grad("sum(x)", x=text, memory="256M").verdict == "agree"


def test_a_pt_bomb_is_refused_from_its_directory_without_loading(tmp_path, monkeypatch):
    import torch

    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb/data.pkl", b"")
        archive.writestr("bomb/data/0", b"\0" * 8_001)
    assert path.stat().st_size < 1000

    def no_load(*args: object, **kwargs: object) -> None:
        raise AssertionError("torch.load ran")

    monkeypatch.setattr(torch, "load", no_load)
    run = cli("grad", "sum(x)", "--x", f"@{path}", "--max-elements", "1000")
    assert (run.exit_code, run.stderr) == (
        2,
        f"Error: '@{path}' holds 8001 bytes of tensor data, more than a tensor of 1000 "
        "elements needs at 8 bytes each (raise it with --max-elements)\n",
    )
    run = cli("grad", "sum(x)", "--x", f"@{path}", "--memory", "4K")
    assert run.exit_code == 2
    assert run.stderr.startswith(f"Error: unpacking '@{path}' would need about 7.81 KiB")


def test_a_real_pt_file_counts_its_float64_copy(tmp_path):
    import torch

    path = tmp_path / "x.pt"
    torch.save(torch.ones(100_000), path)
    assert ag.grad("sum(x)", x=f"@{path}", memory="64M").verdict == "agree"
    with pytest.raises(LimitError, match=r"would need about 1\.14 MiB"):
        ag.grad("sum(x)", x=f"@{path}", memory="1M")


# --- the peak resident set of one real process ----------------------------------------------

CHILD = """
import json, resource, sys
from autogradcli.cli.app import app

def run(*args):
    try:
        app([*args, "--quiet"])
    except SystemExit as exc:
        code = exc.code
    else:
        code = 0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return {"code": code, "peak": peak, "torch": "torch" in sys.modules}

n, budget, expression = int(sys.argv[1]), sys.argv[2], "sum(exp(x)*x)"
warm = run("grad", expression, "--x", "ones(2)", "--repeat", "10000", "--memory", "1K")
refused = run("grad", expression, "--x", f"ones({n})", "--repeat", "400", "--memory", budget)
base = run("grad", expression, "--x", "linspace(0, 1, 2)", "--repeat", "8")
within = run("grad", expression, "--x", f"linspace(0, 1, {n})", "--repeat", "8", "--memory", budget)
sys.stderr.write("\\nruns " + json.dumps([warm, refused, base, within]) + "\\n")
"""
MARGIN = 32 * MIB  # docs/trust.md, "Memory"


def test_a_run_stays_within_its_budget_and_a_larger_one_is_refused_first():
    """One process, four runs of ``autograd-cli grad``: a refused one that loads the CLI's
    modules, a refused one past the budget, then (torch and SymPy loaded) the same command
    on two elements, the base, and on ``n`` within the budget. The peak only grows, so each
    run is measured as its growth over the peak before it."""
    budget, n = 48 * MIB, 100_000
    settings = Settings(limits=Limits(memory=budget))
    bound = bind("sum(exp(x)*x)", {"x": f"linspace(0, 1, {n})"}, settings)
    assert run_bytes(bound, passes=8) <= budget < run_bytes(bound, passes=400)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "100"}
    done = subprocess.run(
        [sys.executable, "-c", CHILD, str(n), "48M"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=Path(__file__).resolve().parents[1],
        env=env,
    )
    head, _, tail = done.stderr.rpartition("\nruns ")
    warm, refused, base, within = json.loads(tail)
    assert [r["code"] for r in (warm, refused, base, within)] == [2, 2, 0, 0], head
    assert f"Error: grad (400 passes) on {n} input elements would need about" in head
    assert not refused["torch"]  # refused from the input sizes, before torch loads
    assert refused["peak"] - warm["peak"] <= MARGIN  # nothing but the input (0.8 MB)
    assert within["peak"] - base["peak"] <= budget + MARGIN
