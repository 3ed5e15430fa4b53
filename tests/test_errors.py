"""Bad inputs are one line and exit code 2, never a traceback; a terminated run is saved as `interrupted`."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import yaml
from conftest import BASE_IMAGE, base_image_client, closed_port, containers_of, make_git_repo
from in_process import invoke
from swebench_fixtures import build_dataset, write_config
from swebench_fixtures import write_script as write_batch_script

from llm_ide import run_task
from llm_ide.config import load_config
from llm_ide.errors import ExitStatus, LlmIdeError, Terminated, UsageError

REPO_ROOT = Path(__file__).resolve().parents[1]


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd)


def assert_one_line(result: subprocess.CompletedProcess[str], expected: str) -> None:
    lines = result.stderr.strip().splitlines()
    assert (result.returncode, len(lines)) == (2, 1), result.stderr
    assert lines[0].startswith("error: ") and expected in lines[0], lines[0]
    assert "Traceback" not in result.stdout + result.stderr


@pytest.mark.parametrize(
    ("checkpoint", "expected"),
    [
        ("redis://x", "Invalid value for '--checkpoint': use sqlite:PATH, postgres://… or memory (got redis://x)"),
        (
            "postgres://me:hunter22@127.0.0.1:{port}/db",
            "the checkpoint store postgres://me:***@127.0.0.1:{port}/db: cannot",
        ),
        ("sqlite:{tmp}/file/x.sqlite", "the checkpoint store sqlite:{tmp}/file/x.sqlite: cannot open"),
        ("sqlite:{tmp}/garbage.sqlite", "the checkpoint store sqlite:{tmp}/garbage.sqlite: not a usable database"),
        ("", "the checkpoint store sqlite:{tmp}/out/g.checkpoint.sqlite: not a usable database"),  # the folder's own
    ],
)
def test_a_checkpoint_store_that_cannot_be_opened_is_one_line(tmp_path: Path, checkpoint: str, expected: str) -> None:
    """Named as the store, not as `--checkpoint` (which the default store was not given by, nor the Python API's
    `checkpoint`), at the command line and through the API alike."""
    port = closed_port()
    (tmp_path / "file").write_text("a file, not a folder")
    (tmp_path / "garbage.sqlite").write_bytes(b"not a database at all" * 100)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "g.checkpoint.sqlite").write_bytes(b"not a database at all" * 100)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    spec, expected = (text.format(port=port, tmp=tmp_path) for text in (checkpoint, expected))
    (script := tmp_path / "script.yaml").write_text("- unused\n")  # a valid model: the checkpoint is the error
    model, store = f"scripted:{script}", ["--checkpoint", spec] if spec else []
    given = ["--repo", str(repo), "--task", "t", "--model", model, "-o", str(tmp_path / "out"), "--thread-id", "g"]
    result = cli(tmp_path, "run", *given, *store)
    assert_one_line(result, expected)
    assert "hunter22" not in result.stderr
    if "--checkpoint" in expected:  # the command line's own check of the option
        return
    with pytest.raises(UsageError) as raised:
        run_task(
            "t",
            settings=load_config(),
            repo=repo,
            model=model,
            output_dir=tmp_path / "out",
            run_id="g",
            checkpoint=spec or None,
        )
    assert str(raised.value).startswith(expected) and "hunter22" not in str(raised.value), raised.value


@pytest.mark.parametrize("output", [[], ["--output", "elsewhere"]])
def test_a_thread_id_without_a_task_and_no_run_to_take_it_from_is_one_line(tmp_path: Path, output: list[str]) -> None:
    """`--thread-id T` without a task resumes T with its own task; with no run T to take it from, the line says so."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (script := tmp_path / "script.yaml").write_text("- unused\n")
    result = cli(tmp_path, "run", "--repo", str(repo), "--model", f"scripted:{script}", "--thread-id", "T", *output)
    folder = output[-1] if output else "runs/T"
    assert_one_line(
        result, f"give exactly one of --task TEXT or --task-file FILE (no run T in {folder} to take the task from)"
    )
    assert not (tmp_path / folder).exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["--output", "a-file"],
            "output folder a-file: it is a file, not a folder: give a folder (it is created if missing)",
        ),
        (
            ["--output", "a-file/below"],
            "output folder a-file/below: a-file is a file, not a folder: give a folder (it is created if missing)",
        ),
        (["--thread-id", "a/b"], "thread id 'a/b': use letters, digits, '.', '_' and '-' (it names the run's files)"),
        (["--thread-id", "../up"], "thread id '../up': use letters, digits"),
        (["--thread-id", "x" * 129], f"thread id {'x' * 40}… is 129 characters long: at most 128 (it names the run's"),
    ],
)
def test_an_output_that_cannot_be_written_is_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    (tmp_path / "a-file").write_text("not a folder")
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (script := tmp_path / "script.yaml").write_text("- unused\n")  # a valid model: the output is the error
    result = cli(tmp_path, "run", "--repo", str(repo), "--task", "t", "--model", f"scripted:{script}", *args)
    assert_one_line(result, expected)


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["run", "--task", "t", "--thread-id", ""], "thread id '': use letters, digits, '.', '_' and '-'"),
        (["cleanup", "--all", "--dry-run", "--run-id", ""], "--run-id is empty: give a run's id, or leave the option"),
    ],
)
def test_an_empty_id_is_refused_not_taken_for_none_given(tmp_path: Path, args: list[str], expected: str) -> None:
    """`--thread-id "$T"`, `--run-id "$R"` with the variable unset: the run was a new one (not T's, resumed), and
    cleanup took every run's containers (live ones too, with --all). Here its engine is a closed port."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (script := tmp_path / "script.yaml").write_text("- unused\n")
    model = ["--repo", str(repo), "--model", f"scripted:{script}"] if args[0] == "run" else []
    environ = {**os.environ, "DOCKER_HOST": f"tcp://127.0.0.1:{closed_port()}"}
    result = invoke(*args, *model, cwd=tmp_path, env=environ)
    assert_one_line(result, expected)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ["run", "--environment", "kube"],
            "error: Invalid value for '--environment': 'kube' is not one of 'local', 'docker'. "
            "(see: llm-ide run --help)",
        ),
        (
            ["run", "--navigator", "humn"],
            "error: Invalid value for '--navigator': 'humn' is not one of 'off', 'model', 'human', 'mcp'. "
            "(did you mean human?) (see: llm-ide run --help)",
        ),
        (["run", "--step-limit", "many"], "error: Invalid value for '--step-limit'"),
        (["run", "--no-such-option"], "error: No such option: --no-such-option"),
        *(
            (["swebench", "--cost-limit", limit], f"error: Invalid value for '--cost-limit': {said}")
            for limit, said in [
                ("-5", "-5.0 is not in the range x>=0."),
                ("inf", "Input should be a finite number (got inf)"),
            ]
        ),
        (["no-such-command"], "error: No such command 'no-such-command'. (see: llm-ide --help)"),
    ],
)
def test_options_are_checked_at_parse_time_in_one_line(tmp_path: Path, args: list[str], expected: str) -> None:
    """Before anything runs: no model is asked for, no output folder appears."""
    result = cli(tmp_path, *args)
    assert_one_line(result, expected)
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", [["swebench"], ["swebench-single", "-i", "0"]])
def test_a_batch_output_that_is_a_file_is_one_line(tmp_path: Path, command: list[str]) -> None:
    dataset, _ = build_dataset(tmp_path / "data", 1)
    (tmp_path / "taken").write_text("mine\n")
    model = write_batch_script(tmp_path / "s.yaml", ["true"])
    args = ["--subset", str(dataset), "--environment", "local", "--model", model, "--output", "taken"]
    result = cli(tmp_path, *command, *args)
    assert_one_line(result, "error: output folder taken: cannot make it (File exists); give another --output")
    assert (tmp_path / "taken").read_text() == "mine\n"


def test_demo_into_the_same_output_twice_is_one_line(tmp_path: Path) -> None:
    first = cli(tmp_path, "demo", "--output", "D")
    assert first.returncode == 0, first.stdout + first.stderr
    second = cli(tmp_path, "demo", "--output", "D")
    assert_one_line(second, "D already holds a demo project: give another --output, or remove D/project")


@pytest.mark.parametrize(
    ("output", "why"), [("taken", "Not a directory"), ("taken/D", "Not a directory"), ("/proc/D", "No such file")]
)  # a traceback (exit 1)
def test_a_demo_output_that_cannot_be_made_is_one_line(tmp_path: Path, output: str, why: str) -> None:
    (tmp_path / "taken").write_text("mine\n")
    result = cli(tmp_path, "demo", "--output", output)
    assert_one_line(result, f"error: output folder {output}: cannot make it ({why}")
    assert result.stderr.strip().endswith("give another --output") and result.stdout == ""
    assert (tmp_path / "taken").read_text() == "mine\n"


@pytest.mark.parametrize("content", ["instances: {a: [unclosed\n", "- just a list\n", "instances: [a, b]\n"])
def test_a_corrupt_exit_statuses_file_is_said_in_one_line_and_rebuilt(tmp_path: Path, content: str) -> None:
    """Issue 10 §2: the file is derived data, rebuilt from the instances' trajectories (one warning line)."""
    dataset, rows = build_dataset(tmp_path / "data", 1)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "exit_statuses.yaml").write_text(content)
    model = write_batch_script(tmp_path / "s.yaml", ["true"])
    args = ["--subset", str(dataset), "--split", "test", "--environment", "local", "--output", "out"]
    result = cli(tmp_path, "swebench", *args, "--model", model, "--config", str(write_config(tmp_path / "c.yaml")))
    assert result.returncode == 0, result.stderr
    assert "exit_statuses.yaml is corrupt" in result.stderr and "Traceback" not in result.stderr
    rebuilt = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())
    assert list(rebuilt["instances"]) == [rows[0]["instance_id"]]


