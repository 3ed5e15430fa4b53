"""A run's environment, limits, task and output folder are checked alike at every door (`llm-ide run`, the Python
API, the Studio graphs) and by every command that takes them (run, swebench, swebench-single, coop run): one line,
nothing started or written."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, write_script
from conftest import make_git_repo
from doors_support import NAVIGATOR, SAMPLED, studio_graph_run, studio_run
from in_process import invoke

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.run.single import run_task


def test_an_environment_without_its_image_is_one_line_at_every_door(tmp_path: Path) -> None:
    """A docker run without an image started (its folder, its log, its trajectory) and ended `environment_error`."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    line = "the docker environment needs an image: give "
    with pytest.raises(UsageError) as raised:
        run_task("t", model=model, settings=load_config(), repo=repo, output_dir=tmp_path / "out", run_id="r",
                 environment="docker")  # fmt: skip
    assert str(raised.value) == f"{line}`image` (or environment.image)"
    argv = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--environment", "docker"]
    done = invoke(*argv, "--output", str(tmp_path / "out"), env={**os.environ, "LLM_IDE_CONFIG": "off"})
    assert (done.returncode, done.stderr) == (2, f"error: {line}--image IMAGE (or environment.image)\n")
    final = studio_run({"repo": str(repo), "model": model, "config": {"environment": {"type": "docker"}}}, "no-image")
    assert (final["exit_status"], final["error"]) == ("error", f"{line}environment.image in the graph input's `config`")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"cost_limit": float("nan")}, "settings: agent.cost_limit: input should be a finite number (got nan)"),
        ({"step_limit": -1}, "settings: agent.step_limit: input should be greater than or equal to 0 (got -1)"),
    ],
)
def test_a_limit_that_is_no_number_is_one_line_at_every_door(tmp_path: Path, values: dict[str, Any], line: str) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with pytest.raises(UsageError, match=f"^{line.replace('(', '[(]').replace(')', '[)]')}$"):
        run_task(
            "t", model="scripted:x.yaml", settings=load_config(agent=values), output_dir=tmp_path / "o", run_id="r"
        )
    settings = load_config()
    settings.agent.__dict__.update(values)  # around the validation: the preflight validates again
    with pytest.raises(UsageError, match="^settings: agent"):
        run_task("t", model="scripted:x.yaml", settings=settings, output_dir=tmp_path / "o", run_id="r", repo=repo)
    final = studio_run({"repo": str(repo), "model": "scripted:x.yaml", "config": {"agent": values}}, "doors-limit")
    assert (final["exit_status"], final["error"]) == ("error", line.replace("settings:", "the graph input's `config`:"))
    option = "--cost-limit" if "cost_limit" in values else "--step-limit"
    argv = ["run", "--repo", str(repo), "--task", "t", "--model", "scripted:x.yaml"]
    done = invoke(*argv, option, str(next(iter(values.values()))), env={**os.environ, "LLM_IDE_CONFIG": "off"})
    assert (done.returncode, done.stderr) == (2, "error: " + line.replace("settings:", "command line:") + "\n")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("task", ["", " \n\t"])
def test_an_empty_task_is_the_same_line_at_every_door(tmp_path: Path, task: str) -> None:
    """The command line and the Python API said "the task is empty", the Studio graphs "the graph input needs `task`
    (the task text)" for a task given blank: one check (run/usage.check_task), one line."""
    line = "the task is empty: say what the agent should do"
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api(task, model=model, settings=load_config(), repo=repo, output_dir=tmp_path / "out", run_id="r")
        assert str(raised.value) == line
    done = invoke("run", "--repo", str(repo), "--task", task, "--model", model, "-o", str(tmp_path / "out"),
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "error: the task is empty (--task): say what the agent should do\n")
    for graph in ("graph", SAMPLED, NAVIGATOR, "attempts"):
        inputs = {"task": task, "repo": str(repo), "model": model}
        inputs |= {"output": str(tmp_path / "out")} if graph == "attempts" else {}
        final = studio_graph_run(graph, inputs, f"empty-{graph}")
        assert (final["exit_status"], final["error"]) == ("error", line), graph
    assert not (tmp_path / "out").exists()


