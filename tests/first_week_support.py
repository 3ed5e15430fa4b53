"""What test_first_week, test_run_refusals, test_startup_imports and test_ray_errors share: the CLI in-process
without the user's config, the check of a usage error in one line, the scripted model's last step, the CLI as a
child process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from agent_script import act
from in_process import invoke

CLI = [sys.executable, "-m", "llm_ide"]
DONE = act("The name is checked; submit.", "submit")


def llm_ide(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd, env={**os.environ, "LLM_IDE_CONFIG": "off", "COLUMNS": "200", **(env or {})})


def one_line(result: subprocess.CompletedProcess[str], starts: str) -> None:
    assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stdout + result.stderr
    assert result.stderr.startswith(f"error: {starts}"), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
