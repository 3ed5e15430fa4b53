"""The phases of one CooperBench pair (llm_ide/coop/pair.py runs them as a graph): planning (the graph), execution
(our agent per feature, each in its own git worktree, the plan in its task), evaluation (eval.json). Every output
path carries the setting and `k`; a rerun of the
same folder resumes: the planning thread from its checkpoint, finished features kept, unfinished runs resumed."""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from langgraph.checkpoint.sqlite import SqliteSaver

from llm_ide.coop.evaluate import evaluate_pair, run_feature_tests
from llm_ide.coop.planning import PlanningContext, build_planning_graph
from llm_ide.coop.record import CoopRun, Setting
from llm_ide.coop.settings import CoopSettings
from llm_ide.coop.task import CoopError, CoopTask, checkout_base, git
from llm_ide.fileio import atomic_write
from llm_ide.inputs import CLI, Names
from llm_ide.keep import FolderKeep
from llm_ide.messages.channel import Mailbox, Turns
from llm_ide.messages.variant import Messages
from llm_ide.models import get_model
from llm_ide.prompting import render_string
from llm_ide.run.preflight import preflight
from llm_ide.run.single import run_task
from llm_ide.run.stopping import Commands
from llm_ide.settings import CoreSettings
from llm_ide.whole_settings import Settings
from llm_ide.workspace.worktrees import WORKTREES

log = logging.getLogger(__name__)


def agent_model(spec: str, agent: str, phase: str) -> str:
    """`{agent}` and `{phase}` (plan | run) in a model spec pick one per agent and phase (e.g. scripted files);
    otherwise every agent and phase share the spec."""
    return spec.replace("{agent}", agent).replace("{phase}", phase)


def check_models(model: str, settings: Settings, base_url: str | None, names: Names = CLI) -> None:
    """A model no agent or planner could use, or a navigator that waits for a person (nobody answers a pair's
    agents): one line (`names`: the door's for the model and its endpoint)."""
    if settings.navigator.mode == "human":
        raise CoopError("navigator.mode human: nobody answers a coop run's agents; use navigator.mode model or mcp")
    for spec in sorted({agent_model(model, agent, phase) for agent in ("1", "2") for phase in ("plan", "run")}):
        preflight(spec, settings, base_url=base_url, imaged=False, names=names)  # (a task's image comes with it)


def plan_phase(
    run: CoopRun,
    task: CoopTask,
    folder: Path,
    repo: Path,
    settings: CoreSettings,
    coop: CoopSettings,
    graph: Any = None,
) -> dict[str, str]:
    """The planning graph (`graph`, else a new one) on the pair's own checkpoint (planning.sqlite): resumed if there."""
    agents, keep = run.agents(), FolderKeep(folder)
    models = {a: get_model(agent_model(run.model, a, "plan"), settings.model, run.base_url, keep) for a in agents}
    context = PlanningContext(repo=repo, models=models, settings=coop)
    config = {"configurable": {"thread_id": "planning"}}
    with SqliteSaver.from_conn_string(str(folder / "planning.sqlite")) as saver:
        graph = build_planning_graph(saver) if graph is None else graph.copy(update={"checkpointer": saver})
        snapshot = graph.get_state(config)
        start = (
            None
            if snapshot.values
            else {
                "setting": str(run.setting),
                "agents": list(agents),
                "round": 1,
                "features": {a: [task.feature(f).description for f in features] for a, features in agents.items()},
            }
        )
        state = graph.invoke(start, config, context=context) if (start or snapshot.next) else snapshot.values
    for agent, features in agents.items():
        for feature in features:
            plan_file = folder / f"plan_{run.setting}_k{run.k}_feature{feature}.md"
            atomic_write(plan_file, state["plans"][agent] + "\n")
        turns = state.get("turns", {}).get(agent, [])
        atomic_write(
            folder / f"planner_{agent}.traj.json",
            json.dumps(
                {"agent": agent, "turns": turns, "forced": bool(state.get("forced", {}).get(agent))},
                indent=1,
                ensure_ascii=False,
            ),
        )
    atomic_write(folder / "conversation.json", json.dumps(state.get("messages", []), indent=1, ensure_ascii=False))
    return state["plans"]


