"""The rough edges a new user met (issue 40, measured point 9), each smoothed: `context` on a binary file, empty model
names, `--cost-limit nan`, Ctrl-C during a tool build, the patch's colours, and `demo`'s patch and next commands."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from conftest import in_terminal, make_git_repo
from in_process import invoke
from typer.testing import CliRunner

from llm_ide.cli import app
from llm_ide.cli.console import StepPrinter, coloured_patch

ENV = {**os.environ, "COLUMNS": "160", "TERM": "xterm-256color", "LLM_IDE_CONFIG": "off"}
PATCH = """diff --git a/a.py b/a.py
--- a/a.py
+++ b/a.py
@@ -1 +1 @@
-x = 1
+x = 2
"""


@pytest.mark.parametrize(
    ("data", "refused"),
    [
        (b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", True),
        (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)), True),
        ("café = 1\n".encode("latin-1"), False),  # text in another 8-bit encoding is still text
        (b"x = 1\ny = 2\n", False),
    ],
)
def test_context_refuses_a_binary_file_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, data: bytes, refused: bool
) -> None:
    (tmp_path / "f.bin").write_bytes(data)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["context", "f.bin", "--lines", "1"])
    if refused:
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == "error: f.bin is a binary file, not source code: nothing to render\n"
    else:
        assert result.exit_code == 0 and result.stdout.startswith("### File: `f.bin`\n     1\t")


def test_the_patch_is_coloured_like_git_diff_on_a_terminal() -> None:
    text = coloured_patch(PATCH)
    styles = {text.plain[span.start : span.end].rstrip("\n"): str(span.style) for span in text.spans}
    assert styles == {
        "diff --git a/a.py b/a.py": "bold",
        "--- a/a.py": "bold",
        "+++ b/a.py": "bold",
        "@@ -1 +1 @@": "cyan",
        "-x = 1": "red",
        "+x = 2": "green",
    }
    assert text.plain == PATCH


def test_the_demo_writes_its_patch_and_says_what_to_do_next(tmp_path: Path) -> None:
    status, output = in_terminal([sys.executable, "-m", "llm_ide", "demo", "--output", str(tmp_path / "d")], ENV)
    screen = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]|\r", "", output.decode(errors="replace"))
    assert status == 0, screen
    patch = (tmp_path / "d" / "run" / "demo.patch").read_text()
    assert patch.startswith("diff --git") and f"patch ({tmp_path / 'd' / 'run' / 'demo.patch'}):" in screen
    assert "\x1b[32m+" in output.decode(errors="replace")  # an added line, green
    trajectory = tmp_path / "d" / "run" / "demo.traj.json"
    assert f"llm-ide inspect {trajectory} --html" in screen
    assert 'llm-ide run --repo ./myproject --task "..." --model openai:gpt-5-mini' in screen


def test_ctrl_c_during_a_tool_build_is_said_on_a_line_of_its_own(tmp_path: Path) -> None:
    """The tool spinner up (a build step told), then what Ctrl-C prints: the spinner's line is ended first."""
    script = """
import sys
from llm_ide.cli.console import print_interrupted, tool_progress
from llm_ide.tools.installer import ToolEvent
tool_progress()(ToolEvent("step", "navigator", "pip install"))
print_interrupted("saved at its last completed step", "--thread-id", "t")
"""
    status, output = in_terminal([sys.executable, "-c", script], ENV)
    screen = output.decode(errors="replace")
    assert status == 0, screen
    lines = [re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", line) for line in screen.replace("\r\n", "\n").split("\n")]
    interrupted = next(line for line in lines if "interrupted:" in line)
    assert interrupted.strip("\r ").startswith("interrupted: saved at its last completed step"), repr(screen)
    assert "installing tool" not in interrupted


@pytest.mark.parametrize(
    ("option", "value", "line"),
    [
        ("--cost-limit", "nan", "command line: agent.cost_limit: input should be a finite number (got nan)"),
        ("--cost-limit", "-1", "command line: agent.cost_limit: input should be greater than or equal to 0 (got -1.0)"),
    ],
)
def test_a_limit_that_is_no_number_is_named_as_a_setting(tmp_path: Path, option: str, value: str, line: str) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    done = invoke("run", "--repo", str(repo), "--task", "t", "--model", "scripted:x.yaml", option, value, env=ENV)
    assert (done.returncode, done.stderr) == (2, f"error: {line}\n")


def test_the_step_preview_skips_rules_and_dots(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_ide.run.outputs import RunEvent

    observation = (
        "\n.\n----------------------------------------------------------------------\nRan 1 test in 0.000s\n\nOK"
    )
    StepPrinter(thoughts=False)(
        RunEvent("r", "step", step=1, action="bash: python -m unittest", observation=observation)
    )
    assert "→ Ran 1 test in 0.000s" in capsys.readouterr().out


def test_a_step_prints_its_action_thought_and_output_as_written(capsys: pytest.CaptureFixture[str]) -> None:
    from llm_ide.run.outputs import RunEvent

    action = "bash: grep -n '[b]old :smile:' a.py"
    thought = "Look at [bold]it[/].\nThen edit."
    StepPrinter()(RunEvent("r", "step", step=7, action=action, thought=thought, observation="\n1: x"))
    StepPrinter(priced=False, thoughts=False)(RunEvent("r", "step", step=12, action="view", observation=""))
    assert capsys.readouterr().out == (
        f"step   7 {action}\n         Look at [bold]it[/].\n         Then edit.\n         → 1: x  $0.0000\n"
        "step  12 view\n"
    )
