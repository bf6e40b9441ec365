"""Fuzzing the two parsers with random text: every input ends in a result or a clean
domain error, quickly. (fuzz/fuzz_parsers.py runs the same targets under atheris.)"""

from __future__ import annotations

import contextlib
import time

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autogradcli.errors import AutogradCliError
from autogradcli.lang.parser import parse_expression
from autogradcli.lang.values import RandomSource, read_value
from autogradcli.settings import Limits

LIMITS = Limits(max_elements=100_000)
ALPHABET = st.sampled_from(list("xyz0123456789.+-*/^@()[], =;\n_easpincosqrtlogmxdhT'\"\\:"))
GRAMMARISH = st.text(ALPHABET, max_size=80)
ANYTHING = st.text(max_size=80)
STATS = {"expressions": 0, "values": 0}


def _parse(text: str) -> None:
    start = time.perf_counter()
    with contextlib.suppress(AutogradCliError):
        parse_expression(text, LIMITS)
    assert time.perf_counter() - start < 2


def _read(text: str) -> None:
    start = time.perf_counter()
    with contextlib.suppress(AutogradCliError):
        read_value(text, LIMITS, RandomSource(0, "float32"))
    assert time.perf_counter() - start < 2


FUZZ = settings(
    max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@FUZZ
@given(st.one_of(GRAMMARISH, ANYTHING))
def test_expression_parser_never_crashes(text):
    STATS["expressions"] += 1
    _parse(text)


@FUZZ
@given(st.one_of(GRAMMARISH, ANYTHING))
def test_value_parser_never_crashes(text):
    STATS["values"] += 1
    _read(text)


def test_fuzz_ran():
    assert STATS["expressions"] >= 300 and STATS["values"] >= 300
