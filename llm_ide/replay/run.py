"""One replay: a fresh checkout, the loopback endpoint answering from the trajectory, llm-ide's own run on them
(`run_task`, as `llm-ide run` runs it: local environment, no network), then the figures of both agents."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_ide.config import Settings, config_layers, validate_layers
from llm_ide.environments.bwrap import bwrap_path, bwrap_problem
from llm_ide.environments.pythons import commands_python, probe_env, probe_output
from llm_ide.environments.scratch import owned_name, sweep_temp_folders
from llm_ide.exchange import TOOLS, exchange_for
from llm_ide.fileio import atomic_write
from llm_ide.pricing import settings_of
from llm_ide.replay.checkout import checkout, git
from llm_ide.replay.endpoint import LoopbackEndpoint
from llm_ide.replay.formats import LLM_IDE_FORMAT, ReplayError, Trajectory, load, run_id_of
from llm_ide.replay.measure import divergence, measure
from llm_ide.replay.model import Prices, ReplayReport
from llm_ide.replay.script import MODEL, Script
from llm_ide.replay.tree import TreeWatch, environment_changes, tracked_sections
from llm_ide.run.outputs import RunResult
from llm_ide.run.preflight import PreflightError, check_readable, check_writable
from llm_ide.run.single import RunEvent, run_task
from llm_ide.workspace.history import ours

REPORT = "replay.json"
RUN_DIR = "run"
WRITING = ("edit", "create")  # the actions of an llm-ide trajectory that write a file
DISTRIBUTIONS = (  # what the commands' python3 has installed: how many, and a digest of their names and versions
    "import hashlib, importlib.metadata as m; names = sorted({f\"{d.metadata['Name']}=={d.version}\" for d in "
    "m.distributions()}); print(len(names), hashlib.sha256('\\n'.join(names).encode()).hexdigest()[:12])"
)


class Loopback:
    """The replay's model as the run's exchange sees it: an OpenAI-compatible endpoint given by URL (it takes tools;
    `model.action_format: auto` gives it the actions in the text)."""

    name, takes_tools, tools_by_default = "loopback", True, False


def settings_for(
    trajectory: Trajectory,
    overrides: list[Path],
    single_call: bool | None,
    action_format: str | None = None,
    prices: Prices | None = None,
) -> Settings:
    """The bundled config, then the replay's defaults (local, no network, no tools: the original had none, no cost
    limit, the original's command timeout, our own run's action format: tools where it made tool calls), then the
    `overrides` files; the environment type, the step limit and the model's price (the replay's `prices`, which bill
    both agents) are the replay's whatever the files say,
    `single_call` and `action_format` (tools: the endpoint answers with tool calls) too when given. The original's
    workdir (/testbed) is where bubblewrap shows the checkout. Paths to show that are not there: a ReplayError."""
    defaults: dict[str, Any] = {
        "agent": {"cost_limit": 0},
        "environment": {"tools": [], "network": "none", "sandbox": "bwrap"},
    }
    if trajectory.command_timeout:
        defaults["environment"]["command_timeout"] = trajectory.command_timeout
    if trajectory.action_format:
        defaults["model"] = {"action_format": trajectory.action_format}
    forced: dict[str, Any] = {
        "environment": {"type": "local"},
        "agent": {
            "step_limit": len(trajectory.steps) + 5,
            **({} if single_call is None else {"single_call": single_call}),
        },
        "model": {
            "prices": {MODEL: settings_of((prices or Prices()).price)},
            **({} if action_format is None else {"action_format": action_format}),
        },
    }
    base = len(config_layers("default"))
    layers = config_layers("default", overrides)
    settings = validate_layers([*layers[:base], ("replay", defaults), *layers[base:], ("replay", forced)])
    try:  # (as a run's preflight: the sandbox would show neither, without a word)
        check_writable(settings.environment.writable, "local")
        check_readable(settings.environment.readable, "local")
    except PreflightError as error:
        raise ReplayError(str(error)) from None
    return settings


def sandbox_problem(settings: Settings) -> str | None:
    """Why the replayed commands would not be sandboxed (`environment.sandbox: none`, no usable bwrap); None if not."""
    if settings.environment.sandbox == "none":
        return "environment.sandbox is none"
    return bwrap_problem()


def fresh_output(out: Path, run_id: str) -> Path:
    """`out/run`, emptied when it holds an earlier replay's run (one that ended, or this one's stopped before its
    report: nothing but the files of its run id, and the .gitignore a run's folder has); a folder that is not a
    replay's is refused."""
    if out.exists() and not out.is_dir():
        raise ReplayError(f"--out {out} is a file, not a folder: give a folder")
    run_dir = out / RUN_DIR
    if run_dir.exists():
        names = [entry.name for entry in run_dir.iterdir()] if run_dir.is_dir() else [""]
        ours = all(name.startswith(f"{run_id}.") or name == ".gitignore" for name in names)
        if not (out / REPORT).is_file() and not ours:
            raise ReplayError(f"{out} holds a {RUN_DIR}/ folder that is no replay's: give another --out")
        shutil.rmtree(run_dir)
    out.mkdir(parents=True, exist_ok=True)
    return run_dir


def refuse_unsandboxed(settings: Settings) -> None:
    """A ReplayError when the replayed commands would not be sandboxed."""
    if problem := sandbox_problem(settings):
        raise ReplayError(
            f"{problem}: the trajectory's commands would run on this machine as you, with your files and network;"
            " pass --unsandboxed to replay it anyway"
        )


