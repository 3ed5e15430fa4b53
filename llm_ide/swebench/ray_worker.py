"""What runs on the Ray nodes: the batch's hub actor (global cost budget, stop flag, progress events) and the task
that runs one instance and sends its outcome and files back to the driver (the single writer of the batch folder)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import ray

from llm_ide.budget import CostBudget
from llm_ide.environments.docker.cleanup import cleanup_containers, connect
from llm_ide.environments.docker.images import ensure_image
from llm_ide.errors import BudgetSpent, crashed
from llm_ide.run.pg_thread import PostgresThread, is_postgres
from llm_ide.run.stopping import Commands
from llm_ide.swebench.choice import BatchOptions, batch_config
from llm_ide.swebench.dataset import Instance
from llm_ide.swebench.instances import Outcome, execute_instance, not_checked_out
from llm_ide.swebench.preflight import SWEbenchError
from llm_ide.tools.progress import activity, outcome_line

DOCKER_SLOT = "docker_slot"  # the custom resource a node offers when it runs docker: `ray start --resources`
NODE_FILES = (".lock", ".intents.jsonl", ".checkpoint.sqlite", ".checkpoint.sqlite-wal", ".checkpoint.sqlite-shm")
STOP_POLL = 0.5  # seconds between two looks at the hub's stop flag from one task


@ray.remote(num_cpus=0)
class BatchHub:
    """One per batch, on the driver's node: the global cost limit, the stop flag (Ctrl-C) and the queue of progress
    events the driver drains. Tasks call it fire-and-forget, except for the budget and the stop flag. An actor runs
    one method at a time: a call's admission (check and reservation) is atomic across every node."""

    def __init__(self, limit: float | None, spent: float = 0.0, dearest: float = 0.0) -> None:
        self.budget = CostBudget(limit, spent, dearest)
        self.stopped = False
        self.events: list[tuple[Any, ...]] = []

    def admit(self, calls: int) -> float | str:
        """The reservation, or the message of BudgetSpent (raised on the caller's side)."""
        try:
            return self.budget.admit(calls)
        except BudgetSpent as error:
            return str(error)

    def add_cost(self, cost: float, reservation: float) -> None:
        self.budget.add(cost, reservation)

    def release(self, reservation: float) -> None:
        self.budget.release(reservation)

    def exhausted(self) -> bool:
        return self.budget.exhausted

    def stop(self) -> None:
        self.stopped = True

    def is_stopped(self) -> bool:
        return self.stopped

    def post(self, event: tuple[Any, ...]) -> None:
        self.events.append(event)

    def drain(self) -> tuple[list[tuple[Any, ...]], float]:
        events, self.events = self.events, []
        return events, self.budget.spent


class RemoteBudget:
    """The run's view of the hub's budget (`llm_ide.budget.Budget`): every admission and spending is a call of the
    hub actor, waited for."""

    def __init__(self, hub: Any) -> None:
        self.hub = hub

    def admit(self, calls: int = 1) -> float:
        answer = ray.get(self.hub.admit.remote(calls))
        if isinstance(answer, str):
            raise BudgetSpent(answer)
        return answer

    def add(self, cost: float, reservation: Any = 0.0) -> None:
        if cost or reservation:
            ray.get(self.hub.add_cost.remote(cost, reservation))

    def release(self, reservation: Any) -> None:
        if reservation:
            ray.get(self.hub.release.remote(reservation))

    @property
    def exhausted(self) -> bool:
        return ray.get(self.hub.exhausted.remote())


@dataclass
class RemoteStop:
    """`is_set()` of the hub's stop flag, asked at most every STOP_POLL seconds."""

    hub: Any
    _seen: bool = False
    _asked: float = field(default=0.0)

    def is_set(self) -> bool:
        if not self._seen and time.monotonic() - self._asked >= STOP_POLL:
            self._asked = time.monotonic()
            self._seen = ray.get(self.hub.is_stopped.remote())
        return self._seen


@dataclass
class TaskResult:
    outcome: Outcome
    files: dict[str, bytes]  # relative path → content of the run folder's files (none when shared)
    node: str


def node_name() -> str:
    context = ray.get_runtime_context()
    return context.get_node_id()[:8]


