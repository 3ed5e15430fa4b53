"""`coop run`'s and `coop evaluate`'s command lines: the model and config taken as `llm-ide run` takes them (the
agents' step limit too), and what no pair could use (a model, a repository source, a setting given twice, an output
that is a file) said in one line before any pair starts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from agent_script import act, reflect
from coop_support import EXTRA, coop_args, scripts
from in_process import invoke
from test_coop_evaluate import build_task


def submitting_pair(tmp_path: Path) -> tuple[Path, list[str]]:
    """`coop run`'s arguments for a pair whose planners and agents submit at once, and a folder elsewhere holding
    human.yaml (a human navigator)."""
    task, source = build_task(tmp_path)
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    (folder / "human.yaml").write_text(yaml.safe_dump({"navigator": {"mode": "human"}}))
    submit = [act("Go.", "submit")]
    model = scripts(tmp_path / "scripts", plan_1=submit, plan_2=submit, run_1=submit, run_2=submit)
    args = coop_args(task, source, model, tmp_path / "out")
    return folder, args


@pytest.mark.parametrize(
    ("option", "said"),
    [
        (("--model", "nosuch:model"), "error: model nosuch:model: unknown provider 'nosuch'"),
        (
            ("--model", "scripted:{folder}/{{phase}}_{{agent}}.yaml"),
            "error: scripted model: file not found: {folder}/plan_1.yaml",
        ),
        (("--repo-source", "{folder}"), "error: --repo-source {folder}: neither a git repository nor a bundle"),
        (
            ("--config", "{folder}/human.yaml"),
            "error: navigator.mode human: nobody answers a coop run's agents; use navigator.mode model or mcp",
        ),
    ],
    ids=["unknown-provider", "missing-script", "not-a-repository", "human-navigator"],
)
def test_what_no_pair_could_use_is_one_line_before_any_pair(tmp_path: Path, option: tuple[str, str], said: str) -> None:
    """A model no agent or planner could use, a repository source git cannot read: said once, no pair started (it
    was said once per pair, after a checkout each; a human navigator's after each pair's planning)."""
    folder, args = submitting_pair(tmp_path)
    args[args.index(option[0]) + 1] = option[1].format(folder=folder)
    done = invoke(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.startswith(said.format(folder=folder)), done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
    assert done.stdout == ""  # not a progress bar of pairs that never start


@pytest.mark.parametrize("settings", [("coop,coop",), ("solo", "coop, solo")])
def test_a_setting_given_twice_is_one_line_before_any_pair(tmp_path: Path, settings: tuple[str, ...]) -> None:
    """Each pair ran twice in that setting, into one folder, and the summary counted it twice."""
    task, source = build_task(tmp_path)
    given = [arg for setting in settings for arg in ("--setting", setting)]
    done = invoke(*coop_args(task, source, "scripted:nowhere.yaml", tmp_path / "out", *given), cwd=tmp_path)
    twice = "coop" if len(settings) == 1 else "solo"
    assert (done.returncode, done.stdout) == (2, "") and not (tmp_path / "out").exists()
    assert done.stderr == f"error: setting {twice!r} given twice: give each setting once\n"


@pytest.mark.parametrize(
    ("args", "said"),
    [
        ((), "error: give a run folder (coop evaluate RUN_DIR) or a task folder with --gold: one of them\n"),
        (("out", "--pairs", "1,3"), "error: --pairs: only with --gold (a run folder's pairs and files are its own)\n"),
    ],
)
def test_coop_evaluate_says_what_it_needs(tmp_path: Path, args: tuple[str, ...], said: str) -> None:
    (tmp_path / "out").mkdir()
    done = invoke("coop", "evaluate", *args, cwd=tmp_path)
    assert (done.returncode, done.stdout, done.stderr) == (2, "", said)


@pytest.mark.parametrize("below", ["", "/pairs"])
@pytest.mark.parametrize("command", ["run", "evaluate --gold"])
def test_an_output_that_is_a_file_is_one_line_before_anything(tmp_path: Path, command: str, below: str) -> None:
    """`coop run -o FILE` and `coop evaluate --gold … -o FILE` were a traceback (exit 1) once a pair began."""
    task, source = build_task(tmp_path)
    (blocker := tmp_path / "a-file").write_text("not a folder")
    out = Path(f"{blocker}{below}")
    submit = [act("Go.", "submit")]
    model = scripts(tmp_path / "scripts", plan_1=submit, plan_2=submit, run_1=submit, run_2=submit)
    if command == "run":
        args = coop_args(task, source, model, tmp_path / "out")
        args[args.index("-o") + 1] = str(out)
    else:
        args = ["coop", "evaluate", "--gold", str(task), "--repo-source", str(source), "--no-tests", "-o", str(out)]
    done = invoke(*args, cwd=tmp_path)
    said = "it" if not below else str(blocker)
    assert (done.returncode, done.stdout, done.stderr) == (
        2, "", f"error: --output {out}: {said} is a file, not a folder: give a folder (it is created if missing)\n"
    )  # fmt: skip
    assert blocker.read_text() == "not a folder"


@pytest.mark.parametrize("given", ["short", "environment"])
def test_coop_run_takes_the_model_and_config_as_llm_ide_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, given: str
) -> None:
    """`coop run` had no -m/-c and no $LLM_IDE_MODEL (a required --model): `llm-ide run`'s options, the same checks."""
    folder, args = submitting_pair(tmp_path)
    model = args[args.index("--model") + 1]
    args[args.index("--config") : args.index("--config") + 2] = ["-c", str(folder / "human.yaml")]
    if given == "short":
        args[args.index("--model")] = "-m"
    else:
        del args[args.index("--model") : args.index("--model") + 2]
        monkeypatch.setenv("LLM_IDE_MODEL", model)
    done = invoke(*args, cwd=tmp_path)
    line = "error: navigator.mode human: nobody answers a coop run's agents; use navigator.mode model or mcp\n"
    assert (done.returncode, done.stderr, done.stdout) == (2, line, "")
    monkeypatch.delenv("LLM_IDE_MODEL", raising=False)
    args = [arg for arg in args if arg not in ("-m", model)]
    done = invoke(*args, cwd=tmp_path)
    assert (done.returncode, done.stderr) == (2, invoke("run", "--task", "t", cwd=tmp_path).stderr)
    assert done.stderr.startswith("error: no model: pass --model") and not (tmp_path / "out").exists()


