"""atheris target for longer fuzzing runs of the expression and value parsers.

    pip install atheris && python fuzz/fuzz_parsers.py -max_total_time=600

Any exception other than autograd-cli's own domain errors is a finding.
"""

from __future__ import annotations

import contextlib
import sys

import atheris

with atheris.instrument_imports():
    from autogradcli.errors import AutogradCliError
    from autogradcli.lang.parser import parse_expression
    from autogradcli.lang.values import RandomSource, read_value
    from autogradcli.settings import Limits

LIMITS = Limits(max_elements=100_000)


def test_one_input(data: bytes) -> None:
    text = atheris.FuzzedDataProvider(data).ConsumeUnicodeNoSurrogates(200)
    for parse in (
        lambda t: parse_expression(t, LIMITS),
        lambda t: read_value(t, LIMITS, RandomSource(0, "float32")),
    ):
        with contextlib.suppress(AutogradCliError):
            parse(text)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
