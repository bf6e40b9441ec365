"""The command registry: every list of commands is derived from it, `jvp` and `plot` work
everywhere `grad` does, and a command added through it shows up in the API, the CLI, the
shell and `check`, and goes away when it is removed."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import autogradcli as ag
from autogradcli import COMMANDS, Command, case_commands, line_commands, register, unregister
from autogradcli.cli.batch import Case, run_case
from autogradcli.cli.shell import Completer, Shell, run_lines
from autogradcli.messages import cause_text
from autogradcli.policy.verdict import CAUSES, VERDICTS, Cause, Verdict, passes, worst
from autogradcli.results import Rendered
from tests.conftest import cli
from tests.schemas import KINDS

# --- a throwaway command: a core function, a renderer, an entry -------------------------------


@dataclass(frozen=True)
class Doubled(Rendered):
    """The throwaway command's result."""

    expression: str
    value: float

    @property
    def agree(self) -> bool:
        return True

    def to_dict(self, style: Any = None) -> dict[str, Any]:
        return {"command": "double", "expression": self.expression, "value": self.value}


def double(expression: str, values: Any = None, **keywords: Any) -> Doubled:
    """Twice the (one) value given."""
    given = {
        **(values or {}),
        **{k: v for k, v in keywords.items() if k not in ("settings", "const")},
    }
    return Doubled(expression, 2 * float(next(iter(given.values()))))


def render_doubled(result: Doubled, style: Any = None) -> str:
    return f"twice: {result.value:g}"


@pytest.fixture
def doubled():
    entry = register(
        Command(
            "double",
            f"{__name__}:double",
            "Twice the value (a throwaway command of the registry test).",
            results=((f"{__name__}:Doubled", f"{__name__}:render_doubled"),),
        )
    )
    yield entry
    unregister("double")


def test_a_command_added_through_the_registry_is_everywhere(doubled, capsys):
    assert ag.double("x", x=3).value == 6.0 and "double" in dir(ag)
    run = cli("double", "--help")
    assert run.exit_code == 0 and "Twice the value" in run.stdout
    assert "double" in cli("--help").stdout
    run = cli("double", "x", "--x", "4")
    assert (run.exit_code, run.stdout.strip()) == (0, "twice: 8")
    assert "double" in line_commands() and "double" in case_commands()
    assert run_lines(["double x --x 5"]) == 0
    assert "twice: 10" in capsys.readouterr().out
    done = run_case(Case(1, '{"command": "double", "expression": "x", "values": {"x": 2}}'))
    assert (done.exit_code, done.document) == (
        0,
        {"command": "double", "expression": "x", "value": 4.0},
    )
    assert run_case(Case(2, "double x --x 1")).exit_code == 0


def test_a_removed_command_is_gone(doubled):
    unregister("double")
    assert "double" not in line_commands() and "double" not in dir(ag)
    with pytest.raises(AttributeError):
        ag.double  # noqa: B018
    assert cli("double", "x", "--x", "1").exit_code == 2
    done = run_case(Case(1, "double x --x 1"))
    assert done.exit_code == 2 and "a line starts with a command (grad, jacobian, jvp" in done.error


# --- a throwaway function: one entry in the table, every stage following ---------------------


@pytest.fixture
def cube():
    """``cube(x)``, added to the vocabulary's table as one ``Op`` and taken out after."""
    from autogradcli.lang import vocabulary
    from autogradcli.lang.ops import Op

    entry = vocabulary.add(
        Op(
            "cube",
            torch=lambda torch, a: torch.pow(a, 3),
            sympy=lambda sp, a: a**3,
            spelled=("bare", "torch", "Tensor"),
            note="x**3",
        )
    )
    yield entry
    vocabulary.remove("cube")


