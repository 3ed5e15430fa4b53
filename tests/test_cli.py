"""The CLI says what it does: real `llm-ide` processes driven by the scripted model (or a loopback endpoint)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import BUGGY_FILES, FIX_SCRIPT, act, reflect, write_script
from conftest import git, interrupt_when, make_git_repo
from in_process import invoke
from openai_server import OpenAIServer
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config
from swebench_fixtures import write_script as write_batch_script

from llm_ide.cli.run import doubled, higher_limit
from llm_ide.config import load_config
from llm_ide.errors import ExitStatus
from llm_ide.run.single import run_task

CLI = [sys.executable, "-c", "from llm_ide.cli import app; app()"]
CLI_SOURCES = Path(__file__).resolve().parents[1] / "llm_ide" / "cli"
WAIT_FOR_GO = "touch waiting; while [ ! -f go ]; do sleep 0.05; done"


def llm_ide(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd, env=env)


def no_tools(tmp_path: Path, **model: object) -> Path:
    path = tmp_path / "no-tools.yaml"
    path.write_text(json.dumps({"environment": {"tools": [], "pull": "never"}, "model": model}))
    return path


def command_tree() -> list[tuple[str, Any]]:
    """Every command of `llm-ide` by its command line, groups and sub-apps included (`tools`, `tools list`, …); each
    command imported (cli/lazy.py)."""
    import typer.main

    from llm_ide.cli import app

    def walk(command: Any, prefix: tuple[str, ...]) -> list[tuple[str, Any]]:
        found = [(" ".join(prefix), command)]
        if hasattr(command, "list_commands"):  # a group (of typer's own click)
            context = command.context_class(command)
            for name in sorted(command.list_commands(context)):
                found += walk(command.get_command(context, name), (*prefix, name))
        return found

    return walk(typer.main.get_command(app), ())


COMMANDS = command_tree()
GROUPS = [(line, command) for line, command in COMMANDS if hasattr(command, "list_commands")]
LEAVES = [line for line, command in COMMANDS if not hasattr(command, "list_commands")]


@pytest.mark.parametrize("command", LEAVES)
def test_help_shows_every_default_and_no_spec_references(command: str, tmp_path: Path) -> None:
    env = {**os.environ, "COLUMNS": "400", "TERM": "dumb"}
    result = llm_ide(*command.split(), "--help", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    rows = [line for line in result.stdout.splitlines() if line.startswith("│") and line.lstrip("│ ").startswith("-")]
    assert any(row.lstrip("│ ").startswith("--help") for row in rows), result.stdout
    options = [row for row in rows if not row.lstrip("│ ").startswith("--help")]
    undocumented = [row.split()[1] for row in options if "[default: " not in row and "[required]" not in row]
    assert undocumented == []
    assert "SPEC" not in result.stdout
    assert "../" not in result.stdout and "shared/" not in result.stdout  # no path outside the repository


def test_every_config_option_is_also_c_as_runs_is(tmp_path: Path) -> None:
    """`llm-ide run -c my.yaml`, then `llm-ide config show -c my.yaml` to see what it ran with: `No such option: -c`
    (config show and navigator serve had --config alone)."""
    taking = {line: names for line, command in COMMANDS for names in [option_names(command, "--config")] if names}
    assert {"run", "config show", "navigator serve", "swebench", "coop run"} <= set(taking)
    assert {line: names for line, names in taking.items() if "-c" not in names} == {}
    (tmp_path / "over.yaml").write_text("agent:\n  step_limit: 9\n")
    env, names = {**os.environ, "LLM_IDE_CONFIG": "off"}, ("-c", "--config")
    short, long = (llm_ide("config", "show", "agent.step_limit", c, "over.yaml", cwd=tmp_path, env=env) for c in names)
    assert (short.returncode, short.stdout.splitlines()[1:]) == (0, ["agent.step_limit: 9  # --config over.yaml"])
    assert (short.stdout, short.stderr) == (long.stdout, long.stderr)


def option_names(command: Any, name: str) -> list[str]:
    """The names of `command`'s option that has `name` among them (none: [])."""
    return next((option.opts for option in getattr(command, "params", []) if name in option.opts), [])


