"""What the attempts graph's nodes share: the run's settings and outputs, the task's cost budget, the reviewer's and
chooser's models; built by `run_attempts`, or from the graph input under LangGraph Studio."""

from __future__ import annotations

import json
import logging
import os
import re
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.attempts.trajectory import paid_path
from llm_ide.budget import Budget, CostBudget
from llm_ide.call_policy import CallPolicy
from llm_ide.composition import role_spec
from llm_ide.config import load_config
from llm_ide.environments.views import UNHOOKED
from llm_ide.errors import ConfigError, EnvironmentFailure
from llm_ide.inputs import GRAPH, input_config_error, require_inputs
from llm_ide.keep import FolderKeep
from llm_ide.models import Model, get_model
from llm_ide.patterns import BoundedPattern
from llm_ide.prompting import render_string
from llm_ide.run.call_log import CallLog
from llm_ide.run.request import RunRequest, check_request
from llm_ide.run.single import Listeners, RunEvent
from llm_ide.run.stopping import Commands
from llm_ide.run.usage import refuse_a_file, refuse_a_json_name
from llm_ide.state.operations import all_lessons, node_of, reasoning_chain
from llm_ide.whole_settings import Settings
from llm_ide.workspace.worktrees import git_worktree

log = logging.getLogger("llm_ide.attempts")


class TaskBudget(CostBudget):
    """The task's budget (`attempts.cost_limit`) over all its attempts, reviews and choice; spending also counts
    against the batch's budget when there is one, and either one spent stops the task. A call needs room in both."""

    def __init__(self, limit: float | None, batch: Budget | None = None) -> None:
        super().__init__(limit)
        self.batch = batch

    def admit(self, calls: int = 1) -> Any:
        own = super().admit(calls)
        if self.batch is None:
            return own
        try:
            return own, self.batch.admit(calls)
        except BaseException:
            super().release(own)
            raise

    def add(self, cost: float, reservation: Any = 0.0) -> None:
        own, batch = reservation if isinstance(reservation, tuple) else (reservation, 0.0)
        super().add(cost, own)
        if self.batch is not None:
            self.batch.add(cost, batch)

    def release(self, reservation: Any) -> None:
        own, batch = reservation if isinstance(reservation, tuple) else (reservation, 0.0)
        super().release(own)
        if self.batch is not None:
            self.batch.release(batch)

    @property
    def exhausted(self) -> bool:
        return super().exhausted or (self.batch is not None and self.batch.exhausted)


@dataclass
class AttemptsContext:
    """The attempts' run: its request (each attempt's run is made from it), who is told what it does, the task's
    budget, and the reviewer's and chooser's calls."""

    request: RunRequest
    listeners: Listeners = field(default_factory=Listeners)
    budget: Budget | None = None
    stop: threading.Event = field(default_factory=threading.Event)  # Ctrl-C: attempts in other threads end too
    commands: Commands = field(default_factory=Commands)  # (those in a silent command, in it)
    policy: CallPolicy = field(default_factory=CallPolicy)  # the reviewer's and chooser's calls (the task's budget)
    _models: dict[str, Model] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _paid: CallLog | None = None

    def __post_init__(self) -> None:
        if self.budget is None:
            self.budget = TaskBudget(self.settings.attempts.cost_limit or None, self.request.cost_budget)
        self.policy = self.policy.recording(self.paid)
        self.policy.budget = self.budget

    def paid(self, call: dict[str, Any]) -> None:
        """A reviewer's or chooser's call, logged as it is paid for (its node may never save: a kill)."""
        with self._lock:
            if self._paid is None:
                self.request.output_dir.mkdir(parents=True, exist_ok=True)
                self._paid = CallLog(paid_path(self.request.output_dir, self.request.run_id))
            self._paid.append({**call, "index": len(self._paid.existing)})
            self._paid.existing.append(call)

    def close(self) -> None:
        """The calls log's last gzip member completed (a plain `gzip -d` reads it)."""
        with self._lock:
            if self._paid is not None:
                self._paid.close()

    @property
    def settings(self) -> Settings:
        return self.request.settings  # type: ignore[return-value]

    @property
    def repo(self) -> Path | None:
        return self.request.repo

    def attempt_id(self, index: int) -> str:
        return attempt_id(self.request.run_id, index)

    def attempt_dir(self, index: int) -> Path:
        return attempt_dir(self.request.output_dir, index)

    def role_model(self, role: str) -> Model:
        with self._lock:
            if role not in self._models:
                spec, request = role_spec(self.settings.attempts, self.request.model, role), self.request
                keep = FolderKeep(request.output_dir, f"{request.run_id}.")
                self._models[role] = get_model(spec, self.settings.model, request.base_url, keep)
            return self._models[role]

    def forward(self, event: Any) -> None:
        """An attempt's event to the caller; once the run is stopped the attempt ends `interrupted` at its next step
        (its environment removed, its state saved). A command's progress is not a step: a command that ran to its
        end keeps its result."""
        self.commands.note(event)
        self.listeners.emit(event)
        if self.stop.is_set() and event.kind not in ("end", "command"):
            raise KeyboardInterrupt

    def halt(self) -> None:
        """Ctrl-C: every attempt under way stops at its next event, one in a command that prints nothing in it."""
        self.stop.set()
        self.commands.interrupt()

    def emit(self, phase: str, detail: str = "") -> None:
        """A phase to the caller (its `detail`, e.g. a review's reasons, as the event's observation) and the log."""
        log.info("%s%s", phase, f" — {detail}" if detail else "")
        self.listeners.emit(RunEvent(self.request.run_id, "phase", phase=phase, observation=detail))

    def ask(self, role: str, system: str, user: str, attempt: int = 0) -> tuple[str, dict[str, Any]]:
        """One reviewer or chooser call by the call policy (the task's budget charged): the reply and its record."""
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        model = self.role_model(role)
        reply, call = self.policy.call(model, messages, kind=role, attempt=attempt, model=model.name)
        return reply.text, call


