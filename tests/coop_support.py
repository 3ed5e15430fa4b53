"""A coop pair's scripted run for the tests: one scripted model per agent and phase, `coop run`'s arguments, and the
run as a child process (one to kill)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import yaml

CLI = "from llm_ide.cli import app; app()"
EXTRA = "def four():\n    return 4\n"
TWO = "def two():\n    return 2\n"


def scripts(folder: Path, **responses: list[str]) -> str:
    """One scripted model per agent and phase (plan_1.yaml, run_2.yaml, …): the spec the CLI takes."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, items in responses.items():
        (folder / f"{name}.yaml").write_text(yaml.safe_dump({"responses": items}))
    return f"scripted:{folder}/{{phase}}_{{agent}}.yaml"


def coop_args(task: Path, source: Path, model: str, out: Path, *extra: str) -> list[str]:
    config = out.parent / "agent.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}}))
    return ["coop", "run", str(task), "--pair", "1,2", "--model", model,
            "--repo-source", str(source), "-o", str(out), "--config", str(config), *extra]  # fmt: skip


def coop_run(task: Path, source: Path, model: str, out: Path, *extra: str, **popen: object) -> subprocess.Popen[str]:
    """`coop run` as a child process: one to kill."""
    command = [sys.executable, "-c", CLI, *coop_args(task, source, model, out, *extra)]
    return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **popen)
