from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from in_process import invoke
from typer.testing import CliRunner

from llm_ide.cli import app

BOX = b"""class Box:
    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, new):
        if new is None:
            raise ValueError(new)
        self._value = new
"""


def context(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke("context", *args, cwd=cwd)


def context_in_process(cwd: Path, *args: str, monkeypatch: pytest.MonkeyPatch) -> tuple[int, str, str]:
    monkeypatch.chdir(cwd)
    result = CliRunner().invoke(app, ["context", *args])
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "box.py").write_bytes(BOX)
    (tmp_path / "pkg" / "empty.py").write_bytes(b"")
    return tmp_path


def test_lines_option_prints_the_exact_format(repo: Path) -> None:
    result = context(repo, "pkg/box.py", "--lines", "9,4-4")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "### File: `pkg/box.py`\n"
        "     1\tclass Box:\n"
        "     2\t    @property\n"
        "     3\t    def value(self):\n"
        "     4\t        return self._value\n"
        "...\n"
        "     6\t    @value.setter\n"
        "     7\t    def value(self, new):\n"
        "     8\t        if new is None:\n"
        "     9\t            raise ValueError(new)\n"
    )


@pytest.mark.parametrize(
    ("lines", "rows", "note"),
    [
        ("9,12-14,20", [1, 6, 7, 8, 9], "… pkg/box.py has 10 lines: 12-14,20 left out\n"),
        ("10", [1, 6, 7, 10], ""),
    ],
)
def test_lines_past_the_end_are_said_on_stderr(repo: Path, lines: str, rows: list[int], note: str) -> None:
    result = context(repo, "pkg/box.py", "--lines", lines)
    assert (result.returncode, result.stderr) == (0, note)
    shown = [int(line.split("\t")[0]) for line in result.stdout.splitlines() if line.strip()[:1].isdigit()]
    assert shown == rows


def test_lines_past_the_end_beside_a_whole_function_are_said_on_stderr(repo: Path) -> None:
    """They were dropped unsaid (the function shown alone), where beside lines that exist they were said."""
    result = context(repo, "pkg/box.py", "--lines", "12", "--whole-function", "Box.value")
    assert (result.returncode, result.stderr) == (0, "… pkg/box.py has 10 lines: 12 left out\n")
    assert "     4\t        return self._value" in result.stdout


def test_whole_function_option_resolves_duplicates_by_the_given_lines(repo: Path) -> None:
    result = context(repo / "pkg", "box.py", "--whole-function", "Box.value", "--lines", "10")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "### File: `box.py`\n"
        "     1\tclass Box:\n"
        "...\n"
        "     6\t    @value.setter\n"
        "     7\t    def value(self, new):\n"
        "     8\t        if new is None:\n"
        "     9\t            raise ValueError(new)\n"
        "    10\t        self._value = new\n"
    )
    first = context(repo, str(repo / "pkg" / "box.py"), "--whole-function", "Box.value")
    assert first.stdout.splitlines()[1:] == [
        "     1\tclass Box:",
        *[f"{n:>6}\t" + BOX.decode().split("\n")[n - 1] for n in (2, 3, 4)],
    ]