def attempts_database(run_id: str) -> str:
    """The SQLite file in the run's folder that holds its attempts graph's thread (each attempt's: in its folder)."""
    return f"{run_id}.attempts.sqlite"


def attempt_id(run_id: str, index: int) -> str:
    return f"{run_id}-attempt{index}"


def attempt_dir(output_dir: Path, index: int) -> Path:
    return output_dir / f"attempt{index}"


def attempt_store(checkpoint: str | None) -> str | None:
    """The store of the attempts' threads: a PostgreSQL store the run was given, shared; else each its own SQLite file
    in its folder (None)."""
    return checkpoint if checkpoint and checkpoint.startswith("postgres") else None


def studio_context(state: dict[str, Any], thread: str) -> AttemptsContext:
    """LangGraph Studio (no context given): the run's context built from the graph input."""
    require_inputs(state)
    values = dict(state.get("config") or {})
    try:
        settings = load_config(values.pop("base", "default"), **values)
    except ConfigError as error:
        raise input_config_error(error) from None
    request = RunRequest(
        task=state["task"],
        model=state["model"],
        settings=settings,
        output_dir=Path(state.get("output") or Path("runs") / thread),
        run_id=re.sub(r"[^A-Za-z0-9._-]", "-", thread),
        repo=Path(state["repo"]).expanduser().resolve(),
        base_url=state.get("base_url"),
    )
    refuse_a_file(request.output_dir, GRAPH.output)
    refuse_a_json_name(request.output_dir, request.run_id, GRAPH.output)
    check_request(request, GRAPH, attempted=True)
    return AttemptsContext(request)


def git(repo: Path, *args: str) -> str:
    result = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=os.environ | UNHOOKED)
    if result.returncode != 0:
        raise EnvironmentFailure(f"git {' '.join(args)} in {repo}: {result.stderr.strip()[:300]}")
    return result.stdout.strip()


def uncommitted(repo: Path) -> str:
    """The repository's changes that are not in its HEAD commit (a few of their paths), or nothing."""
    status = git(repo, "status", "--porcelain", "--untracked-files=normal", "--ignore-submodules=dirty").splitlines()
    paths = [line.split(maxsplit=1)[1] for line in status if line.strip()]  # (`git` strips the first line's space)
    return ", ".join(paths[:3]) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def worktree(repo: Path, *args: str, check: bool = True) -> None:
    """`git worktree ARGS` in `repo`, one at a time (parallel attempts share the repository); a failure raised when
    `check`."""
    result = git_worktree(repo, *args)
    if check and result.returncode != 0:
        raise EnvironmentFailure(f"git worktree {' '.join(args)} in {repo}: {result.stderr.strip()[:300]}")


def local_worktree(ctx: AttemptsContext, index: int, base: str) -> Path:
    """A git worktree of the repository at the base commit for one attempt (kept on resume)."""
    assert ctx.repo is not None
    path = ctx.attempt_dir(index) / "repo"
    if not (path / ".git").exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        worktree(ctx.repo, "add", "--detach", "-f", str(path.resolve()), base)
    return path


def remove_worktrees(ctx: AttemptsContext, indices: list[int]) -> None:
    for index in indices:
        path = ctx.attempt_dir(index) / "repo"
        if ctx.repo is not None and path.exists():
            worktree(ctx.repo, "remove", "--force", str(path.resolve()), check=False)


def summarize(settings: Settings, trajectory: Path) -> dict[str, Any]:
    """What the reviewer reads of an attempt: its reasoning chain, its lessons and the last test output."""
    templates = settings.attempts.templates
    try:
        data = json.loads(trajectory.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        data = {}
    operations = data.get("operations", [])
    nodes = [node_of(op) for op in operations]
    chain = "\n".join(render_string(templates.reasoning_step, node=node) for node in reasoning_chain(nodes))
    pattern = BoundedPattern(settings.attempts.test_pattern, what="attempts.test_pattern")  # from a config
    tests = [n for n in nodes if n.action_type == "bash" and pattern.search(str(n.action_params.get("command", "")))]
    limit = settings.attempts.test_output_chars
    output = f"$ {tests[-1].action_params['command']}\n{tests[-1].observation}"[-limit:] if tests else ""
    return {
        "chain": chain,
        "lessons": all_lessons(nodes),
        "test_output": output or templates.no_tests.strip(),
        "steps": len(nodes),
        "facts": (data.get("info") or {}).get("facts") or {},  # what the run's variants found (llm_ide/variant.py)
    }
