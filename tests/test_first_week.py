"""What a newcomer meets in the first week, through the real CLI: bad input is one line with the right exit code, the
demo's Ctrl-C says where it stopped and how to go on, SWE-bench runs from local bundles, an evaluation that graded
nothing fails, and the command line answers --version, --help and completion without importing the agent."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import socket
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect, single_call, write_script
from conftest import git, interrupt_when, make_git_repo, require_bwrap, require_docker, wait_for
from in_process import invoke, run_script

CLI = [sys.executable, "-m", "llm_ide"]
HEAVY = ("langgraph", "langchain", "llm_ide.composition", "llm_ide.graph", "llm_ide.cli.run", "llm_ide.run")
FLASK = "pallets__flask-5014"
DONE = act("The name is checked; submit.", "submit")
EMPTY_NAME_FIX = act(
    "Blueprint refuses a dotted name[1](src/flask/blueprints.py:193); an empty one must be refused too.",
    "edit",
    path="src/flask/blueprints.py",
    old='        if "." in name:\n',
    new='        if not name:\n            raise ValueError("\'name\' may not be empty.")\n\n        if "." in name:\n',
)


def llm_ide(*args: str, cwd: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return invoke(*args, cwd=cwd, env={**os.environ, "LLM_IDE_CONFIG": "off", "COLUMNS": "200", **(env or {})})


def one_line(result: subprocess.CompletedProcess[str], starts: str) -> None:
    assert (result.returncode, result.stderr.count("\n")) == (2, 1), result.stdout + result.stderr
    assert result.stderr.startswith(f"error: {starts}"), result.stderr
    assert "Traceback" not in result.stdout + result.stderr


def test_a_scripted_model_given_a_folder_is_one_line(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "replies").mkdir()
    result = llm_ide("run", "--repo", str(repo), "--task", "t", "--model", "scripted:replies", cwd=tmp_path)
    one_line(result, "scripted model: replies is a directory: give a YAML file of replies")
    assert not (tmp_path / "runs").exists()


def test_a_folder_that_is_no_repository_or_has_no_commit_is_refused_and_left_as_it_was(tmp_path: Path) -> None:
    model = write_script(tmp_path / "s.yaml", [act("Write.", "bash", command="echo x > made.txt"), "<submit></submit>"])
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "notes.txt").write_text("mine\n")
    result = llm_ide("run", "--repo", str(plain), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(result, f"{plain} is not a git repository: the run's patch is the change against a commit")
    assert result.stderr.rstrip().endswith(f"git -C {plain} add -A && git -C {plain} commit -m base")
    assert sorted(path.name for path in plain.iterdir()) == ["notes.txt"]  # no .git, nothing run, nothing written

    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "a.py").write_text("x = 1\n")
    git(fresh, "init", "-q", "-b", "main")
    git(fresh, "add", "a.py")
    before = git(fresh, "status", "--porcelain")
    result = llm_ide("run", "--repo", str(fresh), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(result, f"{fresh} has no commit yet: the run's patch is the change against one; make it first")
    assert git(fresh, "status", "--porcelain") == before == "A  a.py\n" and not (fresh / "made.txt").exists()
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize("inside", [".git", ".git/refs"])
def test_a_folder_inside_a_git_directory_is_refused_with_the_work_tree_to_give(tmp_path: Path, inside: str) -> None:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    before = sorted(path.name for path in (repo / inside).iterdir())
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    result = llm_ide("run", "--repo", str(repo / inside), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(
        result, f"{repo / inside} is inside the git directory {repo / '.git'}, not a work tree: give --repo {repo}"
    )
    assert "init" not in result.stderr  # never the advice to make a repository in there
    assert sorted(path.name for path in (repo / inside).iterdir()) == before and not (tmp_path / "runs").exists()


def test_another_users_repository_that_git_refuses_is_one_line_with_git_s_reason(tmp_path: Path) -> None:
    if os.geteuid() != 0:
        pytest.skip("only root can give a repository to another user")
    tmp_path.chmod(0o755)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    subprocess.run(["chown", "-R", "65534:65534", str(repo)], check=True)
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    result = llm_ide("run", "--repo", str(repo), "--task", "t", "--model", model, cwd=tmp_path)
    one_line(result, f"git refuses {repo}: it is another user's repository (git's dubious ownership)")
    assert result.stderr.rstrip().endswith(f"git config --global --add safe.directory {repo}")
    assert "init" not in result.stderr and not (tmp_path / "runs").exists()


HOSTS = "a local run shares the host's network"
LONG = f"/tmp/{'x' * 300}/data"


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"network": "nnone"}, f"environment.network: 'nnone': {HOSTS}"),
        ({"network": None}, f"environment.network: None: {HOSTS}"),
        ({"network": "None"}, f"environment.network: 'None': {HOSTS}"),
        ({"network": "host"}, None),
        ({"mount_at": "relative/x"}, "environment.mount_at: relative/x: a mount point must be an absolute path"),
        ({"mount_at": "/"}, "environment.mount_at: /: a mount point must be an absolute path"),
        ({"mount_at": "/proc/llm-ide-x"}, "environment.mount_at: /proc/llm-ide-x: a mount point must be an absolute"),
        (
            {"mount_at": "/testbed", "sandbox": "none"},
            "environment.mount_at (/testbed) needs bubblewrap, and environment.sandbox is none",
        ),  # fmt: skip
        ({"mount_at": "/testbed"}, None),
        ({"writable": ["~/no-such-cache"]}, "environment.writable: ~/no-such-cache: no such file or folder (make it"),
        ({"writable": ["."]}, None),
        ({"readable": ["~/.pyenv", "/no-such-data"]}, "environment.readable: /no-such-data: no such file or folder"),
        ({"readable": ["~/no-such-toolchain"]}, "environment.readable: ~/no-such-toolchain: no such file or folder"),
        ({"readable": ["~/.pyenv", "~/go/bin", "."]}, None),  # the bundled list's toolchains: shown where there
        ({"readable": [LONG]}, f"environment.readable: {LONG}: cannot be reached (File name too long)"),
        ({"writable": [LONG]}, f"environment.writable: {LONG}: cannot be reached (File name too long)"),
    ],  # a path whose lookup fails (too long; as a user, under another's folder: permission denied) was a traceback
)
def test_a_local_run_s_network_and_mount_point_are_checked_before_it_starts(
    tmp_path: Path, environment: dict[str, str | None], said: str | None
) -> None:
    """Locally `none` cuts the commands off the network and any other value kept it: a typo of none, or null, gave
    them the host's network without a word. A mount point bwrap cannot make, or no bwrap to make it, was said after
    the environment started, in three lines. A writable path not there was left out of the sandbox without a word
    (its commands found it read-only); a readable one too (a typo showed nothing)."""
    if "mount_at" in environment and said is None:
        require_bwrap()  # (a mount point is bubblewrap's)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"environment": {**environment, "tools": []}}))
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", "c.yaml", "-o", "out"]
    (home := tmp_path / "home").mkdir()  # (no toolchain in it)
    result = llm_ide(*args, cwd=tmp_path, env={"HOME": str(home)} if "readable" in environment else None)
    if said is None:
        assert result.returncode == 0 and "submitted" in result.stdout, result.stdout + result.stderr
        return
    one_line(result, said)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("given", ["file", "stream"])
def test_a_config_file_s_relative_paths_are_relative_to_its_folder(tmp_path: Path, given: str) -> None:
    """`writable: [cache]` in conf/c.yaml was ./cache wherever the command ran (refused there: no such folder), where
    `extends:` in it is relative to conf/; `sockets: [agent.sock]` too (the socket in conf/ was masked). A config read
    from a stream has no folder: its paths are the current folder's, in the copy a resume reads too."""
    require_bwrap()  # (the cache writable: a command writes into it; the socket masked but the one listed)
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    environment = {"tools": [], "writable": ["cache"], "readable": ["data"], "sockets": ["agent.sock"]}
    text = yaml.safe_dump({"environment": environment})
    folder = tmp_path / "conf" if given == "file" else tmp_path
    for name in ("cache", "data"):
        (folder / name).mkdir(parents=True)
    (tmp_path / "conf").mkdir(exist_ok=True)
    (tmp_path / "conf" / "c.yaml").write_text(text)
    connect = f"import socket; socket.socket(socket.AF_UNIX).connect({str(folder / 'agent.sock')!r})"
    command = f"echo hit > {folder}/cache/entry && python3 -c {shlex.quote(connect)} && echo answered"
    steps = [act("Write.", "bash", command=command), reflect(False, "Wrote."), DONE]
    model = write_script(tmp_path / "s.yaml", steps)
    config = ["-c", "conf/c.yaml"] if given == "file" else ["-c", "-"]
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, *config, "-o", "out", "--thread-id", "T"]
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(folder / "agent.sock"))
        server.listen()
        result = invoke(*args, cwd=tmp_path, input=None if given == "file" else text)
    assert result.returncode == 0 and "submitted" in result.stdout, result.stdout + result.stderr
    assert (folder / "cache" / "entry").read_text() == "hit\n"
    observation = json.loads((tmp_path / "out" / "T.traj.json").read_text())["operations"][0]["observation"]
    assert observation.strip() == "answered", observation
    if given == "stream":
        kept = yaml.safe_load((tmp_path / "out" / "T.config.yaml").read_text())["environment"]
        assert [kept[key] for key in ("writable", "readable", "sockets")] == [
            [str(tmp_path / name)] for name in ("cache", "data", "agent.sock")
        ]


