"""What a new user sets up around the commands: the version, `python -m llm_ide`, shell completion, a config file of
their own found without flags, and `llm-ide config show`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke

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


INTERRUPTING = {  # a stand-in package found first on the path: it marks that it was reached, then sends SIGINT
    "at_import": "os.kill(os.getpid(), signal.SIGINT)\n",
    # Python 3.11 wraps an interrupt in a class body's __set_name__ into a RuntimeError
    "wrapped": "class F:\n    def __set_name__(self, owner, name):\n        signal.raise_signal(signal.SIGINT)\n"
    "        while True:\n            pass\n\n\nclass C:\n    f = F()\n",
}


@pytest.mark.parametrize(
    ("package", "how", "program"),
    [
        ("typer", "at_import", "llm-ide"),
        ("typer", "at_import", "mini-extra"),
        ("typer", "at_import", "-m"),
        ("yaml", "wrapped", "llm-ide"),
        ("yaml", "at_import", "llm-ide"),
    ],
)
def test_a_ctrl_c_while_the_program_loads_exits_130_without_a_traceback(
    tmp_path: Path, package: str, how: str, program: str
) -> None:
    """typer: imported as the program loads its command line; yaml: as `run` loads its own modules."""
    (tmp_path / package).mkdir()
    marker = tmp_path / "reached"
    text = f"import os, pathlib, signal\npathlib.Path({str(marker)!r}).touch()\n{INTERRUPTING[how]}"
    (tmp_path / package / "__init__.py").write_text(text)
    command = [sys.executable, "-m", "llm_ide"] if program == "-m" else [str(Path(llm_ide_program()).parent / program)]
    env = {**os.environ, "PYTHONPATH": str(tmp_path)}
    done = run(*command, "run", "--help", env=env, cwd=tmp_path)
    assert marker.exists()
    assert (done.returncode, done.stdout, done.stderr) == (130, "", "")
    imported = run(sys.executable, "-c", f"import {package}", env=env, cwd=tmp_path)  # where nothing catches it
    assert (imported.returncode, imported.stderr.splitlines()[-1].split(":")[0]) == (
        (-2, "KeyboardInterrupt") if how == "at_import" else (1, "RuntimeError")
    )


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
    # typer finds the shell among the command's ancestors: typed in bash, as a user would (bash forks for a list)
    installed = run("bash", "-c", f"'{llm_ide_program()}' --install-completion; exit $?", env=env, cwd=tmp_path)
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
    assert complete("llm-ide run --rep") == ["--repo", "--reproduction"]
    assert {"list", "plan", "cache"} <= set(complete("llm-ide tools ''"))


def user_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """An environment whose home is `tmp_path` (no user config of the machine's user leaks in)."""
    env = {k: v for k, v in os.environ.items() if k not in ("LLM_IDE_CONFIG", "XDG_CONFIG_HOME")}
    return {**env, "HOME": str(tmp_path / "home"), **extra}


NO_EXTENDS = (
    "extends no bundled config, so it must set every setting: add `extends: default` (or `extends: swebench`) to "
    "start from one"
)


def show(env: dict[str, str], *args: str) -> tuple[int, list[str], str]:
    done = invoke("config", "show", *args, env=env)
    return done.returncode, done.stdout.splitlines(), done.stderr


def write_yaml(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("where", ["home", "xdg", "variable", "empty"])
def test_the_user_config_is_found_without_flags_and_merged_under_config(tmp_path: Path, where: str) -> None:
    found = {
        "home": tmp_path / "home" / ".config" / "llm-ide" / "config.yaml",
        "empty": tmp_path / "home" / ".config" / "llm-ide" / "config.yaml",  # LLM_IDE_CONFIG= : as unset
        "xdg": tmp_path / "xdg" / "llm-ide" / "config.yaml",
        "variable": tmp_path / "anywhere" / "mine.yaml",
    }[where]
    write_yaml(found, {"agent": {"step_limit": 7, "cost_limit": 0.5}})
    extra = {
        "xdg": {"XDG_CONFIG_HOME": str(tmp_path / "xdg")},
        "variable": {"LLM_IDE_CONFIG": str(found)},
        "empty": {"LLM_IDE_CONFIG": ""},
    }
    env = user_env(tmp_path, **extra.get(where, {}))
    code, lines, _ = show(env, "agent.step_limit", "agent.cost_limit", "agent.max_format_errors")
    assert (code, lines) == (
        0,
        [
            f"# user config: {found}",
            f"agent.step_limit: 7  # user config {found}",
            f"agent.cost_limit: 0.5  # user config {found}",
            "agent.max_format_errors: 3  # bundled default.yaml",
        ],
    )
    override = write_yaml(tmp_path / "over.yaml", {"agent": {"step_limit": 9}})
    code, lines, _ = show(env, "agent", "--config", str(override))
    assert f"agent.step_limit: 9  # --config {override}" in lines  # --config over the user's file
    assert f"agent.cost_limit: 0.5  # user config {found}" in lines  # the user's file over the bundled one
    code, lines, _ = show({**env, "LLM_IDE_CONFIG": "off"}, "agent.step_limit")
    assert lines == ["# user config: none (LLM_IDE_CONFIG=off)", "agent.step_limit: 100  # bundled default.yaml"]
    found.unlink()
    code, lines, stderr = show(env, "agent.step_limit")
    said = {"empty": "is empty (read as unset)"}.get(where, "is unset")  # was "is unset" when set empty
    default = tmp_path / ("xdg" if where == "xdg" else "home/.config") / "llm-ide" / "config.yaml"
    none = f"# user config: none (LLM_IDE_CONFIG {said} and {default} does not exist)"
    assert (code, lines[:1]) == ((2, []) if where == "variable" else (0, [none])), stderr


def test_a_run_obeys_the_user_config(tmp_path: Path) -> None:
    """`agent.step_limit: 1` in the user's file ends a two-step run at its first step: the commands read it too."""
    config = write_yaml(tmp_path / "home" / ".config" / "llm-ide" / "config.yaml", {"agent": {"step_limit": 1}})
    write_yaml(tmp_path / "no-tools.yaml", {"environment": {"tools": []}})
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(
        tmp_path / "s.yaml", [act("Look.", "bash", command="ls"), reflect(False, "ok"), act("Go.", "submit")]
    )
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "no-tools.yaml")]
    done = invoke(*args, "--output", str(tmp_path / "out"), env=user_env(tmp_path))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "step_limit after 1 model call" in done.stdout
    config.write_text("agent: {step_limit: 0}\n")  # 0: no limit
    again = invoke(*args, "--output", str(tmp_path / "o2"), env=user_env(tmp_path))
    assert again.returncode == 0 and "submitted after 2 model calls" in again.stdout, again.stdout + again.stderr