def test_an_output_folder_that_is_the_repository_is_named_as_each_door_names_it(tmp_path: Path) -> None:
    """The Python API's `output_dir=` and the attempts graph's `output` were told to "give --output a folder"."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    line = (
        f"the output folder is the repository itself ({repo}): the agent's commands would see and change the run's "
        "own files; give {} a folder inside or outside it"
    )
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api("Fix Cart.total.", model=model, settings=load_config(), repo=repo, output_dir=repo, run_id="r")
        assert str(raised.value) == line.format("`output_dir`")
    done = invoke("run", "--repo", str(repo), "--task", "t", "--model", model, "-o", str(repo),
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert (done.returncode, done.stderr) == (2, f"error: {line.format('--output')}\n")
    final = studio_graph_run("attempts", {"repo": str(repo), "model": model, "output": str(repo)}, "output-is-repo")
    assert (final["exit_status"], final["error"]) == ("error", line.format("the graph input's `output`"))
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert status.stdout == "", "nothing was written in the repository"


RUN_LIMITS = [
    (("--step-limit", "-1"), "agent.step_limit: input should be greater than or equal to 0 (got -1)"),
    (("--cost-limit", "nan"), "agent.cost_limit: input should be a finite number (got nan)"),
    (("--cost-limit", "-1"), "agent.cost_limit: input should be greater than or equal to 0 (got -1.0)"),
]


@pytest.mark.parametrize(
    ("command", "option", "line"),
    [
        *((command, *limit) for command in [("run", "--task", "t"), ("swebench-single",)] for limit in RUN_LIMITS),
        (("swebench",), *RUN_LIMITS[0]),  # (its --cost-limit is the batch's, a limit of its own)
    ],
)
def test_a_run_limit_is_checked_alike_by_every_command_that_sets_it(
    tmp_path: Path, command: tuple[str, ...], option: tuple[str, str], line: str
) -> None:
    """`swebench`'s and `swebench-single`'s --step-limit was click's "-1 is not in the range x>=0", swebench-single's
    --cost-limit "settings: agent.cost_limit: …", where `run` says "command line: agent.…"."""
    done = invoke(*command, "--model", "scripted:x.yaml", *option, cwd=tmp_path,
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert (done.returncode, done.stderr) == (2, f"error: command line: {line}\n")


@pytest.mark.parametrize(
    "command", [("run", "--task", "t"), ("swebench",), ("swebench-single",), ("coop", "run", ".", "--pair", "1,2")]
)
def test_an_unknown_environment_is_the_same_line_from_every_command(tmp_path: Path, command: tuple[str, ...]) -> None:
    """`run` said click's "'kube' is not one of 'local', 'docker'", the SWE-bench commands "unknown environment
    'kube': use docker or local", `coop run` "… use local or docker"."""
    done = invoke(*command, "--model", "scripted:x.yaml", "--environment", "kube", cwd=tmp_path,
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    name = " ".join(command[:2] if command[0] == "coop" else command[:1])
    said = "error: Invalid value for '--environment': 'kube' is not one of 'local', 'docker'."
    assert (done.returncode, done.stderr) == (2, f"{said} (see: llm-ide {name} --help)\n")


ENVIRONMENT_HELP = "<local|docker> local (on this host, in the repository) or docker (in a container, on a copy)."


@pytest.mark.parametrize("command", [("run",), ("swebench",), ("swebench-single",), ("coop", "run")])
def test_every_command_takes_environment_as_one_type_with_one_help(tmp_path: Path, command: tuple[str, ...]) -> None:
    """`run` took a choice (`DockerEnvironment`, which the SWE-bench commands take as mini-swe-agent does, refused),
    the others text; each said the kinds its own way ("docker (one container per instance) or local.", "local or
    docker.")."""
    shown = invoke(*command, "--help", env={**os.environ, "COLUMNS": "400"})
    row = next(line for line in shown.stdout.splitlines() if "--environment " in line or "--environment," in line)
    assert ENVIRONMENT_HELP in " ".join(row.split()), row
    given = {"run": ("--task", "t"), "coop": (".", "--pair", "1,2")}.get(command[0], ())
    done = invoke(*command, *given, "--model", "scripted:none.yaml", "--environment", "LocalEnvironment",
                  cwd=tmp_path, env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert done.returncode != 0 and "--environment" not in done.stderr, done.stderr