DOCKER_NETWORKS = "a docker run joins a docker network by its name (the default llm-ide, host, yours) or has none"


@pytest.mark.parametrize(
    ("command", "kind", "network", "said"),
    [
        ("run", "docker", None, f"environment.network: None: {DOCKER_NETWORKS}"),
        ("swebench", "docker", None, f"environment.network: None: {DOCKER_NETWORKS}"),
        ("swebench", "local", "nnone", f"environment.network: 'nnone': {HOSTS}"),
    ],
)
def test_a_network_of_null_in_docker_or_a_typo_in_a_batch_is_refused_before_it_starts(
    tmp_path: Path, command: str, kind: str, network: str | None, said: str
) -> None:
    """In docker, null was docker's default bridge (the network, and the host's services, for a user who meant none)
    without a word; a batch never checked the network at all (a typo of none: the host's network)."""
    if kind == "docker":
        require_docker()
    environment = {"network": network, "tools": [], "pull": "never"}  # (a regression pulls nothing, clones nothing)
    (tmp_path / "c.yaml").write_text(yaml.safe_dump({"environment": environment}))
    model = write_script(tmp_path / "s.yaml", ["<submit></submit>"])
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    if command == "run":
        args = ["run", "--repo", str(repo), "--task", "t", "--image", "llm-ide-base:bookworm"]
    else:
        row = {"instance_id": "demo__x-1", "repo": str(repo), "base_commit": "0" * 40, "problem_statement": "p"}
        (tmp_path / "d.jsonl").write_text(json.dumps(row) + "\n")
        args = ["swebench", "--subset", "d.jsonl", "--environment", kind]
    result = llm_ide(*args, "--model", model, "--config", "c.yaml", "-o", "out", cwd=tmp_path)
    one_line(result, said)
    assert not (tmp_path / "out" / "demo__x-1").exists()


