"""Issue 37 §10-12: every config mistake is one line naming the key (`extends` of a wrong type too) and no value of
the wrong type is accepted; `navigator serve` refuses a short token; a reproduction script that deletes `.git` ends
the run `environment_error`, its work kept as the patch."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke

from llm_ide.config import ConfigError, load_config


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("extends: 5\n", "extends: must name a bundled config (default, swebench) or a YAML file (got 5)"),
        ("extends: [default]\n", "extends: must name a bundled config (default, swebench) or a YAML file (got ['def"),
        ("extends: {a: 1}\n", "extends: must name a bundled config (default, swebench) or a YAML file (got {'a': 1})"),
        ("extends: nowhere.yaml\n", "extends: config not found: nowhere.yaml"),
        ('agent: {step_limit: "10"}\n', "agent.step_limit: input should be a valid integer (got '10')"),
        ("agent: {step_limit: 10.0}\n", "agent.step_limit: input should be a valid integer (got 10.0)"),
        ('agent: {single_call: "yes"}\n', "agent.single_call: input should be a valid boolean (got 'yes')"),
        ("model: {cache_hints: 1}\n", "model.cache_hints: input should be a valid boolean (got 1)"),
        ('agent: {cost_limit: "3"}\n', "agent.cost_limit: input should be a valid number (got '3')"),
        ("environment: {image: 5}\n", "environment.image: input should be a valid string (got 5)"),
        ("environment: {env: {A: true}}\n", "environment.env.A: input should be a valid string (got True)"),
        ("environment: {limits: {processes: many}}\n", "environment.limits.processes: input should be a valid integ"),
    ],
)
def test_a_config_mistake_is_one_line_naming_the_key(tmp_path: Path, text: str, message: str) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(text if text.startswith("extends:") else f"extends: default\n{text}")
    with pytest.raises(ConfigError) as error:
        load_config(base)
    assert str(error.value).startswith(f"{base}: ") and message in str(error.value)
    assert "\n" not in str(error.value)


def test_values_of_the_right_type_still_load(tmp_path: Path) -> None:
    base = tmp_path / "base.yaml"
    base.write_text(
        "extends: default\nagent: {cost_limit: 3}\nenvironment: {env: {THREADS: 1}, limits: {memory: 1g}}\n"
    )
    settings = load_config(base)
    assert settings.agent.cost_limit == 3.0 and settings.environment.env["THREADS"] == "1"
    assert settings.environment.limits.memory == 10**9


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("folder", "error: {given}: is a directory, not a config file"),  # was `cannot read it or save it`
        ("missing.yaml", "error: config file not found: {given}"),
        ("list.yaml", "error: {given}: expected a mapping at the top level, got list"),
    ],
)
def test_a_bad_config_option_is_one_line_before_anything_is_written(tmp_path: Path, given: str, message: str) -> None:
    (tmp_path / "folder").mkdir()
    (tmp_path / "list.yaml").write_text("- agent\n")
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    path, out = tmp_path / given, tmp_path / "out"
    args = ["--repo", str(repo), "--task", "t", "--model", "scripted:none.yaml", "--output", str(out)]
    done = invoke("run", *args, "--config", str(path))
    assert (done.returncode, done.stdout, done.stderr) == (2, "", message.format(given=path) + "\n")
    assert not out.exists()


@pytest.mark.parametrize(("token", "refused"), [("x", True), ("a" * 15, True), ("a" * 16, False)])
def test_navigator_serve_refuses_a_short_token(tmp_path: Path, token: str, refused: bool) -> None:
    """A refused token ends the command at once, in one line (exit 2); a long enough one gets past the check (the
    server then stops at the next check: the repository does not exist)."""
    environ = {**os.environ, "LLM_IDE_NAVIGATOR_TOKEN": token}
    args = ["navigator", "serve", "--model", "scripted:/dev/null", "--repo", str(tmp_path / "missing"), "--port", "0"]
    done = invoke(*args, env=environ)
    assert done.returncode == 2
    lines = (done.stdout + done.stderr).strip().splitlines()
    if refused:
        assert lines == [
            "error: $LLM_IDE_NAVIGATOR_TOKEN: the token is too short (at least 16 characters; a shorter one is guessed"
            " by any local process): set a longer one, or unset it for a new one"
        ]
    else:
        assert lines == [f"error: repository not found: {tmp_path / 'missing'}"]


def test_a_reproduction_script_deleting_git_before_the_first_step_ends_as_a_command_does(tmp_path: Path) -> None:
    """The script runs on the original code before the agent's first step and deletes `.git`: the run ended `error`
    with `KeyError: 'reproduction'`; now `environment_error`, one line, the patch the worktree snapshot it held (one
    that deletes it at submit, after the agent's edit, keeps the edit: test_containment.py)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "reproduce.sh").write_text("rm -rf .git; echo gone\n")
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    steps = [
        act("Edit.", "edit", path="a.py", old="x = 1", new="x = 2"),
        reflect(False, "Edited."),
        act("Done.", "submit"),
    ]
    args = ["run", "--repo", str(repo), "--task", "t", "--model", write_script(tmp_path / "s.yaml", steps)]
    args += ["--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "G"]
    args += ["--reproduction", str(tmp_path / "reproduce.sh")]
    done = invoke(*args)
    assert done.returncode == 2, done.stdout + done.stderr  # before any model call: the CLI's "could not start"
    assert "environment_error after 0 model calls" in done.stdout and "KeyError" not in done.stdout + done.stderr
    assert "was deleted or replaced" in done.stderr
    info = json.loads((tmp_path / "out" / "G.traj.json").read_text())["info"]
    assert info["exit_status"] == "environment_error" and "\n" not in info["error"]
    assert info["submission"] == ""  # nothing was edited yet: the last snapshot is the clean worktree
