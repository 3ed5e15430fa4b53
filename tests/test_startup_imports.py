"""What the command line imports before it answers, each in a child process (a process imports once):
--version, --help and completion import no command; a usage error of run, replay, swebench, swebench-single,
coop run or coop evaluate says its line without the agent, LangGraph or an HTTP client; every command's help
imports none of them either; the listing says what each command's help says."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import make_git_repo
from first_week_support import llm_ide

HEAVY = ("langgraph", "langchain", "llm_ide.composition", "llm_ide.graph", "llm_ide.cli.run", "llm_ide.run")


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
    return sorted(name for name, module in sys.modules.items() if module and name.startswith(tuple(prefixes)))

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
        loaded = [name for name, module in sys.modules.items() if module]  # (deferred.ABSENT's are None)
        shown = sorted({name if name.startswith("llm_ide") else name.split(".")[0] for name in loaded})
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
        "--instance|3": "instance index 3 is out of range (the dataset has 1 row)",
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