def test_every_error_carries_its_exit_status_and_code() -> None:
    from llm_ide.config import ConfigError
    from llm_ide.environments.base import EnvironmentFailure
    from llm_ide.models import ModelAuthError, ModelError

    statuses = {cls.__name__: (cls.exit_status, cls.exit_code) for cls in (ModelError, ModelAuthError)}
    assert statuses == {"ModelError": (ExitStatus.MODEL_ERROR, 1), "ModelAuthError": (ExitStatus.MODEL_ERROR, 2)}
    assert (EnvironmentFailure.exit_status, EnvironmentFailure.exit_code) == (ExitStatus.ENVIRONMENT_ERROR, 1)
    assert issubclass(ConfigError, UsageError) and issubclass(UsageError, LlmIdeError)
    unfinished = [status for status in ExitStatus if not status.finished]
    assert unfinished == ["model_error", "interrupted", "awaiting_navigator", "error", "not_started"]
    assert issubclass(Terminated, KeyboardInterrupt) and Terminated(signal.SIGTERM).code == 143


@pytest.mark.parametrize(
    ("line", "said"),
    [
        ("at http://me:p@127.0.0.1:8/v1 (refused)", "at http://me:***@127.0.0.1:8/v1 (refused)"),  # a short one
        ("(got 'ws://me:hunter22@h/mcp')", "(got 'ws://me:***@h/mcp')"),  # quoted ({url!r})
        ("--base-url=http://me:hunter22@h/v1: bad", "--base-url=http://me:***@h/v1: bad"),
        ("dsn host=h password=ab", "dsn host=h password=***"),
    ],
)
def test_a_usage_errors_line_masks_its_credentials_where_they_are(line: str, said: str) -> None:
    """The URL password of a word that does not start with the URL (quoted, after `=`) was said as it is; a short
    one was masked everywhere in the line (each `p` of it a `***`)."""
    assert str(UsageError(line)) == said


