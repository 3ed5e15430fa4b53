"""The Python API's own arguments (`run_task`, `run_attempts`): a wrong type, a missing or unknown one, mini's
trajectory file as the output folder, paths as text, no repository, an unknown kind of checkpoint store, an image —
each said in the API's words before anything starts; a listener that raises ends the run with its error saved."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, write_script
from conftest import closed_port, make_git_repo

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.run.single import run_task


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"task": None}, "the run's `task` must be text, not NoneType None"),
        ({"task": 5, "model": ["m"]}, "the run's `task` must be text, not int 5; `model` must be text, not list ['m']"),
        ({"base_url": 8080}, "the run's `base_url` must be text, not int 8080"),
        ({"repo": 5}, "the run's `repo` must be a path, not int 5"),
        (
            {"output_dir": 5, "checkpoint": 1},
            "the run's `checkpoint` must be text, not int 1; `output_dir` must be a path, not int 5",
        ),
        ({"task_vars": ["x"]}, "the run's `task_vars` must be a mapping of names to values, not list ['x']"),
        ({"cost_budget": 1.5}, "the run's `cost_budget` must be a shared budget (CostBudget), not float 1.5"),
        (
            {"variants": "navigator"},
            "the run's `variants` must be a list of variants (Variant classes or instances), not str 'navigator'",
        ),
        ({"variants": [print]}, "the run's `variants` holds <built-in function print>, which is no Variant"),
        ({"carried_lessons": 3}, "the run's `carried_lessons` must be a list of texts, not int 3"),
        ({"on_event": 3}, "the run's `on_event` must be a function (a callable), not int 3"),
        (
            {"on_model_call": "print", "ask": [input]},
            "the run's `on_model_call` must be a function (a callable), not str 'print'; "
            "`ask` must be a function (a callable), not list [<built-in function input>]",
        ),
    ],
)
@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_the_python_api_says_which_argument_has_the_wrong_type(
    tmp_path: Path, door: Any, given: dict[str, Any], line: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    values = {"task": "Fix Cart.total.", "model": write_script(tmp_path / "s.yaml", FIX_SCRIPT), "repo": repo}
    values |= {"output_dir": tmp_path / "out"} | given
    with pytest.raises(UsageError) as raised:
        door(values.pop("task"), settings=load_config(), run_id="r", **values)
    assert str(raised.value) == line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"run_id": None}, "the run needs run_id"),
        ({"run_id": None, "output_dir": None}, "the run needs output_dir, run_id"),
        (
            {"settings": None, "run_id": None},
            "the run needs settings (settings=load_config(): `from llm_ide import load_config`, the default config), "
            "run_id",
        ),
        ({"step_limit": 3}, "the run takes no argument step_limit (step_limit is a setting: load_config(agent="),
        ({"settings": "default"}, "the run's `settings` must be settings (load_config(...)), not str 'default'"),
    ],
)
def test_the_python_api_says_which_argument_is_missing_or_unknown(
    tmp_path: Path, given: dict[str, Any], line: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    values = {"model": "scripted:none.yaml", "settings": load_config(), "repo": repo, "output_dir": tmp_path / "out"}
    values = {key: value for key, value in (values | {"run_id": "r"} | given).items() if value is not None}
    for door in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            door("Fix Cart.total.", **values)
        assert str(raised.value).startswith(line)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("output", ["last.traj.json", Path("out/run.json")])
@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_the_python_api_refuses_minis_trajectory_file_as_its_output_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, door: Any, output: str | Path
) -> None:
    """As `llm-ide run -o x.json` (tests/test_cli.py): was taken, a folder `last.traj.json/` of the run's files made.
    Now the same one line, nothing made; a folder that is there, whatever its name, is taken."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    monkeypatch.chdir(tmp_path)
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    run = {"model": model, "settings": load_config(environment={"tools": []}), "repo": repo, "run_id": "r"}
    with pytest.raises(UsageError) as raised:
        door("Fix Cart.total.", output_dir=output, **run)
    assert str(raised.value) == (
        f"`output_dir` {output}: `output_dir` is the run's output folder (mini-swe-agent's -o is the trajectory "
        "file); give a folder: the trajectory is <folder>/r.traj.json"
    )
    assert not Path(output).exists() and not Path("out").exists()
    Path(output).mkdir(parents=True)
    result = door("Fix Cart.total.", output_dir=output, **run)
    assert result.exit_status == "submitted" and (Path(output) / "r.traj.json").is_file()