@pytest.mark.parametrize(("coop_sets", "status"), [(False, "step_limit"), (True, "submitted")])
def test_coop_run_gives_its_agents_the_step_limit_its_config_sets(tmp_path: Path, coop_sets: bool, status: str) -> None:
    """`-c` setting agent.step_limit was silently replaced by coop.execution.step_limit (40). It is each agent's limit
    now, unless the --coop-config file sets execution.step_limit, the more specific one."""
    task, source = build_task(tmp_path)
    run = [act("Create.", "create", path="pkg/extra.py", content=EXTRA), reflect(False, "added"), act("Go.", "submit")]
    done = [act("Done.", "agreement_reached", plan="Create pkg/extra.py")]
    model = scripts(tmp_path / "scripts", plan_1=done, plan_2=done, run_1=run, run_2=run)
    args = coop_args(task, source, model, tmp_path / "out", "--no-evaluate")
    (tmp_path / "agent.yaml").write_text(yaml.safe_dump({"environment": {"tools": []}, "agent": {"step_limit": 1}}))
    if coop_sets:
        (tmp_path / "coop.yaml").write_text(yaml.safe_dump({"execution": {"step_limit": 5}}))
        args += ["--coop-config", str(tmp_path / "coop.yaml")]
    finished = invoke(*args, cwd=tmp_path)
    assert finished.returncode == 0, finished.stdout + finished.stderr
    for agent in (1, 2):
        path = tmp_path / "out" / "demo_task7_f1_f2_coop_k0" / f"agent{agent}-run" / f"agent{agent}.traj.json"
        assert json.loads(path.read_text())["info"]["exit_status"] == status
