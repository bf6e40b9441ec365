"""Fuzzing the whole pipeline: generated valid programs with random options through the
API, Rich, JSON (schema-validated), ``check`` and the piped shell. Any traceback, internal
error or schema rejection fails. The CI profile is small and derandomized; set
HYPOTHESIS_PROFILE=long for a long run (docs/trust.md), or run fuzz/fuzz_pipeline.py."""

from __future__ import annotations

import os
import time
from collections import Counter

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autogradcli.cli.shell import run_lines
from tests.pipeline_cases import Case, draw_case, run_case, run_lines_of
from tests.schemas import validate

settings.register_profile(
    "pipeline-ci",
    max_examples=25,
    derandomize=True,
    deadline=None,
    suppress_health_check=list(HealthCheck),
)
settings.register_profile(
    "long", max_examples=5000, deadline=None, suppress_health_check=list(HealthCheck)
)
PROFILE = "long" if os.environ.get("HYPOTHESIS_PROFILE") == "long" else "pipeline-ci"
CAP = 60.0  # seconds a case may take (SymPy's own limit is 10 s here)
OUTCOMES: Counter[str] = Counter()


def _case(data: st.DataObject) -> Case:
    return draw_case(lambda lo, hi: data.draw(st.integers(lo, hi)))


@settings(settings.get_profile(PROFILE))
@given(st.data())
def test_generated_questions_go_through_api_rich_and_json(data):
    case = _case(data)
    start = time.perf_counter()
    OUTCOMES[run_case(case, validate)] += 1
    assert time.perf_counter() - start < CAP, case


@settings(settings.get_profile(PROFILE), max_examples=8 if PROFILE != "long" else 500)
@given(data=st.data())
def test_generated_questions_go_through_check_and_the_shell(capsys, data):
    cases = [_case(data) for _ in range(3)]
    run_lines_of(cases, validate)
    code = run_lines([c.line() for c in cases])
    captured = capsys.readouterr()
    assert code in (0, 1, 2)
    assert "Traceback" not in captured.out + captured.err
    assert "internal error" not in captured.err


def test_the_generator_makes_valid_questions():
    """Most generated questions are answered, not refused: the fuzzing reaches the core."""
    import random

    rng = random.Random(0)
    outcomes = Counter(
        run_case(draw_case(lambda lo, hi: rng.randint(lo, hi)), validate) for _ in range(20)
    )
    assert outcomes["result"] >= 15, outcomes


def test_finding_a_nested_where_in_a_condition():
    """Found by the pipeline fuzzer: SymPy writes where(where(c, a, b) > 0, ...) with an
    ITE (if-then-else) condition, which the reference could not evaluate."""
    import torch

    import autogradcli as ag

    text = "mean(where(where(x > 0, x, 3) > 0, where(x > 0, x, 3), 2*x))"
    x = torch.tensor([3.0, -1.0, 0.5], requires_grad=True)
    inner = torch.where(x > 0, x, torch.tensor(3.0))
    torch.where(inner > 0, inner, 2 * x).mean().backward()
    result = ag.grad(text, {"x": [3.0, -1.0, 0.5]})
    assert result.verdict == "agree"
    assert result.variables["x"].expected.tolist() == [1 / 3, 0.0, 1 / 3]  # SymPy, float64
    assert result.variables["x"].grad.tolist() == x.grad.tolist()  # autograd, float32


def test_finding_a_term_sympy_cannot_compare():
    """Found by the pipeline fuzzer: SymPy's Min raised ValueError ('cos(2)**0.5 is not
    comparable') through the API; now central differences stand in, with a note."""
    import autogradcli as ag

    result = ag.grad("minimum(tanh(y), cos(2)**0.5)", {"y": 0.5})
    assert result.expected_by == "numeric" and result.verdict == "agree"
    assert result.notes[0].code == "no_number_fallback"
    assert result.notes[0].data["reason_code"] == "sympy_cannot"