@pytest.mark.parametrize("listener", ["on_event", "on_model_call", "on_command"])
def test_a_listener_that_raises_ends_the_run_error_saved_and_one_at_the_end_reaches_the_caller(
    tmp_path: Path, listener: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    run = {"model": model, "settings": load_config(environment={"tools": []}), "repo": repo}

    def raising(kinds: tuple[str, ...]) -> Any:
        def listen(told: Any) -> None:
            if told.kind in kinds:
                raise ValueError(f"a bug in {listener}")

        return listen

    told = {listener: raising(("start", "step"))}
    result = run_task("Fix Cart.total.", output_dir=tmp_path / "a", run_id="r", **run, **told)
    info = json.loads((tmp_path / "a" / "r.traj.json").read_text())["info"]
    assert (result.exit_status, result.error) == ("error", f"ValueError: a bug in {listener}")
    assert (info["exit_status"], info["error"]) == ("error", f"ValueError: a bug in {listener}")
    if listener == "on_event":
        with pytest.raises(ValueError, match="a bug in on_event"):
            run_task("Fix Cart.total.", output_dir=tmp_path / "b", run_id="r", on_event=raising(("end",)), **run)
        assert json.loads((tmp_path / "b" / "r.traj.json").read_text())["info"]["exit_status"] == "submitted"


def test_the_python_api_takes_its_paths_as_text(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "fix.yaml", FIX_SCRIPT)
    out = str(tmp_path / "out")
    settings = load_config(environment={"tools": []})
    result = run_task("Fix Cart.total.", model=model, settings=settings, repo=str(repo), output_dir=out, run_id="r")
    assert result.exit_status == "submitted" and result.trajectory_path == tmp_path / "out" / "r.traj.json"


@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_an_image_given_to_the_python_api_runs_in_its_container_as_the_command_lines_does(
    tmp_path: Path, door: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`image=` was ignored by the Python API: the run went on the host, in the repository itself, where `--image`
    runs in docker (and with `--environment local` is refused). Here the Docker engine is a closed port."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "fix.yaml", FIX_SCRIPT)
    run = {"model": model, "settings": load_config(environment={"tools": []}), "repo": repo, "image": "absent:1"}
    line = "`image` runs the task in a docker container: it cannot go with `environment` local"
    with pytest.raises(UsageError, match=f"^{line}$"):
        door("Fix Cart.total.", output_dir=tmp_path / "local", run_id="r", environment="local", **run)
    assert not (tmp_path / "local").exists()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{closed_port()}")
    result = door("Fix Cart.total.", output_dir=tmp_path / "out", run_id="r", **run)
    assert result.exit_status == "environment_error" and "the Docker engine is not reachable" in result.error
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert changed.stdout == "", "the repository on the host was left alone"


@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_a_run_without_a_repository_names_the_python_apis_argument_before_it_starts(tmp_path: Path, door: Any) -> None:
    """run_attempts' callers were told "--repo PATH" (the command line always has one: the current folder); run_task's
    run started (its folder, log and trajectory) and ended environment_error, "(--repo PATH)" its error."""
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    settings = load_config(attempts={"max": 2 if door is run_attempts else 1}, environment={"tools": []})
    with pytest.raises(UsageError) as raised:
        door("Fix Cart.total.", model=model, settings=settings, output_dir=tmp_path / "out", run_id="r")
    assert str(raised.value) == "a run in the local environment needs a repository (`repo`)"
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("api", [run_task, run_attempts])
def test_an_unknown_kind_of_checkpoint_store_names_the_apis_argument(tmp_path: Path, api: Any) -> None:
    """run_task's and run_attempts' callers, who pass checkpoint=, were told "--checkpoint bogus: …" (the command
    line's option, which checks its own value), once the run had made its folder."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    with pytest.raises(UsageError) as raised:
        api("t", model=model, settings=load_config(), repo=repo, output_dir=tmp_path / "out", run_id="r",
            checkpoint="bogus")  # fmt: skip
    assert str(raised.value) == "`checkpoint` bogus: unknown kind of store; use sqlite:PATH, postgres://… or memory"
    assert not (tmp_path / "out").exists()