def mounted_at_workdir(settings: Settings, workdir: str | None) -> Settings:
    """The settings with the checkout shown at the original's workdir, where bubblewrap can and no mount is set."""
    environment = settings.environment
    if workdir and environment.mount_at is None and environment.sandbox == "bwrap" and bwrap_path():
        return settings.merged({"environment": {"mount_at": workdir}}, origin="replay")
    return settings


def run_on_script(
    script: Script,
    task: str,
    settings: Settings,
    run_dir: Path,
    run_id: str,
    repo: Path,
    on_event: Callable[[RunEvent], None] | None,
) -> RunResult:
    """llm-ide's run of `task` on `repo` (as `llm-ide run` runs it), its model a loopback endpoint answering from
    `script`, which is closed after."""
    try:
        with LoopbackEndpoint(script.answer, [MODEL]) as endpoint:
            return run_task(
                task,
                model=MODEL,
                settings=settings,
                output_dir=run_dir,
                run_id=run_id,
                repo=repo,
                base_url=endpoint.url,
                on_event=on_event,
            )
    finally:
        script.close()


def replay(
    path: Path,
    source: Path,
    out: Path,
    *,
    branch: str | None = None,
    commit: str | None = None,
    overrides: list[Path] | None = None,
    single_call: bool | None = None,
    prices: Prices | None = None,
    on_event: Callable[[RunEvent], None] | None = None,
    unsandboxed: bool = False,
    action_format: str | None = None,
) -> ReplayReport:
    """Replays the trajectory at `path` through llm-ide on a checkout of `source`: the report (`out/replay.json`), the
    run's files (`out/run/`), every request (`out/wire.jsonl`); the commands sandboxed unless `unsandboxed`."""
    trajectory, prices = load(path), prices or Prices()
    settings = settings_for(trajectory, overrides or [], single_call, action_format, prices)
    sweep_temp_folders()  # what replays and runs killed outright left
    with tempfile.TemporaryDirectory(prefix=owned_name("replay")) as scratch:
        repo = Path(scratch) / "repo"
        commit = checkout(source, repo, branch, commit, trajectory.instance_id)  # bad input ends here, in one line
        if not unsandboxed:
            refuse_unsandboxed(settings)
        settings = ours(mounted_at_workdir(settings, trajectory.workdir))  # our checkout: its future removed
        run_dir = fresh_output(out, run_id := run_id_of(trajectory, path))
        workdir = trajectory.workdir if trajectory.workdir and not settings.environment.mount_at else None
        rewrite = (lambda command: command.replace(workdir, str(repo))) if workdir else str
        watch = TreeWatch(repo, commit)
        environment = as_the_original_found_it(repo, watch.tracked, trajectory)
        exchange = exchange_for(settings, Loopback())
        single, tools = exchange.one_call, exchange.form is TOOLS
        recorded = trajectory.requests if trajectory.format == LLM_IDE_FORMAT and workdir is None else []
        script = Script.open(trajectory.steps, single, out / "wire.jsonl", watch.take, rewrite, tools, recorded)
        result = run_on_script(script, trajectory.task, settings, run_dir, run_id, repo, on_event)
        watch.take()
        operations = json.loads(result.trajectory_path.read_text(encoding="utf-8")).get("operations") or []
        steps, misses = measure(trajectory, script.calls, watch, operations, prices)
        report = ReplayReport(
            trajectory=str(path),
            format=trajectory.format,
            instance_id=trajectory.instance_id,
            commit=commit,
            single_call=single,
            action_format="tools" if tools else "text",
            mounted_at=settings.environment.mount_at,
            workdir_rewritten=workdir is not None,
            prices=prices,
            exit_status=str(result.exit_status),
            run_trajectory=str(result.trajectory_path),
            steps=steps,
            misses=misses,
            differing_returncodes=[s.step for s in steps if s.original_returncode not in (None, s.returncode)],
            same_as_submission=same_tree(watch, trajectory.submission),
            environment_changes=environment,
            diverged=divergence(trajectory, operations, rewrite) or (result.error if not steps else ""),
            commands_python=python_of(repo),
        )
    atomic_write(out / REPORT, report.model_dump_json(indent=1))
    return report


def python_of(repo: Path) -> str:
    """The Python the replayed commands found as `python3` (the caller's PATH): its version at its path, and its
    installed distributions (how many, a digest of their names and versions: a pytest plugin changes what a failing
    pytest prints)."""
    found = commands_python(repo, dict(os.environ))
    if found is None:
        return ""
    env = probe_env(os.environ.get("PATH", os.defpath), str(Path.home()))
    try:
        listed = probe_output([found.executable, "-c", DISTRIBUTIONS], env, str(repo)).split()
    except (OSError, subprocess.TimeoutExpired):
        listed = []
    installed = f" ({listed[0]} distributions, {listed[1]})" if len(listed) == 2 else ""
    return f"{found.version} at {found.executable}{installed}"


def as_the_original_found_it(repo: Path, tracked: set[str], trajectory: Trajectory) -> list[str]:
    """The files the original's environment had changed before its first step, changed so in the checkout too."""
    commands = [str(step.params.get("command") or "") for step in trajectory.steps]
    edited = frozenset(
        Path(str(step.params["path"])).name
        for step in trajectory.steps
        if step.action_type in WRITING and step.params.get("path")
    )
    applied = []
    for path, section in environment_changes(trajectory.submission, tracked, commands, edited).items():
        if git("apply", "-", cwd=repo, input=section + "\n").returncode == 0:
            applied.append(path)
    return applied


def same_tree(watch: TreeWatch, submission: str) -> bool | None:
    """Whether the tracked files' diff equals the submitted one (new files left out); None without a submission."""
    if not submission.strip():
        return None
    return tracked_sections(watch.final_diff(), watch.tracked) == tracked_sections(submission, watch.tracked)
