"""Reads are bounded: only regular files, at most a byte cap, headers before data, and
batch or shell lines that are too long, hold NUL bytes or are not UTF-8 cost only
themselves."""

from __future__ import annotations

import io
import json
import os
import time
import zipfile

import numpy as np
import pytest

from autogradcli.cli import batch
from autogradcli.cli.shell import run_stream
from autogradcli.settings import Limits
from tests.conftest import cli

GOOD = 'grad "x**3" --x 2 --expect x=12'


def _refused(args: list[str], message: str) -> None:
    start = time.perf_counter()
    run = cli(*args)
    assert (run.exit_code, run.stderr) == (2, f"Error: {message}\n")
    assert time.perf_counter() - start < 10


def test_a_link_to_dev_zero_is_refused_at_once(tmp_path):
    link = tmp_path / "z.csv"
    link.symlink_to("/dev/zero")
    _refused(
        ["grad", "x*2", "--x", f"@{link}"],
        f"cannot read '@{link}': it is a device, not a regular file; copy it into a regular "
        "file first",
    )


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_does_not_block(tmp_path):
    fifo = tmp_path / "f.json"
    os.mkfifo(fifo)
    kind = "a FIFO (named pipe)"
    _refused(
        ["grad", "x*2", "--x", f"@{fifo}"],
        f"cannot read '@{fifo}': it is {kind}, not a regular file; copy it into a regular "
        "file first",
    )
    _refused(
        ["grad", f"@{fifo}"],
        f"cannot read '@{fifo}': it is {kind}, not a regular file; copy it into a regular "
        "file first",
    )
    _refused(
        ["check", str(fifo)],
        f"cannot read '{fifo}': it is {kind}, not a regular file; copy it into a regular "
        "file first",
    )


def test_the_byte_cap_is_named_and_derived_from_the_element_cap(tmp_path):
    assert Limits(max_elements=1000).file_bytes == 1000 * 64 + 4096
    assert Limits(max_elements=1000, max_file_bytes=10).file_bytes == 10
    path = tmp_path / "x.csv"
    path.write_text("1,2,3\n")
    _refused(
        ["grad", "sum(x)", "--x", f"@{path}", "--max-file-bytes", "4"],
        f"'@{path}' is 6 bytes, more than the 4 read from a file (raise it with --max-file-bytes)",
    )
    assert cli("grad", "sum(x)", "--x", f"@{path}", "--max-file-bytes", "6").exit_code == 0


def test_deep_json_names_the_file(tmp_path):
    path = tmp_path / "deep.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    _refused(
        ["grad", "sum(x)", "--x", f"@{path}"],
        f"'@{path}' is nested too deeply to be a tensor; write at most 32 levels of lists",
    )


def test_an_npy_header_is_read_before_its_data(tmp_path):
    path = tmp_path / "liar.npy"  # a header that claims 10^12 elements, and no data
    with path.open("wb") as handle:
        np.lib.format.write_array_header_1_0(
            handle, {"descr": "<f8", "fortran_order": False, "shape": (10**6, 10**6)}
        )
    run = cli("grad", "sum(x)", "--x", f"@{path}")
    assert run.exit_code == 2
    assert "has 1000000000000 elements; the limit is 20000000" in run.stderr


def test_a_pt_archive_that_unpacks_past_the_cap_is_not_unpacked(tmp_path):
    path = tmp_path / "bomb.pt"
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("bomb/data/0", b"\0" * 10_000_000)
    _refused(
        ["grad", "sum(x)", "--x", f"@{path}", "--max-elements", "1000"],
        f"'@{path}' unpacks to 10000000 bytes, more than the 68096 read from a file (raise it "
        "with --max-file-bytes)",
    )


HOSTILE_LINES = [
    b"grad " + b"x" * 10_000_000,  # 10 MB
    b'grad "x\x00" --x 2',
    b'grad "x\xff\xfe" --x 2',
    bytes(b for b in range(256) if b != 10) * 4,  # binary garbage, one line
]


def _script() -> bytes:
    return b"\n".join([GOOD.encode(), *HOSTILE_LINES, GOOD.encode(), b""])


