"""What the command line's tests share (test_cli, test_cli_resume, test_cli_streams): `llm-ide` as a child process,
as a call in process, and a config without tools."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from in_process import invoke

CLI = [sys.executable, "-c", "from llm_ide.cli import app; app()"]


def llm_ide(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd, env=env)


def no_tools(tmp_path: Path, **model: object) -> Path:
    path = tmp_path / "no-tools.yaml"
    path.write_text(json.dumps({"environment": {"tools": [], "pull": "never"}, "model": model}))
    return path
