"""What a newcomer meets in the first week, through the real CLI: the demo's Ctrl-C says where it stopped and
how to go on, SWE-bench runs from local bundles, an evaluation that graded nothing fails and one given no time
is refused, a checkpoint store of no known kind is a usage error, and docs/running.md's Python example prints
a step a line."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
from pathlib import Path

import pytest
from agent_script import act, reflect, single_call, write_script
from conftest import git, interrupt_when, make_git_repo, require_docker
from first_week_support import CLI, DONE, llm_ide, one_line
from in_process import run_script

FLASK = "pallets__flask-5014"
EMPTY_NAME_FIX = act(
    "Blueprint refuses a dotted name[1](src/flask/blueprints.py:193); an empty one must be refused too.",
    "edit",
    path="src/flask/blueprints.py",
    old='        if "." in name:\n',
    new='        if not name:\n            raise ValueError("\'name\' may not be empty.")\n\n        if "." in name:\n',
)


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