def execute_agent(
    run: CoopRun,
    task: CoopTask,
    folder: Path,
    repo: Path,
    agent: str,
    plan: str,
    settings: CoreSettings,
    coop: CoopSettings,
    on_event: Callable[[str, Any], None],
    mailbox: Mailbox | None = None,
) -> str:
    """One agent's run in its worktree, with the variants its settings ask for (action sampling, a navigator); with
    a `mailbox` (coop) it messages the other agent and reads its messages."""
    features = run.agents()[agent]
    patch_file = folder / f"patch_agent{agent}.patch"
    if patch_file.exists():
        return patch_file.read_text(encoding="utf-8")  # a finished agent is kept on resume
    worktree = folder / f"agent{agent}"
    with WORKTREES:  # `git worktree add` of two agents at once in one repository races on .git/worktrees
        if not worktree.exists():
            git(repo, "worktree", "add", "-q", "-B", f"agent{agent}", str(worktree), "base")
    described = "\n\n".join(task.feature(f).description for f in features)
    text = render_string(
        coop.templates.execution_task,
        feature=described,
        plan=plan,
        messages=mailbox is not None,
        other=mailbox.other if mailbox else "",
    )
    result = run_task(
        text,
        model=agent_model(run.model, agent, "run"),
        output_dir=folder / f"agent{agent}-run",
        run_id=f"agent{agent}",
        settings=settings.merged({"agent": {"step_limit": coop.execution.step_limit}}, origin="coop"),
        repo=worktree,
        environment=run.environment,
        base_url=run.base_url,
        on_event=lambda event: on_event(agent, event),
        variants=[Messages(mailbox)] if mailbox else [],
    )
    if not result.exit_status.finished:
        raise CoopError(
            f"agent {agent} stopped with {result.exit_status} ({result.error or 'see its trajectory'}); "
            f"run again to resume"
        )
    atomic_write(patch_file, result.submission)
    return result.submission


def prepare(run: CoopRun, task: CoopTask, output: Path, option: str = "--output") -> tuple[Path, Path]:
    """The pair's folder (run.json written, another task's folder refused) and its checkout at the base commit."""
    folder = output.resolve() / run.folder_name(task)  # absolute: git runs in the checkout and its worktrees
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "run.json"
    if manifest.exists() and json.loads(manifest.read_text())["task"] != str(run.task):
        raise CoopError(f"{folder} holds a run of another task; give {option} another folder")
    atomic_write(manifest, run.model_dump_json(indent=2))
    repo = folder / "repo"
    if not (repo / ".git").exists():
        checkout_base(task, run.repo_source, repo)
    return folder, repo


def execute_phase(
    run: CoopRun,
    task: CoopTask,
    folder: Path,
    repo: Path,
    plans: dict[str, str],
    settings: CoreSettings,
    coop: CoopSettings,
    emit: Callable[[str, Any], None],
) -> list[str]:
    """Every agent's run, at the same time when `execution.parallel`; in `coop` with a mailbox each, in turns when
    `execution.lockstep`."""
    agents = list(run.agents())
    parallel = coop.execution.parallel and len(agents) > 1
    turns = Turns(agents) if run.setting == Setting.COOP and parallel and coop.execution.lockstep else None
    mailboxes = {
        a: Mailbox(folder / "messages.jsonl", a, next(o for o in agents if o != a), coop.templates.messages, turns)
        for a in agents
        if run.setting == Setting.COOP and len(agents) > 1
    }

    stop = threading.Event()  # Ctrl-C reaches the main thread only: the agents' runs are told through their events
    commands = Commands()  # and one in a silent command, in its thread

    def told(agent: str, event: Any) -> None:
        commands.note(event)
        emit(agent, event)
        if stop.is_set() and event.kind != "end":
            raise KeyboardInterrupt  # the agent's run ends `interrupted`, saved: a rerun resumes it

    def execute(agent: str) -> str:
        try:
            return execute_agent(
                run, task, folder, repo, agent, plans[agent], settings, coop, told, mailboxes.get(agent)
            )
        except BaseException:
            if turns is not None:
                turns.abort()
            raise
        finally:
            if turns is not None:
                turns.leave(agent)

    with ThreadPoolExecutor(max_workers=len(agents) if parallel else 1, thread_name_prefix="coop-agent") as pool:
        futures = [pool.submit(execute, a) for a in agents]
        try:
            return [future.result() for future in futures]
        except KeyboardInterrupt:
            stop.set()  # each agent stops at its next event (a model call, a command's progress, a step), unpaid
            commands.interrupt()  # its command ended, as Ctrl-C ends a single run's
            log.warning("interrupted: each agent stops at its next step (in a command: at once), its work saved")
            for future in futures:
                future.cancel()
            wait(futures)
            raise


def grade(run: CoopRun, task: CoopTask, folder: Path, patches: list[str]) -> dict[str, Any]:
    """eval.json's grades; the checkouts they took are removed after (a killed grading's, by the next)."""
    scratch = folder.resolve() / "eval-scratch"
    try:
        return graded_in(run, task, scratch, patches)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def graded_in(run: CoopRun, task: CoopTask, scratch: Path, patches: list[str]) -> dict[str, Any]:
    if len(patches) == 2:
        pair = evaluate_pair(
            task, run.pair, (patches[0], patches[1]), run.repo_source, scratch, setting=str(run.setting), k=run.k
        )
        return pair.model_dump(mode="json", exclude={"seconds"})
    base = checkout_base(task, run.repo_source, scratch / "repo")
    features = run.agents()["1"]
    outcomes = [run_feature_tests(task, f, patches[0], base, scratch).model_dump(mode="json") for f in features]
    passed = all(o["passed"] for o in outcomes)  # single: its one feature (the pair's other is not implemented)
    key = "passed" if run.setting == Setting.SINGLE else "both_passed"
    return {f"feature{i + 1}": outcome for i, outcome in enumerate(outcomes)} | {key: passed, "merge": None}