def test_limits_of_zero_mean_none_and_the_help_says_so(tmp_path: Path) -> None:
    for command, said in [
        ("run", "Maximum number of operations; 0: no limit."),
        ("run", "Maximum model cost in USD; 0: no limit."),
        ("swebench", "Maximum number of operations per instance; 0: no limit."),
        (
            "swebench",
            "Maximum model cost in USD of the whole batch, what its earlier runs in --output spent included; "
            "0: no limit.",
        ),
        ("swebench-single", "Maximum number of operations per instance; 0: no limit."),
        ("swebench-single", "Maximum model cost in USD; 0: no limit."),  # was "Cost limit (USD) of this run."
    ]:
        shown = llm_ide(command, "--help", cwd=tmp_path, env={"COLUMNS": "400"})
        assert shown.returncode == 0 and said in shown.stdout, shown.stdout
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    result = llm_ide("run", "--repo", str(repo), "--task", "t", "--model", "m", "--step-limit", "-1", cwd=tmp_path)
    one_line(result, "command line: agent.step_limit: input should be greater than or equal to 0 (got -1)")


@pytest.mark.parametrize(
    ("argv", "env", "expected"),
    [
        (["--version"], {}, "llm-ide "),
        (["--help"], {}, "swebench-single"),
        ([], {"_LLM_IDE_COMPLETE": "complete_bash", "COMP_WORDS": "llm-ide sw", "COMP_CWORD": "1"}, "swebench\n"),
    ],
    ids=["version", "help", "completion"],
)
def test_version_help_and_completion_import_no_command(
    tmp_path: Path, argv: list[str], env: dict[str, str], expected: str
) -> None:
    result = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "llm_ide", *argv],
        capture_output=True,
        text=True,
        env={**os.environ, "COLUMNS": "200", **env},
        cwd=tmp_path,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr[-2000:]
    assert expected in result.stdout
    imported = {line.split("|")[-1].strip() for line in result.stderr.splitlines() if line.startswith("import time:")}
    assert "llm_ide.cli" in imported
    assert sorted(name for name in imported if name.startswith(HEAVY)) == []


EVERY_HELP = """
import os, sys
import typer.main
from llm_ide.cli import app

not_for_help, not_for_run = sys.argv[1 : sys.argv.index("--")], sys.argv[sys.argv.index("--") + 1 :]

def imported(prefixes):
    return sorted(name for name in sys.modules if name.startswith(tuple(prefixes)))

def helped(argv):
    try:
        app([*argv, "--help"])
    except SystemExit as exit:
        assert exit.code == 0, (argv, exit.code)

def walk(command, prefix):
    if hasattr(command, "list_commands"):
        context = command.context_class(command)
        return [line for name in sorted(command.list_commands(context))
                for line in walk(command.get_command(context, name), [*prefix, name])]
    return [prefix]

os.environ.update(_LLM_IDE_COMPLETE="complete_bash", COMP_WORDS="llm-ide run --thou", COMP_CWORD="2")
try:
    app([])
except SystemExit as exit:
    assert exit.code == 0, exit.code
for name in ("_LLM_IDE_COMPLETE", "COMP_WORDS", "COMP_CWORD"):
    del os.environ[name]
helped(["run"])
print("run --help imported", imported(not_for_run))
commands = walk(typer.main.get_command(app), [])
for argv in commands:
    helped(argv)
print(len(commands), imported(not_for_help))
"""
USAGE_ERRORS = """
import sys
from llm_ide.cli import app

command, not_imported = sys.argv[1 : sys.argv.index("--")], tuple(sys.argv[sys.argv.index("--") + 1 :])
for line in sys.stdin.read().splitlines():
    try:
        app([*command, *(line.split("|") if line else [])])
    except SystemExit as exit:
        shown = sorted({name if name.startswith("llm_ide") else name.split(".")[0] for name in sys.modules})
        print(exit.code, [name for name in shown if name.startswith(not_imported)])
"""
# a usage error of `run` before its preflight: not the agent, its variants, LangGraph or LangChain, an HTTP client
NOT_FOR_USAGE_ERRORS = ("langgraph", "langchain", "langsmith", "httpx", "llm_ide.composition", "llm_ide.variant",
                        "llm_ide.graph", "llm_ide.models", "llm_ide.run.thread", "llm_ide.run.preflight",
                        "llm_ide.run.request", "llm_ide.reproduction.variant")  # fmt: skip