def test_a_function_added_to_the_table_works_end_to_end(cube):
    from autogradcli.lang.parser import parse_expression
    from autogradcli.lang.text import unparse
    from autogradcli.lang.vocabulary import BARE, SPELLINGS, function_names

    assert {"cube", "torch.cube", "Tensor.cube"} <= set(SPELLINGS) and "cube" in BARE
    assert function_names()[-1] == "cube"
    assert unparse(parse_expression("x.cube() + torch.cube(y)").root) == "cube(x) + cube(y)"
    result = ag.grad("sum(cube(x))", x=[1.0, -2.0], dtype="float64")
    assert result.output == -7.0 and result.grads["x"].tolist() == [3.0, 12.0]  # torch
    assert result.variables["x"].derivative == "3*x**2"  # SymPy's diff of the entry's form
    assert result.variables["x"].expected.tolist() == [3.0, 12.0]
    assert (result.expected_by, result.verdict) == ("SymPy", "agree")
    assert ag.hessian("cube(x)", x=2.0).blocks[0].expected.tolist() == 12.0
    run = cli("grad", "cube(x)", "--x", "2")
    assert run.exit_code == 0 and "3*x**2" in run.stdout
    assert "✓ autograd and SymPy agree" in run.stdout


def test_a_function_whose_torch_side_is_wrong_is_caught_and_a_removed_one_is_unknown(cube):
    from autogradcli.lang import vocabulary
    from autogradcli.lang.ops import Op

    vocabulary.add(Op("twisted", torch=lambda torch, a: a**3, sympy=lambda sp, a: a**3 + a))
    try:
        assert ag.grad("twisted(x)", x=2.0).verdict == "disagree"
        assert cli("grad", "twisted(x)", "--x", "2").exit_code == 1
        with pytest.raises(ValueError, match="already holds an operation named 'cube'"):
            vocabulary.add(cube)
    finally:
        vocabulary.remove("twisted")
    run = cli("grad", "twisted(x)", "--x", "2")
    assert (run.exit_code, run.stderr) == (
        2,
        "Error: unknown function 'twisted' (autograd-cli grad --help lists the functions)\n",
    )
    assert "twisted" not in vocabulary.SPELLINGS and "twisted" not in vocabulary.BARE


# --- the lists derived from it ----------------------------------------------------------------


def test_every_list_comes_from_the_registry():
    exported = {c.api_name for c in COMMANDS.values() if c.function is not None}
    assert exported <= set(ag.__all__) and "plot" in ag.__all__
    assert line_commands() == ("grad", "jacobian", "jvp", "hessian", "graph", "plot")
    assert set(case_commands()) == {
        "grad",
        "jacobian",
        "jvp",
        "hessian",
        "derivative",
        "graph",
        "plot",
    }
    assert {kind: schema for c in COMMANDS.values() for kind, schema in c.documents} == KINDS
    help_text = cli("--help").stdout
    assert all(f"  {name} " in help_text for name, c in COMMANDS.items() if c.cli != "")


def test_jvp_and_plot_in_the_shell_and_check(capsys):
    assert (
        run_lines(['jvp "x*y" --x 2 --y 3 --tangent x=1', 'plot "x**2" --x -1:1 --points 5']) == 0
    )
    out = capsys.readouterr().out
    assert "✓ autograd and SymPy agree at the 5 points" in out
    line = run_case(Case(1, 'jvp "x*y" --x 2 --y 3 --tangent x=1'))
    assert line.exit_code == 0 and line.document["command"] == "jvp"
    case = run_case(
        Case(
            2,
            json.dumps(
                {"command": "plot", "expression": "x*abs(x)", "values": {"x": "-1:1"}, "points": 5}
            ),
        )
    )
    assert case.exit_code == 0 and case.document["command"] == "plot"
    assert case.document["autograd"] == [2.0, 1.0, 0.0, 1.0, 2.0]
    case = run_case(
        Case(
            3,
            json.dumps(
                {
                    "command": "jvp",
                    "expression": "x*y",
                    "values": {"x": 2, "y": 3},
                    "tangents": {"x": 1},
                }
            ),
        )
    )
    assert case.exit_code == 0 and case.document["blocks"]


