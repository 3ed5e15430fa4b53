"""The CLI says what it does: every command's help and its defaults, the options mini-swe-agent's users type, what a
run says before it starts (its baseline, an image, a usage error), a batch's --filter and counts; real `llm-ide`
commands driven by the scripted model. A stopped run's command that goes on is in test_cli_resume, standard input and
output in test_cli_streams."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import act, reflect, write_script
from cli_support import CLI, llm_ide, no_tools
from conftest import git, make_git_repo
from in_process import invoke
from swebench_fixtures import FIX_COMMAND, build_dataset, write_config
from swebench_fixtures import write_script as write_batch_script

from llm_ide.config import load_config

CLI_SOURCES = Path(__file__).resolve().parents[1] / "llm_ide" / "cli"


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