def test_a_usage_error_of_run_before_its_preflight_imports_no_agent_variant_langgraph_or_http(tmp_path: Path) -> None:
    """Each check `run` makes before its preflight (the thread id, the output folder, the task, the reproduction
    script, the image, the config files, the settings and the options' values, the repository), in their order, says
    its line without importing what the run would need."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"}).resolve()
    (tmp_path / "bad.yaml").write_text("agent: [\n")
    (tmp_path / "unknown.yaml").write_text("nonsense: 1\n")
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "plain").mkdir()
    cases = {
        "--task|x|--thread-id|a b": "thread id 'a b': use letters, digits, '.', '_' and '-' (it names the run's files)",
        "--task|x|-o|x.json|--thread-id|t": "-o x.json: -o is the run's output folder (mini-swe-agent's -o is the "
        "trajectory file); give a folder: the trajectory is <folder>/t.traj.json",
        "--task|x|-o|repo": f"the output folder is the repository itself ({repo}): the agent's commands "
        "would see and change the run's own files; give --output a folder inside or outside it",
        "": "give exactly one of --task TEXT or --task-file FILE",
        "--task| ": "the task is empty (--task): say what the agent should do",
        "--task|x|--reproduction|missing.py": "reproduction script not found: missing.py",
        "--task|x|--image|i|--environment|local": "--image runs the task in a docker container: it cannot go with "
        "--environment local",
        "--task|x|-c|agent.step_limit=5": "--config agent.step_limit=5: it takes YAML files, not mini-swe-agent's "
        "KEY=VALUE: -c <(echo 'agent: {step_limit: 5}')",
        "--task|x|-c|missing.yaml": "config file not found: missing.yaml",
        "--task|x|-c|bad.yaml": "bad.yaml: not valid YAML: while parsing a flow node did not find expected node "
        'content in "<unicode string>", line 2, column 1',
        "--task|x|-c|unknown.yaml": "unknown.yaml: nonsense: unknown setting",
        "--task|x|--step-limit|-1": "command line: agent.step_limit: input should be greater than or equal to 0 "
        "(got -1)",
        "--task|x|--repo|missing": "repository not found: missing",
        "--task|x|--repo|a.txt": "a.txt is a file, not a repository: give the folder of a git repository",
        "--task|x|--repo|plain": "plain is not a git repository: the run's patch is the change against a commit; make "
        "one first: git -C plain init && git -C plain add -A && git -C plain commit -m base",
    }
    usage_errors(tmp_path, ["run", "--repo", "repo", "-m", "scripted:driver.yaml"], cases, NOT_FOR_USAGE_ERRORS)


def usage_errors(folder: Path, command: list[str], cases: dict[str, str], not_imported: tuple[str, ...]) -> None:
    """Each of `cases` (what follows `command`, split at `|`) in one child process, one after the other: its line,
    exit 2, and nothing of `not_imported` imported by then."""
    argv = [sys.executable, "-c", USAGE_ERRORS, *command, "--", *not_imported]
    result = subprocess.run(argv, input="\n".join(cases), capture_output=True, text=True, cwd=folder, timeout=120)
    assert [f"error: {said}" for said in cases.values()] == result.stderr.splitlines()
    assert result.stdout.splitlines() == ["2 []"] * len(cases)


def test_a_replay_of_a_missing_or_unknown_trajectory_imports_no_replay_run_or_langgraph(tmp_path: Path) -> None:
    """`replay` checked its trajectory after importing the replay's runner (the run, LangGraph, LangChain, httpx)."""
    (tmp_path / "other.json").write_text("{}\n")
    cases = {
        "missing.traj.json": "trajectory not found: missing.traj.json",
        "other.json": "other.json: not a trajectory of a known format (mini-swe-agent-1, llm-ide-1)",
    }
    heavy = ("langgraph", "langchain", "langsmith", "httpx", "llm_ide.replay.run", "llm_ide.run.single")
    usage_errors(tmp_path, ["replay", "--repo", "repo"], cases, heavy)


NOT_FOR_BATCH_ERRORS = ("langgraph", "langchain", "langsmith", "httpx", "llm_ide.composition", "llm_ide.graph",
                        "llm_ide.models", "llm_ide.run.single", "llm_ide.attempts", "llm_ide.swebench.batch",
                        "llm_ide.swebench.instances", "docker", "requests", "llm_ide.environments.docker",
                        "llm_ide.environments.local")  # fmt: skip


def test_a_swebench_output_dataset_or_selection_refused_imports_no_batch_attempts_or_langgraph(tmp_path: Path) -> None:
    """`swebench` checked its output folder, dataset, --slice and --filter in the batch's module, and `swebench-single`
    its dataset and --instance after importing it (the run, attempts, the composition, LangGraph, LangChain, httpx);
    and the check of --environment (docker by default) loaded the kind it named: the docker SDK and requests."""
    row = {"instance_id": "demo__calc-1", "problem_statement": "x", "repo": "demo/calc", "base_commit": "abc"}
    (tmp_path / "data.jsonl").write_text(json.dumps(row) + "\n")
    (tmp_path / "a.txt").write_text("x\n")
    batch = {
        "--subset|missing.jsonl": "dataset file not found: missing.jsonl",
        "--slice|a:b": "invalid slice 'a:b': expected integers, e.g. 0:10",
        "--filter|[": "invalid --filter regex '[': unterminated character set at position 0",
        "-o|a.txt": "output folder a.txt: cannot make it (File exists); give another --output",
    }
    usage_errors(tmp_path, ["swebench", "--subset", "data.jsonl", "-m", "scripted:s.yaml"], batch, NOT_FOR_BATCH_ERRORS)
    single = {
        "--subset|missing.jsonl": "dataset file not found: missing.jsonl",
        "--instance|3": "instance index 3 is out of range (the dataset has 1 instances)",
        "--instance|calc-9": "no instance 'calc-9' in the dataset",
    }
    command = ["swebench-single", "--subset", "data.jsonl", "-m", "scripted:s.yaml"]
    usage_errors(tmp_path, command, single, NOT_FOR_BATCH_ERRORS)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "data.jsonl"]


NOT_FOR_COOP_ERRORS = ("langgraph", "langchain", "langsmith", "httpx", "llm_ide.composition", "llm_ide.graph",
                       "llm_ide.models", "llm_ide.run.single", "llm_ide.coop.run", "llm_ide.coop.phases",
                       "llm_ide.coop.batch", "llm_ide.coop.pair", "llm_ide.environments.local")  # fmt: skip