def scratch_folder(instance_id: str) -> Path:
    """A node-local run folder (under LLM_IDE_RAY_SCRATCH or the temp dir), one per node, removed after the task."""
    root = Path(os.environ.get("LLM_IDE_RAY_SCRATCH") or Path(tempfile.gettempdir()) / "llm-ide-ray")
    return root / ray.get_runtime_context().get_node_id()[:16] / instance_id


def event_tuple(instance_id: str, node: str, event: Any) -> tuple[Any, ...]:
    if event.kind == "tool":
        tool = event.tool
        if tool.kind == "failed":
            return (instance_id, node, "tool_failed", outcome_line(tool), 0, "", 0.0)
        return (instance_id, node, "phase", activity(tool), 0, "", 0.0)
    return (instance_id, node, event.kind, event.phase, event.step, event.action[:300], event.cost)


def run_instance_task(instance: Instance, options: BatchOptions, hub: Any, seed: dict[str, bytes]) -> TaskResult:
    """The body of a Ray task: one instance, resumed from its checkpoint (a retry after a node died included)."""
    node = node_name()
    stop = RemoteStop(hub)
    if stop.is_set() or ray.get(hub.exhausted.remote()):
        return TaskResult(Outcome(instance.instance_id, None), {}, node)
    hub.post.remote((instance.instance_id, node, "start", "", 0, "", 0.0))
    shared = options.ray_shared_output or not is_postgres(options.checkpoint)
    run_dir = options.output / instance.instance_id if shared else scratch_folder(instance.instance_id)
    if not shared:
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        for name, data in seed.items():  # the run's files as the driver has them: the log of calls continues
            (run_dir / name).parent.mkdir(parents=True, exist_ok=True)
            (run_dir / name).write_bytes(data)
    guard = PostgresThread(options.checkpoint, instance.instance_id) if is_postgres(options.checkpoint) else None
    commands = Commands()

    def on_event(instance_id: str, event: Any) -> None:
        commands.note(event)
        hub.post.remote(event_tuple(instance_id, node, event))

    try:
        with commands.interrupted_when(stop, STOP_POLL):  # a silent command gets the Ctrl-C too
            outcome = execute_instance(
                instance,
                options,
                batch_config(options),
                run_dir,
                budget=RemoteBudget(hub),
                on_event=on_event,
                stop=stop,
                intents=guard,
                keep=guard,
            )
    except SWEbenchError as error:
        outcome = not_checked_out(instance, error)
    except Exception as error:  # one instance's crash must not stop the batch; it is retried on the next run
        status, text = crashed(error)
        outcome = Outcome(instance.instance_id, status, error=text, details={"error": text})
    finally:
        if guard is not None:
            guard.close()
    outcome.node = node
    files = {} if shared else run_files(run_dir, instance.instance_id)
    if not shared:
        shutil.rmtree(run_dir, ignore_errors=True)
    return TaskResult(outcome, files, node)


def run_files(run_dir: Path, instance_id: str) -> dict[str, bytes]:
    """The run folder's files by relative path (trajectories, calls logs, logs, attempts' folders), without what
    belongs to the node (locks, SQLite checkpoints, intents: Postgres holds those) or a local checkout."""
    if not run_dir.is_dir():
        return {}
    files = {}
    for path in sorted(run_dir.rglob("*")):
        relative = path.relative_to(run_dir)
        if path.is_file() and relative.parts[0] != "repo" and not path.name.endswith(NODE_FILES):
            files[str(relative)] = path.read_bytes()
    return files


def seed_files(output: Path, instance_id: str) -> dict[str, bytes]:
    """What a run folder on a node starts with: the driver's copy of the run's files (a resumed run's calls)."""
    return run_files(output / instance_id, instance_id)


def ensure_images(images: list[str], pull: str) -> tuple[str, int, float]:
    """On one node: pull (or find) each image; (node, images fetched, seconds)."""

    started, fetched = time.monotonic(), 0
    client = connect()
    for image in images:
        try:
            client.images.get(image)
        except Exception:
            ensure_image(client, image, pull)
            fetched += 1
    return node_name(), fetched, time.monotonic() - started


def remove_containers(run_ids: list[str]) -> tuple[str, int]:
    """On one node: remove the containers of this batch's runs whose process is gone (a task's worker killed). A live
    one is its own run's to remove, and may be another's of the same instance (another batch, a local run); one a task
    still holds goes with its worker (its watchdog)."""

    client, removed = connect(), 0
    for run_id in run_ids:
        removed += len(cleanup_containers(client, run_id=run_id).removed)
    return node_name(), removed