@pytest.mark.parametrize(("group", "command"), GROUPS, ids=[group or "llm-ide" for group, _ in GROUPS])
def test_a_groups_list_gives_each_command_its_first_paragraph_unbroken(
    group: str, command: Any, tmp_path: Path
) -> None:
    """On a terminal wide enough, each command is one row holding its help's first paragraph whole: the source's line
    breaks do not break it (typer's rich help keeps them; llm_ide/cli/lazy.py flows them)."""
    env = {**os.environ, "COLUMNS": "2000", "TERM": "dumb"}
    result = llm_ide(*group.split(), "--help", cwd=tmp_path, env=env)
    assert result.returncode == 0, result.stderr
    section = result.stdout.split("─ Commands ")[1]
    rows = [line.strip("│ ").split(maxsplit=1) for line in section.splitlines() if line.startswith("│")]
    helps = {name: sub.help or "" for name, sub in command.commands.items()}
    expected = {name: text.split("\n\n")[0].replace("\n", " ") for name, text in helps.items()}
    assert {name: text.rstrip("│ ") for name, text in rows} == expected


def test_the_defaults_help_shows_are_the_loaded_configs_values() -> None:
    """--help reads them from the bundled YAML (no settings validated at start-up): each is the validated value."""
    from llm_ide.cli.console import bundled_value

    called = re.compile(r'config_default\(\s*"([^"]+)"(?:,\s*"([^"]+)")?\s*\)')
    shown = {m.groups() for path in CLI_SOURCES.glob("*.py") for m in called.finditer(path.read_text())}
    assert len(shown) >= 9, shown
    for key, config in sorted(shown, key=str):
        value: Any = load_config(config or "default")
        for part in key.split("."):
            value = getattr(value, part)
        assert (key, config, bundled_value(key, config or "default")) == (key, config, value)


@pytest.mark.parametrize(
    ("user", "shown"),
    [
        ("agent:\n  step_limit: 42\n", "(config agent.step_limit = 100; your config {path}: 42)"),
        ("agent:\n  step_limit: 100\n", "(config agent.step_limit = 100)"),
        ("agent: [unclosed\n", "(config agent.step_limit = 100)"),  # said when a command runs, not by --help
    ],
)
def test_run_help_shows_the_users_config_beside_the_default(tmp_path: Path, user: str, shown: str) -> None:
    """`run --help` showed the bundled default although the user's config file set another value (a fresh process:
    the help is made as the command line's module loads); the file is read once, not once per option."""
    (path := tmp_path / "user.yaml").write_text(user)
    env = {**os.environ, "LLM_IDE_CONFIG": str(path), "COLUMNS": "400", "TERM": "dumb", "NO_COLOR": "1"}
    counted = (
        "import atexit, sys; opened = []; atexit.register(lambda: print('opened', len(opened), file=sys.stderr));"
        f" sys.addaudithook(lambda e, a: e == 'open' and str(a[0]) == {str(path)!r} and opened.append(1)); "
    )
    done = subprocess.run(
        [CLI[0], "-c", counted + CLI[2], "run", "--help"], capture_output=True, text=True, env=env, cwd=tmp_path
    )
    assert (done.returncode, done.stderr.splitlines()[-1]) == (0, "opened 1"), done.stderr
    line = next(line for line in done.stdout.splitlines() if "--step-limit" in line)
    assert f"[default: {shown.format(path=path)}]" in line, line


