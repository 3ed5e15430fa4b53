"""`llm-ide run` tells on the console how each tool was installed, and which tool failed and why."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml
from agent_script import act, write_script
from conftest import make_git_repo
from in_process import invoke
from test_tools_install import write_tool


def run_cli(
    tmp_path: Path, run_id: str, config: Path, model: str, build_backend: str = ""
) -> subprocess.CompletedProcess[str]:
    """A run; with `build_backend` (shared_fixtures) on PYTHONPATH its tools build without pip's build isolation."""
    repo = make_git_repo(tmp_path / f"repo-{run_id}", {"a.py": "x = 1\n"})
    args = ["--model", model, "--config", str(config), "--output", str(tmp_path / run_id), "--thread-id", run_id]
    environ = {**os.environ, "LLM_IDE_TOOLS_CACHE": str(tmp_path / "tools-cache")}
    environ |= {"PYTHONPATH": build_backend} if build_backend else {}
    return invoke("run", "--repo", str(repo), "--task", "t", *args, env=environ)


def test_installed_and_failed_tools_are_told_on_the_console(tmp_path: Path, build_backend: str) -> None:
    # test tools: tests/tool_backend.py builds one in half the debugger's CPU (test_tools_install builds the debugger)
    greeter = write_tool(tmp_path / "tool-configs", "greeter")
    broken = write_tool(tmp_path / "tool-configs", "broken", setup_script="ls /no/such/dir")
    config = tmp_path / "tools.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": [str(greeter), str(broken)]}}))
    model = write_script(tmp_path / "script.yaml", [act("Done.", "submit")])

    first = run_cli(tmp_path, "first", config, model, build_backend)
    assert first.returncode == 0, first.stdout + first.stderr
    lines = first.stdout.splitlines()
    assert any(line.startswith("✓ tool greeter installed (built and cached, ") for line in lines), first.stdout
    assert (
        "✗ tool broken failed to install: step `setup` failed, exit status 2: ls: cannot access '/no/such/dir': No such"
        " file or directory (the run goes on without it; the full output is in the run's log)"
    ) in lines, first.stdout
    assert lines.index("… installing tools") < min(i for i, line in enumerate(lines) if "tool greeter" in line)
    building = [i for i, line in enumerate(lines) if line.startswith("… building the tools (a first run")]
    assert len(building) == 1 and "usually under a minute, a few minutes on a slow connection" in lines[building[0]]
    assert building[0] < min(i for i, line in enumerate(lines) if "tool greeter installed" in line)

    second = run_cli(tmp_path, "second", config, model, build_backend)
    assert second.returncode == 0, second.stdout + second.stderr
    assert any(line.startswith("✓ tool greeter installed (from cache, ") for line in second.stdout.splitlines())
    assert "building the tools" not in second.stdout  # nothing built: nothing to wait for
    assert "✗ tool broken failed to install" in second.stdout, "its setup step runs (and fails) on every run"
    assert (tmp_path / "tools-cache" / "local").is_dir(), "(the preflight tests rely on runs creating the cache)"


def test_no_tools_to_install_is_not_said(tmp_path: Path) -> None:
    """`environment.tools: []`: the console said `… installing tools` with nothing to install."""
    config = tmp_path / "no-tools.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": []}}))
    done = run_cli(tmp_path, "none", config, write_script(tmp_path / "script.yaml", [act("Done.", "submit")]))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "… starting environment" in done.stdout and "installing tools" not in done.stdout, done.stdout