@pytest.mark.parametrize(
    ("env", "args", "message"),
    [
        ({"LLM_IDE_CONFIG": "{tmp}/missing.yaml"}, [], "error: LLM_IDE_CONFIG={tmp}/missing.yaml: no such config file"),
        ({"LLM_IDE_CONFIG": "{tmp}/bad.yaml"}, [], "error: {tmp}/bad.yaml: agent.step_limt: unknown setting"),
        ({"LLM_IDE_CONFIG": "{tmp}"}, [], "error: LLM_IDE_CONFIG={tmp}: a folder, not a config file (unset it, or"),
        (
            {"XDG_CONFIG_HOME": "{tmp}/xdg"},
            [],
            "error: {tmp}/xdg/llm-ide/config.yaml: a folder, not a config file (move it, or set LLM_IDE_CONFIG=off)",
        ),  # was `user config: none (… does not exist)`
        ({}, ["agent.nope"], "error: no setting named agent.nope (llm-ide config show lists them all)"),
        (
            {},
            ["agent.step_limit", "agent.step_limt"],
            "error: no setting named agent.step_limt (did you mean agent.step_limit? llm-ide config show lists them",
        ),  # the typo was left out silently, the other key shown
        ({}, ["agnt"], "error: no setting named agnt (did you mean agent? llm-ide config show lists them all)"),
        ({}, ["--base", "other"], "error: config not found: other (neither a file nor one of ['default', 'swebench'])"),
        ({}, ["--base", "{tmp}/lone.yaml"], f"error: {{tmp}}/lone.yaml: {NO_EXTENDS}; agent.cost_limit: missing"),
        ({}, ["--base", "{tmp}/top.yaml"], f"error: {{tmp}}/lone.yaml: {NO_EXTENDS}; agent.cost_limit: missing"),
        ({}, ["--base", "{tmp}/sets.yaml"], f"error: {{tmp}}/lone.yaml: {NO_EXTENDS}; agent.cost_limit: missing"),
        (
            {},
            ["--base", "{tmp}/lone.yaml", "--config", "{tmp}/step.yaml"],
            f"error: {{tmp}}/lone.yaml: {NO_EXTENDS}; agent.cost_limit: missing",
        ),
        (
            {"LLM_IDE_CONFIG": "{tmp}/step.yaml"},
            ["--base", "{tmp}/lone.yaml"],
            f"error: {{tmp}}/lone.yaml: {NO_EXTENDS}; agent.cost_limit: missing",
        ),  # a file over the lone one setting `agent` too: was "step.yaml: agent.cost_limit: missing setting" alone
    ],  # a base file without `extends`: was only "agent.cost_limit: missing setting (and 12 more errors)"
)
def test_config_show_errors_are_one_line(tmp_path: Path, env: dict[str, str], args: list[str], message: str) -> None:
    write_yaml(tmp_path / "bad.yaml", {"agent": {"step_limt": 3}})
    write_yaml(tmp_path / "lone.yaml", {"agent": {"step_limit": 3}})
    write_yaml(tmp_path / "top.yaml", {"extends": "lone.yaml"})
    write_yaml(tmp_path / "sets.yaml", {"extends": "lone.yaml", "agent": {"step_limit": 4}})
    write_yaml(tmp_path / "step.yaml", {"agent": {"step_limit": 5}})
    (tmp_path / "xdg" / "llm-ide" / "config.yaml").mkdir(parents=True)
    env = user_env(tmp_path, **{key: value.format(tmp=tmp_path) for key, value in env.items()})
    code, lines, stderr = show(env, *[arg.format(tmp=tmp_path) for arg in args])
    assert (code, lines, len(stderr.splitlines())) == (2, [], 1)
    assert stderr.startswith(message.format(tmp=tmp_path))