@pytest.mark.parametrize("short", [False, True])
def test_run_takes_mini_swe_agents_short_options(tmp_path: Path, short: bool) -> None:
    """`-m`, `-t`, `-c` and `-o` as mini-swe-agent's `mini` and our own swebench commands take them (`run` refused
    `-o`: "No such option"); without `--repo` (as `mini`) the repository is the current folder (it was required)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(
        tmp_path / "s.yaml",
        [act("Add it.", "bash", command="echo y > b.py"), reflect(False, "made"), act("Done.", "submit")],
    )
    out = str(tmp_path / "out")
    given = {"--model": model, "--task": "make b", "--config": str(no_tools(tmp_path)), "--output": out}
    args = [item for option, value in given.items() for item in ((option[1:3] if short else option), value)]
    where = ([], repo) if short else (["--repo", str(repo)], tmp_path)
    result = invoke("run", *where[0], "--thread-id", "T", *args, cwd=where[1])
    assert result.returncode == 0, result.stdout + result.stderr
    trajectory = json.loads((tmp_path / "out" / "T.traj.json").read_text())
    assert (trajectory["info"]["exit_status"], (repo / "b.py").read_text()) == ("submitted", "y\n")
    assert "+y" in (tmp_path / "out" / "T.patch").read_text()


@pytest.mark.parametrize("given", [["-o", "last.traj.json"], ["--output=out/run.json"]])
def test_run_refuses_minis_trajectory_file_as_its_output_folder(tmp_path: Path, given: list[str]) -> None:
    """mini's `-o` names the trajectory file: given to `run`, it became a folder `last.traj.json/` of the run's files.
    Now one line before the run, nothing made; a folder that is there, whatever its name, is taken."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(
        tmp_path / "s.yaml",
        [act("Add it.", "bash", command="echo y > b.py"), reflect(False, "b"), act("Done.", "submit")],
    )
    args = ["run", "-t", "make b", "-m", model, "-c", str(no_tools(tmp_path)), "--thread-id", "T"]
    refused = invoke(*args, *given, cwd=repo)
    folder = given[-1].rpartition("=")[2]
    said = f"error: -o {folder}: -o is the run's output folder (mini-swe-agent's -o is the trajectory file); give a"
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1) and refused.stderr.startswith(said)
    assert "<folder>/T.traj.json" in refused.stderr and not (repo / folder).exists() and not (repo / "b.py").exists()
    (repo / folder).mkdir(parents=True)
    taken = invoke(*args, *given, cwd=repo)
    assert taken.returncode == 0 and (repo / folder / "T.traj.json").is_file(), taken.stdout + taken.stderr


@pytest.mark.parametrize(
    ("given", "written", "setting"),
    [
        ("agent.step_limit=5", "'agent: {step_limit: 5}'", lambda settings: settings.agent.step_limit == 5),
        ("model.kwargs.stop=it's", "'model: {kwargs: {stop: it'\"'\"'s}}'", lambda s: s.model.kwargs["stop"] == "it's"),
    ],
)
def test_minis_key_value_config_is_refused_with_the_yaml_that_says_it(
    tmp_path: Path, given: str, written: str, setting: Any
) -> None:
    """mini's `-c KEY=VALUE` given to `run` was `config file not found: agent.step_limit=5`; now the line says -c takes
    YAML files and gives the option that says the same, which sets it."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    refused = invoke("run", "-t", "t", "-m", model, "-c", str(no_tools(tmp_path)), "-c", given, cwd=repo)
    said = f"error: --config {given}: it takes YAML files, not mini-swe-agent's KEY=VALUE: -c <(echo {written})\n"
    assert (refused.returncode, refused.stderr) == (2, said)
    assert not (repo / "runs").exists()
    (tmp_path / "said.yaml").write_text(shlex.split(written)[0])
    assert setting(load_config(overrides=[tmp_path / "said.yaml"]))


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


@pytest.mark.parametrize("given", ["-c", "--config="])
def test_a_config_read_from_a_pipe_is_saved_and_the_command_that_goes_on_names_the_copy(
    tmp_path: Path, given: str
) -> None:
    """`-c <(…)`: the command printed named /dev/fd/63, gone once read ("config file not found" when pasted); the
    config is saved beside the run's outputs as it is read, and the command names that file."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    config = json.dumps({"environment": {"tools": [], "pull": "never"}})
    os.mkfifo(pipe := tmp_path / "pipe")
    threading.Thread(target=pipe.write_text, args=(config,), daemon=True).start()  # a writer, as `<(…)` is
    option = ["-c", str(pipe)] if given == "-c" else [f"--config={pipe}"]
    args = ["run", "-t", "trail", "-m", write_script(tmp_path / "s.yaml", script), "-o", "out", "--repo", str(repo)]
    first = invoke(*args, *option, "--thread-id", "T", "--step-limit", "1", cwd=tmp_path)
    assert first.returncode == 1 and "step_limit" in first.stdout, first.stdout + first.stderr
    copy = ["-c", "out/T.config.yaml"] if given == "-c" else ["--config=out/T.config.yaml"]
    again = shlex.split(first.stderr.splitlines()[-1])
    assert again == ["llm-ide", *args, *copy, "--thread-id", "T", "--step-limit", "2"]
    assert (tmp_path / "out" / "T.config.yaml").read_text() == config
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and "had stopped at a limit" in went_on.stdout, went_on.stdout + went_on.stderr
    assert (repo / "trail.txt").read_text() == "one\n"
    assert json.loads((tmp_path / "out" / "T.traj.json").read_text())["info"]["config"]["environment"]["tools"] == []