def test_chunks_file_with_relative_absolute_and_missing_paths(
    repo: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    outside = tmp_path_factory.mktemp("outside") / "notes.txt"
    outside.write_text("alpha\nbeta\ngamma\n")
    chunks = [
        {"file_path": "./pkg/box.py", "lines": [4], "class_name": "Box", "function": "value"},
        {"file_path": str(outside), "lines": [1, 3]},
        {"file_path": "pkg/gone.py", "lines": [1], "activity": {"accessed": [1], "referred": [0], "score": 1.0}},
        {"file_path": str(repo / "pkg" / "box.py"), "lines": [], "class_name": "Box", "function": "value",
         "whole_function": True},
    ]  # fmt: skip
    (repo / "chunks.json").write_text(json.dumps(chunks))
    result = context(repo, "--chunks", "chunks.json")
    assert (result.returncode, result.stderr) == (0, "")
    assert result.stdout == (
        "### File: `pkg/box.py`\n"
        "     1\tclass Box:\n"
        "     2\t    @property\n"
        "     3\t    def value(self):\n"
        "     4\t        return self._value\n"
        "\n"
        f"### File: `{outside.as_posix()}`\n"
        "     1\talpha\n"
        "...\n"
        "     3\tgamma\n"
        "\n"
        "### File: `pkg/gone.py`\n"
        "[file not found]\n"
    )


@pytest.mark.parametrize(
    ("data", "lines", "stdout"),
    [
        (b"def f():\r\n    x = 1\r\n    return x\r\n", "3", "     1\tdef f():\n...\n     3\t    return x\n"),
        (b"def f(:\n  return [\n", "1-2", "     1\tdef f(:\n     2\t  return [\n"),
        (b"x = '\xff'\ny = 2\n", "1", "     1\tx = '\ufffd'\n"),
        (b"a\x0cb = 1\nc = 2\n", "2,7-9", "     2\tc = 2\n"),
        (b"\tif x:\n\t\ty\n", "2", "     1\t\tif x:\n     2\t\t\ty\n"),
        (b"one\ntwo\n", "2-999999999999", "     2\ttwo\n"),
    ],
)
def test_robustness_cases_exit_zero_and_show_the_lines_that_exist(
    tmp_path: Path, data: bytes, lines: str, stdout: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "f.py").write_bytes(data)
    result = context_in_process(tmp_path, "f.py", "--lines", lines, monkeypatch=monkeypatch)
    past = {"2,7-9": "… f.py has 2 lines: 7-9 left out\n", "2-999999999999": "… f.py has 2 lines: 3-1000000 left out\n"}
    assert result == (0, "### File: `f.py`\n" + stdout, past.get(lines, ""))


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (
            ["pkg/box.py", "--lines", "3-x"],
            "error: malformed line spec '3-x': expected numbers and ranges like 12,40-45",
        ),
        (
            ["pkg/box.py", "--lines", "5-2"],
            "error: malformed line spec '5-2': lines start at 1 and ranges go upwards (5-2)",
        ),
        (["pkg/box.py", "--lines", "0"], "error: malformed line spec '0': lines start at 1 and ranges go upwards (0)"),
        (["pkg/box.py", "--lines", ""], "error: malformed line spec '': expected numbers and ranges like 12,40-45"),
        (  # it was exit 0, a note on stdout: nothing of what was asked is there, as for a range that cannot be
            ["pkg/box.py", "--lines", "11"],
            "error: --lines 11: pkg/box.py has 10 lines (1-10): none of the lines asked for is there",
        ),
        (
            ["pkg/box.py", "--lines", "12,100-200"],
            "error: --lines 12,100-200: pkg/box.py has 10 lines (1-10): none of the lines asked for is there",
        ),
        (
            ["pkg/empty.py", "--lines", "1"],
            "error: --lines 1: pkg/empty.py is empty: none of the lines asked for is there",
        ),
        (["pkg/missing.py", "--lines", "1"], "error: no such file: pkg/missing.py"),
        (["pkg/box.py", "--whole-function", "Box.nope"], "error: no definition named 'Box.nope' in pkg/box.py"),
        (["pkg/box.py"], "error: give --lines (e.g. 12,40-45) and/or --whole-function QUALNAME"),
        ([], "error: give a FILE (with --lines and/or --whole-function) or --chunks chunks.json"),
        (["--chunks", "none.json"], "error: no such file: none.json"),
        (["--chunks", "pkg"], "error: pkg is a folder: give a chunks JSON file"),
        (["pkg", "--lines", "1"], "error: pkg is a folder: give a source file"),
        (
            ["pkg/box.py", "--chunks", "c.json"],
            "error: give either FILE with --lines/--whole-function, or --chunks chunks.json, not both",
        ),
    ],
)
def test_user_errors_exit_2_with_one_line(
    repo: Path, args: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert context_in_process(repo, *args, monkeypatch=monkeypatch) == (2, "", message + "\n")


def test_user_error_in_a_real_process_has_no_traceback(repo: Path) -> None:
    result = context(repo, "pkg/missing.py", "--lines", "1,2")
    assert (result.returncode, result.stdout, result.stderr) == (2, "", "error: no such file: pkg/missing.py\n")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[{", "error: bad.json is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 3"),
        ('[{"lines": [1]}]', "error: bad.json: invalid chunk list at 0.file_path: Field required"),
        (
            '[{"file_path": "a.py", "lines": ["x"]}]',
            "error: bad.json: invalid chunk list at 0.lines.0: Input should be",
        ),
        ('{"file_path": "a.py"}', "error: bad.json: invalid chunk list at top level: Input should be a valid list"),
    ],
)
def test_malformed_chunks_file_exits_2(repo: Path, content: str, message: str, monkeypatch: pytest.MonkeyPatch) -> None:
    (repo / "bad.json").write_text(content)
    code, stdout, stderr = context_in_process(repo, "--chunks", "bad.json", monkeypatch=monkeypatch)
    assert (code, stdout) == (2, "")
    assert stderr.startswith(message)
    assert stderr.count("\n") == 1