def test_a_navigator_url_of_another_scheme_is_refused_without_its_password() -> None:
    """The Python API's line (`got '…'`, the URL quoted): the CLI masked it only as it printed it."""
    from llm_ide.navigator.mcp_client import McpNavigator

    with pytest.raises(UsageError) as refused:
        McpNavigator("ws://me:hunter22@127.0.0.1:1/mcp")
    assert "hunter22" not in str(refused.value) and "ws://me:***@" in str(refused.value)


TERMINATED_RUN = """
import faulthandler
import signal
import sys
from pathlib import Path
from llm_ide import load_config, run_task

faulthandler.register(signal.SIGUSR1, all_threads=True)  # the test's view into a run that does not end

out = Path(sys.argv[1])

def on_event(event):
    if event.kind == "step" and event.step == 1:
        print("step 1 done", flush=True)

run_task(
    "sleep",
    model="scripted:" + sys.argv[2],
    settings=load_config("default", environment={{"tools": [], "type": {kind!r}, "image": {image!r}}}),
    output_dir=out,
    run_id="t1",
    repo=Path(sys.argv[3]),
    on_event=on_event,
)
"""


def terminate_a_run(tmp_path: Path, kind: str) -> tuple[subprocess.Popen[str], dict]:
    from agent_script import act, reflect, write_script

    script = write_script(
        tmp_path / "script.yaml",
        [act("First.", "bash", command="echo one"), reflect(False, "ok"), act("Wait.", "bash", command="sleep 120")],
    )
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    code = textwrap.dedent(TERMINATED_RUN).format(kind=kind, image=BASE_IMAGE)
    process = subprocess.Popen(
        [sys.executable, "-c", code, str(tmp_path / "out"), script.removeprefix("scripted:"), str(repo)],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None and process.stdout.readline() == "step 1 done\n", process.communicate()
    process.send_signal(signal.SIGTERM)
    try:
        process.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGUSR1)  # every thread's stack on stderr, read for a while, then the run killed
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.communicate(timeout=10)
        process.kill()
        pytest.fail(f"the run did not end within 120 s of SIGTERM; its threads:\n{process.communicate()[1]}")
    return process, json.loads((tmp_path / "out" / "t1.traj.json").read_text())


def test_sigterm_of_a_local_run_from_the_python_api_saves_interrupted(tmp_path: Path) -> None:
    process, trajectory = terminate_a_run(tmp_path, "local")
    assert process.returncode == 128 + signal.SIGTERM
    info = trajectory["info"]
    assert (info["exit_status"], info["error"]) == ("interrupted", f"interrupted by signal {signal.SIGTERM}")


@pytest.mark.docker
def test_sigterm_of_a_docker_run_from_the_python_api_saves_interrupted(tmp_path: Path) -> None:
    client = base_image_client()
    process, trajectory = terminate_a_run(tmp_path, "docker")
    assert process.returncode == 128 + signal.SIGTERM
    assert trajectory["info"]["exit_status"] == "interrupted"
    assert containers_of(client, "t1") == []
