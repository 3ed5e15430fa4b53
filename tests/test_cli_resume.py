"""A run that stops — at a limit, on Ctrl-C, a closed output pipe or a model error — prints the command that goes on
(its limit raised above what the run used, its model and endpoint named, no credential printed), and that command
goes on from the last step to the end; a run kept in memory says it cannot. Child processes where the test sends a
signal."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import act, reflect, write_script
from cli_support import CLI, llm_ide, no_tools
from conftest import interrupt_when, make_git_repo
from in_process import invoke
from openai_server import OpenAIServer

from llm_ide.cli.run import doubled, higher_limit
from llm_ide.config import load_config
from llm_ide.errors import ExitStatus

WAIT_FOR_GO = "touch waiting; while [ ! -f go ]; do sleep 0.05; done"


@pytest.mark.parametrize(
    ("limit", "raised"),
    [
        (["--step-limit", "2"], ["--step-limit", "4"]),
        (["--step-limit=2"], ["--step-limit", "4"]),
        (["-c", "tokens.yaml"], ["-c", "out/T.limits.yaml"]),  # a limit no option sets: a file of the run's doubles it
    ],
)
def test_a_run_stopped_at_its_limit_prints_the_command_that_goes_on_and_it_does(
    tmp_path: Path, limit: list[str], raised: list[str]
) -> None:
    """The command doubles the limit that stopped the run (its own value dropped from the line); a limit of the config
    files (`agent.token_limit`, `agent.wall_time_limit`) is doubled in a --config file the run writes (the command
    named the setting to raise, and pasted as printed it stopped again at once); pasted as printed, again after each
    stop, the run goes on from its last step to its end."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one")]
    script += [act("Two.", "bash", command="echo two >> trail.txt"), reflect(False, "two"), act("Done.", "submit")]
    (tmp_path / "tokens.yaml").write_text("agent: {token_limit: 1000}\n")  # a call is over 1,000
    args = ["run", "-t", "trail", "-m", write_script(tmp_path / "s.yaml", script), "-c", str(no_tools(tmp_path))]
    args += ["-o", "out", "--repo", str(repo), "--thread-id", "T"]
    went_on = invoke(*args, *limit, cwd=tmp_path)
    for stop in range(4):
        lines = went_on.stderr.splitlines()
        if went_on.returncode == 0 and stop:
            break
        said = f"agent.token_limit doubled to {1000 * 2 ** (stop + 1)} (" if raised[0] == "-c" else "a higher step"
        assert went_on.returncode == 1 and lines[-2].startswith(f"it goes on from its last step with {said}"), lines
        again = shlex.split(lines[-1])
        assert again == ["llm-ide", *args, *(limit if raised[0] == "-c" else []), *raised]
        went_on = invoke(*again[1:], cwd=tmp_path)
        assert "had stopped at a limit" in went_on.stdout, went_on.stdout + went_on.stderr
    assert went_on.returncode == 0, went_on.stdout + went_on.stderr
    assert (repo / "trail.txt").read_text() == "one\ntwo\n"


