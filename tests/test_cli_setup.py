"""What a new user sets up around the commands: the version, `python -m llm_ide`, shell completion."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from llm_ide import __version__

ROOT = Path(__file__).resolve().parents[1]


def run(*command: str, env: dict[str, str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, capture_output=True, text=True, env=env, cwd=cwd, timeout=120)


def llm_ide_program() -> str:
    """The installed `llm-ide` script (beside this interpreter, where pip put it)."""
    program = Path(sys.executable).parent / "llm-ide"
    assert program.is_file(), f"{program} missing: the package is not installed (pip install -e .)"
    return str(program)


@pytest.mark.parametrize(
    "command",
    [["{llm_ide}", "--version"], [sys.executable, "-m", "llm_ide", "--version"], ["{mini_extra}", "--version"]],
)
def test_version_is_the_package_version(command: list[str], tmp_path: Path) -> None:
    programs = {"llm_ide": llm_ide_program(), "mini_extra": str(Path(llm_ide_program()).with_name("mini-extra"))}
    done = run(*[part.format(**programs) for part in command], cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (0, f"llm-ide {__version__}\n", "")
    from importlib.metadata import version

    assert version("llm-ide") == __version__  # pyproject reads it from llm_ide.__version__: one number


def test_python_m_llm_ide_is_the_llm_ide_command(tmp_path: Path) -> None:
    module = run(sys.executable, "-m", "llm_ide", "--help", env={**os.environ, "COLUMNS": "200"}, cwd=tmp_path)
    script = run(llm_ide_program(), "--help", env={**os.environ, "COLUMNS": "200"}, cwd=tmp_path)
    assert module.returncode == 0 and module.stdout == script.stdout
    assert "Usage: llm-ide [OPTIONS] COMMAND [ARGS]..." in module.stdout
    bad = run(sys.executable, "-m", "llm_ide", "run", "--repo", str(tmp_path), "--task", "t", cwd=tmp_path)
    assert (bad.returncode, bad.stderr) == (2, "error: no model: pass --model (e.g. openai:gpt-5-mini, "
                                                "scripted:script.yaml) or set LLM_IDE_MODEL\n")  # fmt: skip


def test_bash_completion_installs_and_completes_commands_and_options(tmp_path: Path) -> None:
    if shutil.which("bash") is None:
        pytest.skip("no bash here")
    env = {**os.environ, "HOME": str(tmp_path), "SHELL": "/bin/bash"}
    installed = run(llm_ide_program(), "--install-completion", "bash", env=env, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    script = tmp_path / ".bash_completions" / "llm-ide.sh"
    assert f"source '{script}'" in (tmp_path / ".bashrc").read_text()

    def complete(words: str) -> list[str]:
        """What bash offers after `words`, through the installed completion function."""
        bash = (
            f"source {script}; COMP_WORDS=({words}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1));"
            ' _llm_ide_completion llm-ide; printf "%s\\n" "${COMPREPLY[@]}"'
        )
        env_path = {**env, "PATH": f"{Path(llm_ide_program()).parent}{os.pathsep}{os.environ['PATH']}"}
        done = run("bash", "-c", bash, env=env_path, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    assert complete("llm-ide sw") == ["swebench", "swebench-single"]
    assert complete("llm-ide run --rep") == ["--repo"]
    assert {"list", "plan", "cache"} <= set(complete("llm-ide tools ''"))