@pytest.mark.parametrize("name", ["/dev/stdin", "/dev/fd/0"])
def test_a_task_file_naming_standard_input_is_read_as_dash_is(tmp_path: Path, name: str) -> None:
    """`--task-file /dev/stdin < task.txt`: standard input a file, it was taken for one, and the command that goes on
    named /dev/stdin (pasted, it read the terminal without a word, or found the task empty)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    (task := tmp_path / "task.txt").write_text("write the trail\n")
    args = ["run", "-m", write_script(tmp_path / "s.yaml", script), "-c", str(no_tools(tmp_path)), "-o", "out"]
    args += ["--repo", str(repo), "--thread-id", "T"]
    with task.open() as stdin:
        first = subprocess.run(
            [*CLI, *args, "--task-file", name, "--step-limit", "1"], cwd=tmp_path, stdin=stdin, capture_output=True
        )
    stderr = first.stderr.decode()
    assert first.returncode == 1 and "step_limit" in first.stdout.decode(), stderr
    again = shlex.split(stderr.splitlines()[-1])
    assert again == ["llm-ide", *args, "--step-limit", "2"]  # the task left out: the thread holds it
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and "had stopped at a limit" in went_on.stdout, went_on.stdout + went_on.stderr
    assert json.loads((tmp_path / "out" / "T.traj.json").read_text())["task"] == "write the trail\n"


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_config_read_from_standard_input_is_saved_and_read_once(tmp_path: Path, name: str) -> None:
    """`-c - < config.yaml`: a file named `-` was read ("cannot read it or save it"); it is standard input, saved as
    `-c <(…)` is and named so by the command that goes on. With the task read from it too: one line, exit 2 (the
    second reader found it empty)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = [act("One.", "bash", command="echo one >> trail.txt"), reflect(False, "one"), act("Done.", "submit")]
    config = json.dumps({"environment": {"tools": [], "pull": "never"}, "agent": {"step_limit": 1}})
    args = ["run", "-t", "trail", "-m", write_script(tmp_path / "s.yaml", script), "-o", "out", "--repo", str(repo)]
    first = invoke(*args, "-c", name, "--thread-id", "T", cwd=tmp_path, input=config)
    assert first.returncode == 1 and "step_limit" in first.stdout, first.stdout + first.stderr
    again = shlex.split(first.stderr.splitlines()[-1])
    assert again == ["llm-ide", *args, "-c", "out/T.config.yaml", "--thread-id", "T", "--step-limit", "2"]
    assert (tmp_path / "out" / "T.config.yaml").read_text() == config
    went_on = invoke(*again[1:], cwd=tmp_path)
    assert went_on.returncode == 0 and (repo / "trail.txt").read_text() == "one\n", went_on.stdout + went_on.stderr
    both = invoke(*args[:1], *args[3:], "--task-file", "-", "-c", name, "--thread-id", "U", cwd=tmp_path, input="x")
    said = f"error: --task-file - and --config {name} both read standard input, which is read once: give one of them"
    assert both.returncode == 2 and both.stderr.startswith(said) and both.stderr.count("\n") == 1, both.stderr