def test_check_reports_each_unreadable_line_and_runs_the_rest(tmp_path):
    path = tmp_path / "cases.txt"
    path.write_bytes(_script())
    run = cli("check", str(path), "--json")
    assert run.exit_code == 2
    done = [json.loads(x) for x in run.stdout.splitlines()][:-1]
    assert [(d["case"], d["status"]) for d in done] == [
        (1, "agree"),
        (2, "bad input"),
        (3, "bad input"),
        (4, "bad input"),
        (5, "bad input"),
        (6, "agree"),
    ]
    assert [d["error"] for d in done[1:4]] == [
        f"line 2 is longer than {Limits().line_bytes} bytes; it was skipped",
        "line 3 holds a NUL byte; write text",
        "line 4 is not UTF-8 (byte 8); save the file as UTF-8",
    ]


def test_the_shell_reports_each_unreadable_line_and_runs_the_rest(capsys):
    assert run_stream(io.BytesIO(_script())) == 2
    out, err = capsys.readouterr()
    assert out.count("autograd and SymPy agree") == 2
    assert err.splitlines()[:3] == [
        f"Error: line 2 is longer than {Limits().line_bytes} bytes; it was skipped",
        "Error: line 3 holds a NUL byte; write text",
        "Error: line 4 is not UTF-8 (byte 8); save the file as UTF-8",
    ]
    assert len(err.splitlines()) == 4


def test_too_many_cases_or_lines_is_a_cap(monkeypatch, capsys):
    from autogradcli.cli import shell
    from autogradcli.errors import LimitError

    monkeypatch.setattr(batch, "MAX_CASES", 3)
    with pytest.raises(LimitError) as caught:
        batch.read_cases(io.BytesIO(b"# c\n\n" + b"grad x\n" * 4), Limits(), "c.txt")
    assert str(caught.value) == "'c.txt' holds more than 3 cases; split it into smaller files"
    monkeypatch.setattr(shell, "MAX_LINES", 2)
    assert run_stream(io.BytesIO(b"\n\n\nvars\n")) == 2
    assert capsys.readouterr().err == (
        "Error: the script has more than 2 lines; the rest was not read\n"
    )


def test_a_program_that_is_not_utf8_is_one_line(tmp_path):
    from autogradcli.cli.app import app
    from tests.conftest import RUNNER

    piped = RUNNER.invoke(app, ["grad", "-", "--x", "2"], input=b"x*\xff")
    assert (piped.exit_code, piped.stderr) == (
        2,
        "Error: cannot read the program from '-': it is not UTF-8 (byte 3); give a readable "
        "text file (@cell.py), - for standard input, or the program in quotes\n",
    )
    assert RUNNER.invoke(app, ["grad", "-", "--x", "2"], input=b"x*3").exit_code == 0


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
@pytest.mark.parametrize("fortran", [False, True])
def test_npy_files_of_every_format_version_are_read(tmp_path, version, fortran):
    data = np.arange(6, dtype=np.float32).reshape(2, 3)
    data = np.asfortranarray(data) if fortran else data
    path = tmp_path / "x.npy"
    with path.open("wb") as handle:
        np.lib.format.write_array(handle, data, version=version)
    assert path.read_bytes()[6:8] == bytes(version)
    run = cli("grad", "sum(x*x)", "--x", f"@{path}", "--json")
    assert run.exit_code == 0
    assert json.loads(run.stdout)["variables"]["x"]["grad"] == [[0, 2, 4], [6, 8, 10]]


def test_an_npy_file_shorter_than_its_header_says_is_refused_before_reading(tmp_path):
    path = tmp_path / "short.npy"
    with path.open("wb") as handle:
        np.lib.format.write_array_header_2_0(
            handle, {"descr": "<f8", "fortran_order": False, "shape": (1000,)}
        )
        handle.write(b"\0" * 80)
    _refused(
        ["grad", "sum(x)", "--x", f"@{path}"],
        f"cannot read '@{path}' as a NumPy array: the header says 8000 bytes of data; the "
        "file holds 80",
    )