@pytest.mark.parametrize("given", ["--task", "--task-file -"])
def test_run_interrupted_prints_the_resume_command_which_resumes_and_writes_the_patch(
    tmp_path: Path, given: str
) -> None:
    """Also with the task read from standard input (`--task-file -`, which said "task file not found", as did a pipe
    `<(…)`): the resume command leaves the task out, the stream being gone and the thread holding it (it repeated the
    whole task as `--task '…'`, lines and quotes in it); the task given again must be the thread's."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n", ".gitignore": "waiting\ngo\n"})
    model = write_script(
        tmp_path / "script.yaml",
        [
            act("Note it.", "bash", command="echo one >> trail.txt"),
            reflect(False, "wrote one"),
            act("Wait.", "bash", command=WAIT_FOR_GO),
            reflect(False, "waited"),
            act("Done.", "submit"),
        ],
    )
    task = ["--task", "write the trail"] if given == "--task" else ["--task-file", "-"]
    args = ["run", "--repo", "repo", *task, "--model", model, "--config", "no-tools.yaml"]
    no_tools(tmp_path)
    first = subprocess.Popen(
        [*CLI, *args], cwd=tmp_path, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert first.stdin is not None
    first.stdin.write("write the trail\nit's 'long'\n" if given != "--task" else "")
    first.stdin.close()
    first.stdin = None  # (communicate would flush it)
    stdout, stderr = interrupt_when(repo / "waiting", first, seconds=120)
    assert first.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "interrupted" in stderr
    resume = stderr.splitlines()[stderr.splitlines().index("resume with:") + 1]
    words = shlex.split(resume)
    assert words[:2] == ["llm-ide", "run"] and "--thread-id" in words and "--task-file" not in words
    assert words[words.index("--task") + 1] == "write the trail" if given == "--task" else "--task" not in words
    assert resume == shlex.join(words) and "\n" not in resume
    run_id = words[words.index("--thread-id") + 1]

    (repo / "go").touch()
    second = llm_ide(*words[1:], cwd=tmp_path)
    assert second.returncode == 0, second.stdout + second.stderr
    assert f"resuming run {run_id} after step 1" in second.stdout
    patch = (tmp_path / "runs" / run_id / f"{run_id}.patch").read_text()
    traj = json.loads((tmp_path / "runs" / run_id / f"{run_id}.traj.json").read_text())
    assert patch == traj["info"]["submission"] and "+one" in patch
    assert patch.rstrip("\n") in second.stdout

    third = llm_ide(*words[1:], cwd=tmp_path)  # once more: said to have finished, its result again, nothing run
    assert third.returncode == 0 and third.stdout.splitlines()[0] == (
        f"… run {run_id} had already finished (submitted): its result again; "
        "a new --thread-id or output folder runs the task anew"
    )
    assert patch.rstrip("\n") in third.stdout and "starting environment" not in third.stdout

    other = [w if w != "write the trail" else "another task" for w in words[1:]]
    other = llm_ide(*other, *(["--task", "another task"] if given != "--task" else []), cwd=tmp_path)
    assert (other.returncode, other.stderr.count("\n")) == (2, 1), other.stderr
    assert other.stderr.startswith(f"error: thread id '{run_id}' is a run of another task")


@pytest.mark.parametrize("ending", ["ctrl-c", "model error", "step limit", "token limit"])
def test_a_run_kept_in_memory_says_it_cannot_be_resumed_not_how_to(tmp_path: Path, ending: str) -> None:
    """`--checkpoint memory`: Ctrl-C (or a model error) printed a resume command, which started the run over; a stop
    at a limit said nothing: it says that it cannot go on, and which checkpoint would let it."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n", ".gitignore": "waiting\ngo\n"})
    script = [act("Wait.", "bash", command=WAIT_FOR_GO), reflect(False, "waited"), act("Done.", "submit")]
    args = ["run", "--repo", "repo", "--task", "wait", "--config", str(no_tools(tmp_path, max_retries=0))]
    args += ["--checkpoint", "memory", "--thread-id", "m"]
    if ending == "ctrl-c":
        args += ["--model", write_script(tmp_path / "script.yaml", script)]
        run = subprocess.Popen([*CLI, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stdout, stderr = interrupt_when(repo / "waiting", run, seconds=120)
        code, said = run.returncode, "interrupted: saved at its last completed step"
    elif ending.endswith("limit"):
        (tmp_path / "tokens.yaml").write_text("agent: {token_limit: 100}\n")
        limit = ["--step-limit", "1"] if ending == "step limit" else ["-c", "tokens.yaml"]
        script[0] = act("Note.", "bash", command="echo one >> trail.txt")
        done = llm_ide(*args, *limit, "--model", write_script(tmp_path / "script.yaml", script), cwd=tmp_path)
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
        used = re.search(r"token limit \(100\) is reached \(([\d,]+) tokens\)", stderr)  # (doubled while not above)
        raised = "a higher step limit" if used is None else f"agent.token_limit doubled to {doubled(100, int(used[1]))}"
        assert (code, stderr.splitlines()[-1]) == (
            1,
            f"it cannot go on from its last step with {raised}: its thread was in memory only (--checkpoint memory) "
            "and is gone; the same command starts it over, and one with a checkpoint that outlives the process (the "
            "default, or --checkpoint sqlite:PATH|postgres://…) can go on after a limit",
        ), stdout + stderr
        assert "--thread-id" not in stderr and not list((tmp_path / "runs" / "m").glob("*.limits.yaml"))
        return
    else:
        with OpenAIServer(replies=[400]) as server:
            done = llm_ide(*args, "--model", "test-model", "--base-url", server.url, cwd=tmp_path,
                           env={**os.environ, "OPENAI_API_KEY": "sk-test-key-for-the-loopback-server"})  # fmt: skip
        code, stdout, stderr, said = done.returncode, done.stdout, done.stderr, "the run stopped (model_error)"
    assert (code, "Traceback" in stderr) == (130 if ending == "ctrl-c" else 1, False), stdout + stderr
    assert said in stderr and "resume with:" not in stderr and "goes on where it stopped" not in stderr
    assert "(--checkpoint memory): it cannot be resumed; the same command starts it over" in stderr


def test_a_run_whose_output_pipe_closes_ends_as_interrupted_and_resumes(tmp_path: Path) -> None:
    """`llm-ide run … | head -2`: the write that finds the pipe closed ends the run as Ctrl-C would (it ended `error`
    with no reason), told on stderr with the command that resumes it; exit 141, as SIGPIPE's."""
    repo = make_git_repo(tmp_path / "repo", {"README.md": "demo\n", ".gitignore": "waiting\ngo\n"})
    model = write_script(
        tmp_path / "script.yaml",
        [act("Wait.", "bash", command=WAIT_FOR_GO), reflect(False, "waited"), act("Done.", "submit")],
    )
    args = ["run", "--repo", "repo", "--task", "wait", "--model", model, "--config", "no-tools.yaml"]
    args += ["--thread-id", "p"]
    no_tools(tmp_path)
    first = subprocess.Popen([*CLI, *args], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert first.stdout is not None and first.stdout.readline()  # its first line read, then the reader goes
    first.stdout.close()
    (repo / "go").touch()  # should it get to its step: the step ends and its line finds the pipe closed
    stderr = first.stderr.read() if first.stderr else ""
    assert first.wait(timeout=120) == 141, stderr
    assert "Traceback" not in stderr and "interrupted: saved at its last completed step" in stderr
    resume = stderr.splitlines()[stderr.splitlines().index("resume with:") + 1]
    info = json.loads((tmp_path / "runs" / "p" / "p.traj.json").read_text())["info"]
    assert info["exit_status"] == "interrupted"
    second = llm_ide(*shlex.split(resume)[1:], cwd=tmp_path)
    assert second.returncode == 0 and "submitted" in second.stdout, second.stdout + second.stderr


def test_model_retries_and_their_reason_show_on_the_console(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = no_tools(tmp_path, max_retries=3, retry_base_delay=0.01, retry_max_delay=0.02)
    with OpenAIServer(replies=[429, act("Done.", "submit")]) as server:
        result = llm_ide(
            "run", "--repo", str(repo), "--task", "t", "--model", "test-model", "--base-url", server.url,
            "--config", str(config), "--thread-id", "T", "--output", str(tmp_path / "out"),
            cwd=tmp_path, env={**os.environ, "OPENAI_API_KEY": "sk-test-key-for-the-loopback-server"},
        )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    retry = [line for line in result.stderr.splitlines() if "retry 1/3" in line]
    assert len(retry) == 1 and "429" in retry[0] and "model test-model" in retry[0]
    assert "goes on where it stopped" not in result.stderr


@pytest.mark.parametrize("chosen", ["--model", "LLM_IDE_MODEL"])
def test_a_run_ended_by_a_model_error_says_the_command_that_goes_on(tmp_path: Path, chosen: str) -> None:
    """With the model chosen by $LLM_IDE_MODEL the command names it: pasted in a shell without the variable it said
    "no model" (with another value, it went on with another model)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = no_tools(tmp_path, max_retries=1, retry_base_delay=0.01, retry_max_delay=0.02)
    args = ["run", "--repo", str(repo), "--task", "t", "--config", str(config)]
    environ = {k: v for k, v in os.environ.items() if k != "LLM_IDE_MODEL"}
    environ["OPENAI_API_KEY"] = "sk-test-key-for-the-loopback-server"
    given = ["--model", "test-model"] if chosen == "--model" else []
    first = environ if given else {**environ, "LLM_IDE_MODEL": "test-model"}
    with OpenAIServer(replies=[500, 500, act("Done.", "submit")]) as server:  # the server is down, then back
        failed = llm_ide(*args, *given, "--base-url", server.url, cwd=tmp_path, env=first)
        *_, said, command = failed.stderr.splitlines()
        assert (failed.returncode, said) == (1, "the run goes on where it stopped (model_error) with:")
        assert command.startswith("llm-ide run --repo ") and " --thread-id run-" in command
        words = shlex.split(command)
        assert words[words.index("--model") + 1] == "test-model" and words.count("--model") == 1
        resumed = llm_ide(*words[1:], cwd=tmp_path, env=environ)
    assert resumed.returncode == 0 and "goes on where it stopped" not in resumed.stderr, resumed.stderr
    assert "resuming run run-" in resumed.stdout and "submitted" in resumed.stdout


@pytest.mark.parametrize("credentials", ["", "user:hunter22-url-password@"])
def test_a_stopped_run_names_the_endpoint_openai_base_url_gave_it(tmp_path: Path, credentials: str) -> None:
    """The command that goes on named no endpoint: pasted where $OPENAI_BASE_URL is unset or another, it went on at
    another one. A URL holding a password is never printed: the command leaves that one to the variable."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    config = no_tools(tmp_path, max_retries=1, retry_base_delay=0.01, retry_max_delay=0.02)
    args = ["run", "--repo", str(repo), "--task", "t", "--config", str(config), "--model", "test-model"]
    environ = {k: v for k, v in os.environ.items() if k not in ("LLM_IDE_MODEL", "OPENAI_BASE_URL")}
    environ["OPENAI_API_KEY"] = "sk-test-key-for-the-loopback-server"
    with OpenAIServer(replies=[500, 500, act("Done.", "submit")]) as server:
        url = server.url.replace("://", f"://{credentials}", 1)
        failed = llm_ide(*args, cwd=tmp_path, env={**environ, "OPENAI_BASE_URL": url})
        assert failed.returncode == 1 and "hunter22" not in failed.stdout + failed.stderr, failed.stderr
        words = shlex.split(failed.stderr.splitlines()[-1], comments=True)
        if credentials:
            assert "--base-url" not in words
        else:
            assert words[words.index("--base-url") + 1] == server.url and words.count("--base-url") == 1
        elsewhere = url if credentials else "http://127.0.0.1:1/v1"  # pasted in a shell where it is another
        resumed = llm_ide(*words[1:], cwd=tmp_path, env={**environ, "OPENAI_BASE_URL": elsewhere})
    assert resumed.returncode == 0 and "resuming run run-" in resumed.stdout, resumed.stdout + resumed.stderr
    assert "submitted" in resumed.stdout


@pytest.mark.parametrize("given", ["OPENAI_BASE_URL", "--base-url"])
@pytest.mark.parametrize(
    "credential", ["user:hunter22-url-password@", "?api-key=hunter22-query-token", "?code=hunter22-query-token"]
)
def test_a_credential_of_the_endpoint_is_not_printed_in_the_command_that_goes_on(
    tmp_path: Path, given: str, credential: str
) -> None:
    """A token in the endpoint's query string (a shape the secrets filter did not know) was printed in the command
    that goes on, and in the run's error line, log, trajectory and checkpoint; a password typed into --base-url was
    printed back in that command. The command masks it, or leaves the URL to the variable, and its comment says so."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    args = ["run", "--repo", str(repo), "--task", "t", "--config", str(no_tools(tmp_path, max_retries=0))]
    environ = {k: v for k, v in os.environ.items() if k not in ("LLM_IDE_MODEL", "OPENAI_BASE_URL")}
    environ["OPENAI_API_KEY"] = "sk-test-key-for-the-loopback-server"
    with OpenAIServer(replies=[500]) as server:
        url = server.url.replace("://", f"://{credential}") if credential.endswith("@") else server.url + credential
        option = ["--base-url", url] if given == "--base-url" else []
        env = environ if option else {**environ, "OPENAI_BASE_URL": url}
        failed = llm_ide(*args, "--model", "test-model", *option, "--thread-id", "t", cwd=tmp_path, env=env)
    assert failed.returncode == 1 and "hunter22" not in failed.stdout + failed.stderr, failed.stdout + failed.stderr
    assert [
        path for path in (tmp_path / "runs").rglob("*") if path.is_file() and b"hunter22" in path.read_bytes()
    ] == []
    command, note = failed.stderr.splitlines()[-1].split("  # ")
    words = shlex.split(command)
    if option:
        masked = url.replace("hunter22-url-password", "***").replace("hunter22-query-token", "***")
        assert words[words.index("--base-url") + 1] == masked
        assert note == "*** stands for a password or token given on the command line, not printed: put it back"
    else:
        assert "--base-url" not in words
        assert note == "the endpoint is $OPENAI_BASE_URL's, as set now: its URL holds a credential, not printed"


@pytest.mark.parametrize(
    ("ending", "limits", "used", "raised"),
    [
        ("cost_limit", {"cost_limit": 0.5}, {"cost": 0.6}, ("a higher cost limit", ["--cost-limit", "1"])),
        ("cost_limit", {"cost_limit": 0.5}, {"cost": 1.0}, ("a higher cost limit", ["--cost-limit", "2"])),
        ("cost_limit", {"cost_limit": 0.5}, {"cost": 5.0}, ("a higher cost limit", ["--cost-limit", "8"])),
        ("cost_limit", {"token_limit": 500}, {"input_tokens": 900, "output_tokens": 100}, ("token_limit", 2000)),
        ("time_limit", {"wall_time_limit": 60}, {}, ("wall_time_limit", 120)),
        ("time_limit", {"wall_time_limit": 60}, {"elapsed": 250.5}, ("wall_time_limit", 480)),
    ],
)
def test_the_limit_a_stopped_run_goes_on_under_is_above_what_it_used(
    tmp_path: Path, ending: str, limits: dict[str, float], used: dict[str, float], raised: tuple[str, Any]
) -> None:
    """One call can overshoot a limit by more than the limit itself ($1 spent of $0.50): the doubled limit ($1) would
    stop the run again at once. The limit is doubled until it is above what the run used."""
    settings = load_config("default", agent=limits)
    said = higher_limit(ExitStatus(ending), used, settings, tmp_path / "limits.yaml")
    if isinstance(raised[1], list):
        assert said == raised
    else:
        key, value = raised
        assert said == (
            f"agent.{key} doubled to {value} (a --config file: {tmp_path / 'limits.yaml'})",
            ["-c", str(tmp_path / "limits.yaml")],
        )
        assert yaml.safe_load((tmp_path / "limits.yaml").read_text()) == {"agent": {key: value}}


def test_a_run_far_past_its_wall_time_limit_is_given_a_limit_above_the_time_it_spent(tmp_path: Path) -> None:
    """The wall-time limit was doubled from its own value alone, not until above the time the run had spent (as the
    cost and token limits are): a run whose steps took more than twice its limit got a command that, pasted, said
    `had already finished (time_limit)` and doubled the limit once more, never going on."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    (tmp_path / "time.yaml").write_text("agent: {wall_time_limit: 0.000001}\n")  # a step takes more than 2 µs
    args = ["run", "-t", "trail", "-m", write_script(tmp_path / "s.yaml", script), "-c", str(no_tools(tmp_path))]
    stopped = invoke(*args, "-o", "out", "--repo", str(repo), "--thread-id", "T", "-c", "time.yaml", cwd=tmp_path)
    info = json.loads((tmp_path / "out" / "T.traj.json").read_text())["info"]
    raised = yaml.safe_load((tmp_path / "out" / "T.limits.yaml").read_text())["agent"]["wall_time_limit"]
    assert (stopped.returncode, info["exit_status"]) == (1, "time_limit"), stopped.stdout + stopped.stderr
    assert raised > info["elapsed"] > 0.000002
    lines = stopped.stderr.splitlines()
    assert lines[-2].startswith(f"it goes on from its last step with agent.wall_time_limit doubled to {raised:g} ")
    went_on = invoke(*shlex.split(lines[-1])[1:], cwd=tmp_path)
    assert "had stopped at a limit" in went_on.stdout, went_on.stdout + went_on.stderr
    assert "had already finished" not in went_on.stdout + went_on.stderr