@pytest.mark.parametrize("name", ["-", "/dev/stdin"])
def test_a_task_file_naming_standard_input_when_it_is_closed_is_one_line(tmp_path: Path, name: str) -> None:
    """`<&-`: an AttributeError's traceback (`/dev/stdin` was a line before it was read as standard input)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    args = ["run", "--repo", str(repo), "--task-file", name, "-m", write_script(tmp_path / "s.yaml", ["submit"])]
    closed = subprocess.run(["sh", "-c", 'exec "$@" <&-', "sh", *CLI, *args], cwd=tmp_path, capture_output=True)
    assert (closed.returncode, closed.stderr.decode()) == (2, f"error: --task-file {name}: standard input is closed\n")


def test_image_implies_docker_and_contradictions_are_one_line_errors(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    model = write_script(tmp_path / "s.yaml", [act("Run it.", "bash", command="touch ran-on-host"), "submit"])
    base = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(no_tools(tmp_path))]
    implied = llm_ide(*base, "--image", "llm-ide-missing:nope", "--output", str(tmp_path / "o1"), cwd=tmp_path)
    assert implied.returncode == 2, implied.stdout + implied.stderr
    assert "--image llm-ide-missing:nope: running in docker" in implied.stdout
    assert "docker" in implied.stderr.lower() and not (repo / "ran-on-host").exists()
    for extra, message in [
        (["--environment", "local", "--image", "x"], "error: --image runs the task in a docker container"),
        (["--environment", "kube"], "error: Invalid value for '--environment': 'kube' is not one of"),
    ]:
        result = llm_ide(*base, *extra, "--output", str(tmp_path / "o2"), cwd=tmp_path)
        assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stderr
        assert result.stderr.startswith(message)
    assert not (repo / "ran-on-host").exists()


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


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["config", "show"], ["tools", "list"]])
def test_a_command_whose_output_pipe_is_closed_ends_quietly_as_sigpipe(tmp_path: Path, args: list[str]) -> None:
    """`llm-ide config show | head -1`: the write that found the pipe closed ended the command as typer ends one on
    Ctrl-C (exit 130, what a script takes for the user's Ctrl-C); it exits 141 as SIGPIPE's (as a run does), with
    nothing on stderr. A child process, its stdout a pipe whose reader is gone before it writes."""
    reader, writer = os.pipe()
    os.close(reader)
    try:
        done = subprocess.run([*CLI, *args], cwd=tmp_path, stdout=writer, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(writer)
    assert (done.returncode, done.stderr) == (141, "")


@pytest.mark.parametrize(
    "args", [["--help"], ["config", "show"], ["--version"], ["tools", "list"], ["graph", "--mermaid"]]
)
def test_a_command_whose_output_cannot_be_written_says_so_in_one_line(tmp_path: Path, args: list[str]) -> None:
    """`llm-ide config show > /dev/full` (a full disk) ended in a traceback; it is one line, exit 1. `--version`,
    `tools list` and `graph` exited 0 in silence: the failed write was a probe of click's, which swallows errors."""
    with open("/dev/full", "w") as full:
        done = subprocess.run([*CLI, *args], cwd=tmp_path, stdout=full, stderr=subprocess.PIPE, text=True)
    assert (done.returncode, done.stderr) == (1, "error: cannot write the command's output: No space left on device\n")


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


def test_inspect_piped_is_not_cropped_and_full_shows_the_whole_story(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    result = run_task(
        "Cart.total ignores quantities.",
        model=write_script(tmp_path / "fix.yaml", FIX_SCRIPT),
        settings=load_config("default", environment={"tools": []}),
        output_dir=tmp_path / "out",
        run_id="fix",
        repo=repo,
    )
    traj = json.loads(result.trajectory_path.read_text())
    edit = next(op for op in traj["operations"] if op["action_type"] == "edit")
    params = json.dumps(edit["action_params"], ensure_ascii=False)
    assert len(params) > 100
    plain = llm_ide("inspect", str(result.trajectory_path), cwd=tmp_path)
    assert plain.returncode == 0 and params in plain.stdout and "…" not in plain.stdout
    full = llm_ide("inspect", "--full", str(result.trajectory_path), cwd=tmp_path)
    assert full.returncode == 0, full.stderr
    shown = " ".join(full.stdout.split())  # tabs are expanded; lines carry the tree's guides
    for op in traj["operations"]:
        for text in (op["thought"], op["summary"], *op["lessons"].splitlines(), *op["observation"].splitlines()):
            assert " ".join(text.split()) in shown
    assert "11.5 != 16.0" in full.stdout  # a failing test run's observation
    assert "patch:" in full.stdout and result.submission.rstrip("\n") in full.stdout


def test_filter_searches_the_whole_id_and_the_batch_counts_finished_instances(tmp_path: Path) -> None:
    dataset, _ = build_dataset(tmp_path / "data", 3)
    model = write_batch_script(tmp_path / "fix.yaml", [FIX_COMMAND])  # the fix, then submit: every instance submits
    args = ["swebench", "--subset", str(dataset), "--environment", "local", "--model", model, "-o", "out"]
    args += ["-c", str(write_config(tmp_path / "c.yaml"))]
    first = llm_ide(*args, "--filter", "calc|text", cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    assert sorted(json.loads((tmp_path / "out" / "preds.json").read_text())) == ["demo__calc-1", "demo__text-1"]
    assert "2 instances run (0 resumed, 2 new), 0 skipped as finished in an earlier run" in first.stdout
    assert "submitted: 2" in first.stdout
    again = llm_ide(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "1 instance run (0 resumed, 1 new), 2 skipped as finished in an earlier run" in again.stdout
    none = llm_ide(*args, "--filter", "nothing-like-this", cwd=tmp_path)
    assert (none.returncode, none.stderr.count("\n")) == (2, 1), none.stderr
    assert none.stderr.startswith("error: no instance selected: --filter 'nothing-like-this' matches none of the 3")


def test_a_run_names_its_baseline_and_warns_of_uncommitted_changes(tmp_path: Path) -> None:
    """The patch is the working tree against HEAD: changes the user had not committed end up in it, so the run says
    so before it starts; a clean repository gets the baseline line only."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n", "b.py": "y = 2\n"})
    head = git(repo, "rev-parse", "HEAD").strip()
    model = write_script(tmp_path / "s.yaml", [act("Nothing to change.", "submit")])
    args = ["run", "--repo", str(repo), "--task", "look", "--model", model, "--config", str(no_tools(tmp_path))]
    clean = llm_ide(*args, "--output", str(tmp_path / "clean"), cwd=tmp_path)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    baseline = f"… baseline: commit {head[:12]} (HEAD); the patch is the working tree's change against it"
    assert baseline in clean.stdout.splitlines() and "uncommitted" not in clean.stdout
    assert "(empty patch)" in clean.stdout

    (repo / "a.py").write_text("x = 10  # work in progress\n")
    (repo / "notes.txt").write_text("todo\n")
    dirty = llm_ide(*args, "--output", str(tmp_path / "dirty"), cwd=tmp_path)
    assert dirty.returncode == 0, dirty.stdout + dirty.stderr
    lines = dirty.stdout.splitlines()
    warning = lines[lines.index(baseline) + 1]
    assert warning == (
        "… warning: the repository has uncommitted changes (a.py, notes.txt): they are not in the baseline, so the "
        "patch will hold them too; commit or stash them first for a patch of the run's own change"
    )
    patch = next((tmp_path / "dirty").glob("*.patch")).read_text()
    assert "+x = 10  # work in progress" in patch and "+todo" in patch  # as the warning said


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["run", "--repo", "/nope/\x1b[31mred\u202etxt", "--task", "x"], "repository not found: /nope/red<U+202E>txt"),
        (["swebench", "--subset", "/nope/\u2066rows.json"], "/nope/<U+2066>rows.json"),
    ],
)
def test_a_usage_error_shows_what_was_typed_in_it_not_obeyed(tmp_path: Path, args: list[str], said: str) -> None:
    """A usage error's line printed the user's text raw: an escape sequence or a bidi control in a path reached the
    terminal (the run's own errors were cleaned)."""
    done = invoke(*args, "--model", "scripted:x.yaml", cwd=tmp_path)
    assert done.returncode == 2 and said in done.stderr, done.stderr
    assert "\x1b" not in done.stderr and not set(done.stderr) & {"\u202e", "\u2066"}


@pytest.mark.parametrize(
    ("ending", "limits", "used", "raised"),
    [
        ("cost_limit", {"cost_limit": 0.5}, {"cost": 0.6}, ("a higher cost limit", ["--cost-limit", "1"])),
        ("cost_limit", {"cost_limit": 0.5}, {"cost": 1.0}, ("a higher cost limit", ["--cost-limit", "2"])),
        ("cost_limit", {"cost_limit": 0.5}, {"cost": 5.0}, ("a higher cost limit", ["--cost-limit", "8"])),
        ("cost_limit", {"token_limit": 500}, {"input_tokens": 900, "output_tokens": 100}, ("token_limit", 2000)),
        ("time_limit", {"wall_time_limit": 60}, {}, ("wall_time_limit", 120)),
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