def test_a_coop_task_setting_pair_or_folder_refused_imports_no_pair_graph_or_langgraph(tmp_path: Path) -> None:
    """`coop run` checked --setting against an enum beside the pair's graph, and `coop evaluate` a folder without pairs
    against the batch's pairs.json beside the batch's runner: one line cost LangGraph, LangChain and httpx (and the
    check of --environment loaded the local kind)."""
    from test_coop_evaluate import build_task

    task, repo = build_task(tmp_path)
    (tmp_path / "a.txt").write_text("x\n")
    (tmp_path / "plain").mkdir()
    root = tmp_path.resolve()
    run = {
        "missing|--pair|1,2": f"task folder not found: {root}/missing",
        "plain|--pair|1,2": f"{root}/plain: not a task folder (expected dataset/<repo>_task/task<id>/)",
        f"{task}|--pair|1,2|--setting|coop,bogus": "unknown setting 'bogus': use single, solo, coop or coop_ablation",
        f"{task}|--pair|1,2|--setting|solo|--setting|solo": "setting 'solo' given twice: give each setting once",
        f"{task}|--pair|1,2|-o|a.txt": "--output a.txt: it is a file, not a folder: give a folder (it is created if "
        "missing)",
        f"{task}|--pair|1,2": "no repository source: give --repo-source PATH (a local clone or a git bundle)",
        f"{task}|--pair|1,1|--repo-source|{repo}": "bad pair '1,1': give two different feature numbers as i,j (or "
        "`all`)",
    }
    usage_errors(tmp_path, ["coop", "run", "-m", "scripted:s.yaml"], run, NOT_FOR_COOP_ERRORS)
    evaluate = {name: f"{root}/{name}: neither a coop run folder (run.json) nor a folder of them" for name in
                ("missing", "plain", "a.txt")}  # fmt: skip
    (unfinished := tmp_path / "unfinished").mkdir()
    (unfinished / "run.json").write_text(json.dumps({"task": str(task), "pair": [1, 2], "setting": "coop",
                                                     "model": "m", "repo_source": str(repo)}))  # fmt: skip
    evaluate["unfinished"] = (
        f"{root}/unfinished: patch_agent1.patch, patch_agent2.patch missing (the run did not finish: "
        "run it again to resume)"
    )
    usage_errors(tmp_path, ["coop", "evaluate"], evaluate, NOT_FOR_COOP_ERRORS)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["a.txt", "dataset", "plain", "source", "unfinished"]


NOT_FOR_HELP = ("langgraph", "langchain", "langsmith", "docker", "requests", "httpx", "trio", "mcp", "jedi")
NOT_FOR_HELP_OF_OURS = ("llm_ide.composition", "llm_ide.config", "llm_ide.graph", "llm_ide.run", "llm_ide.models")
# `run --help` and the completion of its options: no environment kind or interface, no settings, no templates, no
# pydantic (typer 0.29 validates every option with it: +0.17 s of CPU, hence pyproject's pin)
NOT_FOR_RUN_HELP = ("llm_ide.environments.", "llm_ide.settings", "llm_ide.prompting", "jinja2", "pydantic")