def test_config_show_names_every_origin_and_shortens_long_values(tmp_path: Path) -> None:
    code, lines, _ = show(user_env(tmp_path), "--base", "swebench", "agent.step_limit", "swebench", "sampling.k")
    assert code == 0
    assert lines[1:3] == [
        "agent.step_limit: 250  # bundled swebench.yaml",
        "swebench.eval_timeout: 1800.0  # bundled swebench.yaml",
    ]
    script = next(line for line in lines if line.startswith("swebench.eval_script: "))
    assert script.startswith('swebench.eval_script: "#!/bin/bash\\n') and "chars; --full shows it)  # bundled" in script
    assert lines[-1] == "sampling.k: 1  # bundled default.yaml"
    code, full, _ = show(user_env(tmp_path), "--base", "swebench", "swebench.eval_script", "--full")
    from llm_ide.config import load_config

    assert (
        full[1]
        == f"swebench.eval_script: {json.dumps(load_config('swebench').swebench.eval_script)}  # bundled swebench.yaml"
    )
    code, every, _ = show(user_env(tmp_path))
    assert len(every) > 200 and all("  # " in line for line in every[1:])
    assert "model.prices.gpt-5-mini.cache_write: null  # built-in" in every  # a default of the typed settings
    for section, bundled in [("sampling", "sampling"), ("reproduction", "reproduction"), ("navigator", "navigator")]:
        templates = [line for line in every if line.startswith(f"{section}.templates.")]  # their prompts' own file
        assert templates and all(line.endswith(f"  # bundled {bundled}.yaml") for line in templates), templates[0]
    (base := tmp_path / "base.yaml").write_text("extends: swebench\nagent: {step_limit: 3}\n")
    (over := tmp_path / "over.yaml").write_text("agent: {cost_limit: 2}\n")
    code, mine, _ = show(
        user_env(tmp_path), "--base", str(base), "--config", str(over), "agent", "swebench.eval_timeout"
    )
    assert code == 0 and f"agent.step_limit: 3  # --base {base}" in mine  # was `--config`: no option gave it so
    assert f"agent.cost_limit: 2.0  # --config {over}" in mine
    assert mine[-1] == "swebench.eval_timeout: 1800.0  # bundled swebench.yaml"