def test_the_shell_completes_every_line_command():
    from prompt_toolkit.document import Document

    found = {c.text for c in Completer(Shell()).get_completions(Document(""), None)}
    assert set(line_commands()) <= found


def test_ag_plot_returns_a_result_that_renders():
    import io

    from rich.console import Console

    r = ag.plot("x*abs(x)", x="-1:1", points=5)
    assert r.autograd.tolist() == [2.0, 1.0, 0.0, 1.0, 2.0] and r.verdict == "agree"
    console = Console(file=io.StringIO(), width=100)
    console.print(r)
    assert "✓ autograd and SymPy agree at the 5 points" in console.file.getvalue()
    assert "<pre" in r._repr_html_()
    assert ag.plot("exp(a*x)", {"a": 0.5}, wrt="x", span=(0, 1), points=3).fixed == {"a": "0.5"}


def test_every_result_renders_through_rich():
    import io

    from rich.console import Console

    results = [
        ag.grad("x**2", x=2),
        ag.grad("x = torch.tensor(2.0, requires_grad=True); y = x*x; y.backward(); print(x.grad)"),
        ag.jacobian("x*x", x=[1.0, 2.0]),
        ag.jvp("x*x", x=[1.0, 2.0]),
        ag.hessian("x**3", x=2),
        ag.derivative("sin(x)", x=1, order=3),
        ag.backward_graph("x*x", x=2),
        ag.plot("x**2", x="0:1", points=3),
    ]
    for result in results:
        console = Console(file=io.StringIO(), width=100)
        console.print(result)
        assert console.file.getvalue().strip()


def test_an_unknown_result_is_an_error():
    from autogradcli.render import renderable

    @dataclass(frozen=True)
    class Stranger(Rendered):
        value: int = 1

    with pytest.raises(TypeError, match="no renderer is registered for Stranger"):
        renderable(Stranger())


# --- the verdict -------------------------------------------------------------------------------


def test_the_verdict_is_one_str_enum():
    assert [v.mark for v in Verdict] == ["✓", "≈", "?", "✗"]
    assert (
        tuple(Verdict) == VERDICTS
        and Verdict.AGREE == "agree"
        and f"{Verdict.ROUNDING}" == "rounding"
    )
    assert json.dumps({"v": Verdict.DISAGREE}) == '{"v": "disagree"}'
    assert Verdict.worst(["agree", None, "rounding"]) is Verdict.ROUNDING is worst(["rounding"])
    assert Verdict.ROUNDING.passes() and not Verdict.ROUNDING.passes(strict=True)
    assert passes("agree", True) and [v.rank for v in Verdict] == [0, 1, 2, 3]


def test_every_result_uses_one_rule_for_agree():
    strict = ag.grad("x**2", x=2, strict=True)
    assert strict.agree is passes(strict.verdict, True)
    blocks = ag.jacobian("x*x", x=[1.0, 2.0])
    assert all(b.agree is (b.verdict != "disagree") for b in blocks.blocks)
    assert blocks.agree is passes(blocks.verdict, blocks.strict)


@pytest.mark.parametrize("code", CAUSES)
def test_every_cause_has_a_sentence_and_a_docs_entry(code):
    from pathlib import Path

    class Numbers(dict):  # any field a sentence reads: the number 1
        def __missing__(self, key: str) -> float:
            return 1.0

    assert cause_text(Cause(code, Numbers(codes=(), points=()))) not in ("", code)
    trust = (Path(__file__).resolve().parent.parent / "docs" / "trust.md").read_text()
    assert f"`{code}`" in trust


def test_the_cli_output_choice():
    from autogradcli.render import OUTPUTS, Output

    assert set(OUTPUTS) == set(Output) and Output.of(True) is Output.JSON
    assert np.isclose(cli("grad x**2 --x 3 --json").json()["variables"]["x"]["grad"], 6.0)
