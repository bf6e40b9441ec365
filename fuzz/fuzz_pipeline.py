"""atheris target for long fuzzing runs of the whole pipeline: generated valid programs
(tests/pipeline_cases.py) through the API, Rich and JSON (schema-validated).

    pip install atheris && python fuzz/fuzz_pipeline.py -max_total_time=1200 -rss_limit_mb=4096

The fuzzer's bytes choose the program, the values and the options. A domain error
(AutogradCliError) is an answer; any other exception, or a schema rejection, is a finding.
"""

from __future__ import annotations

import sys
from pathlib import Path

import atheris

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import jsonschema  # noqa: F401
import numpy  # noqa: F401  (loaded first, so that only autograd-cli is instrumented)
import rich.console  # noqa: F401
import sympy  # noqa: F401
import torch  # noqa: F401

with atheris.instrument_imports():
    from tests.pipeline_cases import draw_case, run_case
    from tests.schemas import validate


def test_one_input(data: bytes) -> None:
    provider = atheris.FuzzedDataProvider(data)
    run_case(draw_case(provider.ConsumeIntInRange), validate)


if __name__ == "__main__":
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()