def test_every_commands_help_and_the_completion_of_an_option_import_no_agent_docker_http_or_tracing(
    tmp_path: Path,
) -> None:
    """`llm-ide run --help` (and every command's), the completion of `run --thou`: the options and the bundled
    config's defaults only; not the agent, the settings' validation, the docker SDK, an HTTP client or langsmith (nor,
    for `run`'s, the environments' interface, the settings' models, pydantic or Jinja)."""
    argv = [sys.executable, "-c", EVERY_HELP, *NOT_FOR_HELP, *NOT_FOR_HELP_OF_OURS, "--", *NOT_FOR_RUN_HELP]
    result = subprocess.run(argv, capture_output=True, text=True, env={**os.environ, "COLUMNS": "200"}, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    lines = result.stdout.splitlines()
    count, imported = lines[-1].split(" ", 1)
    for_run = next(line for line in lines if line.startswith("run --help imported "))
    from llm_ide.cli import COMMANDS

    assert (lines[0], for_run) == ("--thoughts", "run --help imported []"), result.stdout[-2000:]
    assert (int(count) >= len(COMMANDS), imported) == (True, "[]"), result.stdout[-2000:]


def test_the_listing_says_what_each_command_says_and_completing_a_command_loads_it(tmp_path: Path) -> None:
    from llm_ide.cli import COMMANDS, EXTRA_COMMANDS, app, extra_app
    from llm_ide.cli.lazy import Lazy

    for table, group in ((COMMANDS, app), (EXTRA_COMMANDS, extra_app)):
        assert group.info.cls.lazy == {name: Lazy(*where.split(":")) for name, where in table.items()}
        for name, lazy in group.info.cls.lazy.items():
            assert lazy.help() and lazy.help() == lazy.load(name).help, name
    environ = {"_LLM_IDE_COMPLETE": "complete_bash", "COMP_WORDS": "llm-ide run --thou", "COMP_CWORD": "2"}
    completed = llm_ide(cwd=tmp_path, env=environ)
    assert completed.returncode == 0 and completed.stdout.split() == ["--thoughts"], completed.stdout


def python_shim(folder: Path) -> Path:
    """A `python3` that stops at the demo's first command (the agent's check of `median`) until `.go` exists,
    saying so with `.waiting` in the project; every other use is the real python3."""
    folder.mkdir()
    real = shutil.which("python3")
    (shim := folder / "python3").write_text(
        "#!/bin/sh\n"
        'case "$*" in *"from calc.stats import median"*)\n'
        "  touch .waiting; while [ ! -f .go ]; do sleep 0.05; done;;\n"
        "esac\n"
        f'exec {real} "$@"\n'
    )
    shim.chmod(0o755)
    return folder


def test_ctrl_c_during_the_demo_says_where_it_stopped_and_the_demo_goes_on_from_there(tmp_path: Path) -> None:
    out = tmp_path / "demo"
    environ = {**os.environ, "LLM_IDE_CONFIG": "off", "PATH": f"{python_shim(tmp_path / 'shim')}:{os.environ['PATH']}"}
    process = subprocess.Popen(
        [*CLI, "demo", "-o", str(out)],
        cwd=tmp_path,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environ,
    )
    stdout, stderr = interrupt_when(out / "project" / ".waiting", process)
    assert process.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "step   1 view calc/stats.py" in stdout
    lines = stderr.splitlines()
    said = lines.index(f"interrupted: the demo stopped at its last completed step ({out / 'run'})")
    assert lines[said + 1] == "resume with:"
    words = shlex.split(lines[said + 2])
    assert words[:2] == ["llm-ide", "demo"] and words[words.index("-o") + 1] == str(out)

    again = llm_ide(*words[1:], cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"(project continued in {out / 'project'})" in again.stdout
    assert "resuming run demo after step 1" in again.stdout and "Tests before the run" not in again.stdout
    assert "Tests after the run: OK" in again.stdout and "submitted after" in again.stdout


def test_ctrl_c_while_the_demo_checks_the_tests_after_its_run_keeps_its_patch(tmp_path: Path) -> None:
    """The run had ended, then a Ctrl-C while the tests ran again exited 130 without a word, the patch not written."""
    out, shim = tmp_path / "demo", tmp_path / "shim"
    shim.mkdir()
    (python := shim / "python3").write_text(  # the tests after the run (the trajectory says submitted) wait for .go
        "#!/bin/sh\n"
        f"if [ \"$*\" = '-m unittest discover -s tests -t .' ] && grep -qs submitted {out}/run/demo.traj.json; then\n"
        f"  touch {out}/.waiting; while [ ! -f {out}/.go ]; do sleep 0.05; done\n"
        "fi\n"
        f'exec {shutil.which("python3")} "$@"\n'
    )
    python.chmod(0o755)
    environ = {**os.environ, "LLM_IDE_CONFIG": "off", "PATH": f"{shim}:{os.environ['PATH']}"}
    process = subprocess.Popen(
        [*CLI, "demo", "--output", str(out)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environ
    )
    stdout, stderr = interrupt_when(out / ".waiting", process)
    assert process.returncode == 130, stdout + stderr
    assert "Traceback" not in stderr and "Tests after the run" not in stdout
    assert stderr.splitlines() == [f"interrupted: the tests after the run were stopped ({out / 'run'})"]
    patch = (out / "run" / "demo.patch").read_text()
    assert "+++ b/calc/stats.py" in patch and f"patch ({out / 'run' / 'demo.patch'}):" in stdout
    assert "submitted after" in stdout


def test_swebench_runs_offline_from_a_folder_of_bundles_or_a_rows_own_bundle(tmp_path: Path, shared_dir: Path) -> None:
    bundles = shared_dir / "data" / "repos"
    model = write_script(tmp_path / "fix.yaml", single_call([EMPTY_NAME_FIX, reflect(False, "Refused."), DONE]))
    (config := tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    dataset = shared_dir / "data" / "swebench" / "SWE-bench_Verified-test.jsonl"
    common = ["--environment", "local", "--model", model, "-c", str(config)]
    single = ["swebench-single", "--subset", str(dataset), "--no-thoughts", *common]
    result = llm_ide(*single, "-i", FLASK, "--repos", str(bundles), "-o", "a", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.splitlines()[0] == f"{FLASK} ({bundles / 'pallets__flask.bundle'}) → a"
    assert "+        if not name:" in result.stdout
    head = git(tmp_path / "a" / FLASK / "repo", "rev-parse", "HEAD").strip()
    listed = subprocess.run(
        ["git", "bundle", "list-heads", str(bundles / "pallets__flask.bundle")], capture_output=True
    )
    assert f"{head} refs/heads/{FLASK}" in listed.stdout.decode()  # the instance's branch: its tree at the base

    row = json.loads(next(line for line in dataset.read_text().splitlines() if f'"{FLASK}"' in line))
    (own := tmp_path / "own.jsonl").write_text(json.dumps({**row, "repo": str(bundles / "pallets__flask.bundle")}))
    by_row = llm_ide("swebench-single", "--subset", str(own), "-i", FLASK, "-o", "b", *common, cwd=tmp_path)
    assert by_row.returncode == 0, by_row.stdout + by_row.stderr
    assert git(tmp_path / "b" / FLASK / "repo", "rev-parse", "HEAD").strip() == head

    missing = llm_ide(*single, "-i", "django__django-11099", "--repos", str(bundles), cwd=tmp_path)
    one_line(missing, f"django__django-11099: --repos {bundles} holds no django__django.bundle nor a clone")
    chosen = ["--filter", "django__django-1109|pallets", "--repos", str(bundles), "-o", "c"]
    batch = llm_ide("swebench", "--subset", str(dataset), *chosen, *common, cwd=tmp_path)
    one_line(batch, f"--repos {bundles} holds no bundle or clone for django__django")
    assert not (tmp_path / "c" / FLASK).exists()  # refused before any instance ran


@pytest.mark.docker
def test_an_evaluation_that_graded_nothing_fails(tmp_path: Path) -> None:
    require_docker()
    dataset = tmp_path / "data.jsonl"
    dataset.write_text(json.dumps({"instance_id": "demo__calc-1", "problem_statement": "fix it", "repo": "x/y"}) + "\n")
    preds = tmp_path / "preds.json"
    preds.write_text(
        json.dumps(
            {
                "demo__calc-1": {"instance_id": "demo__calc-1", "model_patch": ""},
                "demo__gone-2": {"instance_id": "demo__gone-2", "model_patch": "diff --git a/x b/x\n"},
            }
        )
    )
    result = llm_ide("evaluate", str(preds), "--subset", str(dataset), "-o", "ev", cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "resolved 0/2 (0.0%), unresolved 0, error 1, empty patch 1" in result.stdout
    assert result.stdout.startswith("evaluating 2 predictions with 1 worker into ")  # one, not "1 workers"
    assert result.stderr.startswith("nothing could be evaluated: 1 error, 1 empty patch of 2 predictions")
    assert json.loads((tmp_path / "ev" / "report.json").read_text())["total"] == 2


@pytest.mark.parametrize(
    ("value", "says"),
    [("-5", "(got -5.0)"), ("0", "(got 0.0)"), ("nan", "(got nan)")],
)
def test_an_evaluation_timeout_that_is_no_time_is_a_usage_error(tmp_path: Path, value: str, says: str) -> None:
    """A negative --timeout made every instance an error (`timeout` refused it: "no test-output markers"), and 0
    silently meant the config's 1800 s."""
    (preds := tmp_path / "preds.json").write_text(json.dumps({"demo__calc-1": {"model_patch": ""}}))
    result = llm_ide("evaluate", str(preds), "--subset", str(preds), "--timeout", value, cwd=tmp_path)
    one_line(result, "Invalid value for '--timeout'")
    assert says in result.stderr and not (tmp_path / "evaluations").exists()


@pytest.mark.parametrize("command", ["swebench", "swebench-single"])
@pytest.mark.parametrize("spec", ["foo", "sqlite:", "postgres"])
def test_a_checkpoint_store_of_no_known_kind_is_a_usage_error(tmp_path: Path, command: str, spec: str) -> None:
    """A batch started every instance with it, each ending as `error` (CheckpointError), and exited 1."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    row = {"instance_id": "demo__a-1", "repo": str(repo), "base_commit": git(repo, "rev-parse", "HEAD").strip()}
    (dataset := tmp_path / "data.jsonl").write_text(json.dumps({**row, "problem_statement": "fix a"}) + "\n")
    write_script(tmp_path / "s.yaml", [DONE])
    args = ["--subset", str(dataset), "--environment", "local", "-m", "scripted:s.yaml", "-o", "out"]
    result = llm_ide(command, *args, "--checkpoint", spec, cwd=tmp_path)
    one_line(result, "Invalid value for '--checkpoint': use sqlite:PATH, postgres://… or memory")
    assert f"(got {spec})" in result.stderr and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("swebench", ["--address", "10.0.0.1:6379"]),
        ("swebench", ["--shared-output"]),
        ("swebench", ["--prefetch-images"]),
        ("evaluate", ["--address", "10.0.0.1:6379"]),
    ],
)
def test_a_ray_option_without_engine_ray_is_a_usage_error(tmp_path: Path, command: str, option: list[str]) -> None:
    """It was ignored: the batch ran on this machine's thread pool, though the user named a cluster."""
    (dataset := tmp_path / "data.jsonl").write_text(json.dumps({"instance_id": "demo__a-1", "repo": "x/y"}) + "\n")
    (preds := tmp_path / "preds.json").write_text(json.dumps({"demo__a-1": {"instance_id": "demo__a-1"}}))
    args = [str(preds)] if command == "evaluate" else ["-m", "scripted:s.yaml", "--environment", "local"]
    result = llm_ide(command, *args, "--subset", str(dataset), "-o", "out", *option, cwd=tmp_path)
    one_line(result, f"{option[0]} is for --engine ray")
    assert not (tmp_path / "out").exists()


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", ["swebench", "evaluate"])
@pytest.mark.parametrize(
    ("there", "said"),
    [
        (None, "nothing listens there (ray start --head there?)"),
        ("http", "what listens there is not a Ray head node (the --port of `ray start --head`, 6379 by default?)"),
    ],
)
def test_a_ray_address_where_nothing_or_no_ray_listens_is_one_line(
    tmp_path: Path, command: str, there: str | None, said: str
) -> None:
    """ray.init retried it for minutes, printing Ray's log lines, deaf to Ctrl-C and SIGTERM; where something else
    listened (a web server, Postgres), it still did."""
    pytest.importorskip("ray")
    (dataset := tmp_path / "data.jsonl").write_text(
        json.dumps({"instance_id": "demo__a-1", "repo": "x/y", "problem_statement": "fix a"}) + "\n"
    )
    (preds := tmp_path / "preds.json").write_text(json.dumps({"demo__a-1": {"instance_id": "demo__a-1"}}))
    write_script(tmp_path / "s.yaml", [DONE])
    args = [str(preds), "-o", "ev"] if command == "evaluate" else ["-m", "scripted:s.yaml", "--environment", "local"]
    with ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler) as server:
        if there:
            threading.Thread(target=server.serve_forever, daemon=True).start()
        else:
            server.server_close()
        address = f"127.0.0.1:{server.server_address[1]}"
        ray_args = ["--engine", "ray", "--address", address]
        result = llm_ide(command, *args, "--subset", str(dataset), *ray_args, cwd=tmp_path)
        if there:
            server.shutdown()
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [f"error: could not connect to Ray at {address}: {said}"]
    assert not (tmp_path / "ev").exists() and not (tmp_path / "swebench_output").exists()  # no empty folder left


@pytest.mark.slow
def test_a_ray_head_refusing_the_drivers_token_is_one_line(tmp_path: Path) -> None:
    """ray.init retried for 20 s, a GCS warning a second, then said it could not connect, naming no token."""
    from ray_cluster import ray_cluster

    (dataset := tmp_path / "data.jsonl").write_text(
        json.dumps({"instance_id": "demo__a-1", "repo": "x/y", "problem_statement": "fix a"}) + "\n"
    )
    write_script(tmp_path / "s.yaml", [DONE])
    batch = ["-m", "scripted:s.yaml", "--environment", "local", "--subset", str(dataset), "--engine", "ray"]
    bare = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    with ray_cluster(tmp_path / "ray", [{}]) as cluster:
        for auth, said in [({}, "wants a token"), ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}, "refuses")]:
            command = [sys.executable, "-m", "llm_ide", "swebench", *batch, "--address", cluster.address]
            result = subprocess.run(command, cwd=tmp_path, env={**bare, **auth}, capture_output=True, text=True)
            assert result.returncode == 2, result.stdout + result.stderr
            assert result.stderr.splitlines() == [
                f"error: could not connect to Ray at {cluster.address}: the cluster {said}"
                f"{' this token' * bool(auth)} (RAY_AUTH_MODE=token and RAY_AUTH_TOKEN as on its nodes)"
            ]


def test_a_ray_batchs_relative_sqlite_store_and_repos_are_the_drivers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--checkpoint sqlite:rel.sqlite` went to the Ray workers' folder (where `ray start` ran), while the driver's
    `--redo-existing` cleared ./rel.sqlite: the redone instances were "already finished" in the other one."""
    pytest.importorskip("ray")
    from llm_ide.swebench.choice import BatchOptions
    from llm_ide.swebench.ray_engine import absolute

    options = BatchOptions(model="m", output=Path("out"), checkpoint="sqlite:rel.sqlite", repos=Path("repos"))
    monkeypatch.chdir(tmp_path)
    seen = absolute(options)
    assert (seen.checkpoint, seen.repos) == (f"sqlite:{tmp_path / 'rel.sqlite'}", tmp_path / "repos")
    assert absolute(replace(options, checkpoint="postgres://h/db", repos=None)).checkpoint == "postgres://h/db"


@pytest.mark.slow
def test_a_ray_task_that_raises_is_its_error_in_one_line_not_its_traceback(tmp_path: Path) -> None:
    """The batch's Postgres database refuses connections while a Ray task runs: the next task's thread guard raised,
    and its instance's reason was Ray's text of the task's traceback (file, line, source, carets). The batch now stops
    there: the cut instance's reason is one line naming the store, the next never starts, exit 1."""
    import psycopg
    from pg_server import postgres_server
    from swebench_fixtures import FIX_COMMAND, build_dataset
    from swebench_fixtures import write_script as write_commands

    pytest.importorskip("ray")
    data, _ = build_dataset(tmp_path / "data", 2)
    wait = f"touch {tmp_path}/started; while [ ! -e {tmp_path}/gate ]; do sleep 0.05; done"
    (config := tmp_path / "c.yaml").write_text(
        yaml.safe_dump({"environment": {"tools": [], "writable": [str(tmp_path)]}})
    )
    model = write_commands(tmp_path / "m.yaml", [wait, FIX_COMMAND])
    with postgres_server() as url, psycopg.connect(url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE batch")
        args = ["swebench", "--subset", str(data), "-m", model, "-c", str(config), "--environment", "local"]
        store = ["--engine", "ray", "--checkpoint", url.rpartition("/")[0] + "/batch", "-o", str(tmp_path / "out")]
        batch = subprocess.Popen([*CLI, *args, *store], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_for((tmp_path / "started").exists, timeout=300, what="the first instance's command")
            admin.execute("ALTER DATABASE batch ALLOW_CONNECTIONS false")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'batch'")
            (tmp_path / "gate").touch()
            stdout, stderr = batch.communicate(timeout=300)
        finally:
            batch.kill()
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    [(status, error)] = [(status["exit_status"], status["error"]) for status in statuses.values()]
    assert status == "interrupted" and error.startswith(f"the checkpoint store {url.rpartition('/')[0]}/batch is out")
    assert not any(mark in error for mark in ("File ", "^^^", "ray::", "\n")), error
    assert batch.returncode == 1 and "Traceback" not in stdout.decode() + stderr.decode()
    assert "the batch stopped (1 instance interrupted, 1 not started)" in stderr.decode(), stderr.decode()


@pytest.mark.parametrize("kind", ["raised", "died"])
def test_a_ray_tasks_failure_is_its_own_exception_in_one_line(kind: str) -> None:
    """What a batch's and an evaluation's instance says when its Ray task failed: the exception the task raised (the
    evaluation gave Ray's text of its traceback: colours, the worker, carets), or Ray's own error when no task
    raised (its node died)."""
    exceptions = pytest.importorskip("ray.exceptions")
    from llm_ide.errors import ExitStatus, crashed
    from llm_ide.swebench.ray_engine import raised

    traceback = "\x1b[36mray::evaluate()\x1b[39m\nTraceback (most recent call last):\n  File x.py\n  ^^^\nValueError"
    error = exceptions.RayTaskError("evaluate", traceback, ValueError("boom")) if kind == "raised" else None
    error = error or exceptions.WorkerCrashedError()
    said = "ValueError: boom" if kind == "raised" else f"WorkerCrashedError: {exceptions.WorkerCrashedError()}"
    assert crashed(raised(error)) == (ExitStatus.ERROR, said)


def test_the_python_example_of_running_md_prints_one_line_a_step(tmp_path: Path) -> None:
    """docs/running.md's `run_task` block as written, the demo's project and script for the model: its listener
    printed every event (bare `phase 0`, `command 2` lines) where the page shows steps."""
    demo = Path(__file__).resolve().parents[1] / "llm_ide" / "demo"
    page = (demo.parents[1] / "docs" / "running.md").read_text()
    block = page.split("## Python\n\n```python\n", 1)[1].split("```", 1)[0]
    block = block.replace('"openai:gpt-5-mini"', f'"scripted:{demo / "script.yaml"}"')
    block = block.replace('load_config("default", ', 'load_config("default", environment={"tools": []}, ')
    shutil.copytree(demo / "project", tmp_path / "myproject")
    git(tmp_path / "myproject", "init", "-q")
    git(tmp_path / "myproject", "add", "-A")
    git(tmp_path / "myproject", "-c", "user.name=u", "-c", "user.email=u@x", "commit", "-qm", "base")
    (example := tmp_path / "example.py").write_text(block)
    done = run_script(example, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    probe = "python3 -c 'from calc.stats import median; print(median([3, 1, 2]), median([4, 1, 3, 2]))'"
    steps = ["1 view calc/stats.py:1-25", f"2 bash: {probe}", "3 edit calc/stats.py"]
    steps += ["4 bash: python3 -m unittest discover -s tests -t . 2>&1", "5 submit", "submitted 0.0 "]  # no error
    assert lines[:6] == steps
    assert lines[6] == "diff --git a/calc/stats.py b/calc/stats.py" and (tmp_path / "runs" / "median").is_dir()
