"""`--engine ray`: a batch's instances as Ray tasks on the nodes of a cluster. Each task asks for CPU, memory and a
docker slot; a task whose node dies is retried by Ray on another node and resumes from the thread's last completed
step (Postgres checkpoints). The driver is the single writer of the batch folder."""

from __future__ import annotations

import logging
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from llm_ide.environments import capabilities
from llm_ide.errors import crashed
from llm_ide.fileio import atomic_write
from llm_ide.run.pg_thread import is_postgres
from llm_ide.swebench.choice import BatchOptions, batch_config
from llm_ide.swebench.dataset import Instance
from llm_ide.swebench.instances import (
    BatchSummary,
    Outcome,
    batch_log,
    log_not_started,
    log_outcome,
    not_opened,
    record_not_started,
    record_outcome,
    say_store_lost,
    store_out_of_reach,
)
from llm_ide.swebench.preflight import SWEbenchError
from llm_ide.swebench.progress import BatchProgress
from llm_ide.swebench.ray_connect import connect, disconnect
from llm_ide.swebench.ray_nodes import check_packages
from llm_ide.swebench.ray_worker import (
    DOCKER_SLOT,
    BatchHub,
    ensure_images,
    remove_containers,
    run_instance_task,
    seed_files,
)
from llm_ide.swebench.store import OutputStore

log = logging.getLogger("llm_ide.swebench")

MAX_RETRIES = 3  # a task whose node (or worker process) died runs again, up to this many times


def absolute(options: BatchOptions) -> BatchOptions:
    """Paths as every node sees them (a worker's current folder is not the driver's)."""

    model = options.model
    if model.startswith("scripted:") and not Path(model.removeprefix("scripted:")).is_absolute():
        model = "scripted:" + str(Path(model.removeprefix("scripted:")).resolve())
    checkpoint = options.checkpoint
    if checkpoint and checkpoint.startswith("sqlite:"):
        checkpoint = f"sqlite:{Path(checkpoint.removeprefix('sqlite:')).expanduser().resolve()}"
    return replace(
        options,
        model=model,
        output=options.output.resolve(),
        config_files=[path.resolve() for path in options.config_files],
        checkpoint=checkpoint,
        repos=options.repos.expanduser().resolve() if options.repos else None,
    )


def raised(error: ray.exceptions.RayError) -> BaseException:
    """What a Ray task's failure was: the task's own exception when it raised (a RayTaskError's text is the task's
    traceback, with colours, the worker's pid and carets), else Ray's error (its nodes died, it was cancelled)."""
    return error.cause if isinstance(error, ray.exceptions.RayTaskError) and error.cause else error


def alive_nodes() -> list[dict[str, Any]]:
    return [node for node in ray.nodes() if node.get("Alive")]


def check_cluster(options: BatchOptions) -> list[dict[str, Any]]:
    """The nodes, once the batch can run on them: >1 node needs Postgres checkpoints, docker needs docker slots."""

    nodes = alive_nodes()
    if len(nodes) > 1 and not is_postgres(options.checkpoint):
        raise SWEbenchError(
            f"--engine ray on a cluster of {len(nodes)} nodes needs --checkpoint postgres://… (an instance "
            "resumed on another node must find its checkpoint there)"
        )
    if len(nodes) > 1 and batch_config(options).attempts.max > 1:
        raise SWEbenchError(
            f"--engine ray on a cluster of {len(nodes)} nodes runs one attempt per instance: each attempt's record of "
            "the commands it ran stays on its node, so a retry elsewhere could run one twice (attempts.max must be 1)"
        )
    if capabilities(options.environment).image and not any(node["Resources"].get(DOCKER_SLOT) for node in nodes):
        raise SWEbenchError(
            f"no node of the Ray cluster offers a {DOCKER_SLOT} resource: start the nodes that run docker with "
            f"ray start --resources='{{\"{DOCKER_SLOT}\": N}}' (N instances at once)"
        )
    return nodes


def slots(options: BatchOptions, nodes: list[dict[str, Any]]) -> int:
    """How many instances run at once: each node's CPUs over `--task-cpus`, and its docker slots when the environment
    needs docker; `--workers` on the batch's own one-node cluster. The driver holds the rest back: Ray alone would
    start them, as a task waiting for the hub (`ray.get`) lends its CPU to the next one."""

    needs_docker = capabilities(options.environment).image
    total = 0
    for node in nodes:
        resources = node["Resources"]
        count = math.floor(resources.get("CPU", 0) / options.task_cpus + 1e-9)
        total += min(count, int(resources.get(DOCKER_SLOT, 0))) if needs_docker else count
    return max(1, total if options.ray_address else min(total, options.workers))


def task_options(options: BatchOptions) -> dict[str, Any]:
    return {
        "num_cpus": options.task_cpus,
        "memory": options.task_memory_mb * 1024 * 1024,
        "resources": {DOCKER_SLOT: 1} if capabilities(options.environment).image else {},
        "max_retries": MAX_RETRIES,
        "retry_exceptions": False,
    }


def on_nodes(function: Any, nodes: list[dict[str, Any]], *args: Any, timeout: float = 600) -> list[Any]:
    """`function(*args)` once on each node, pinned there."""
    remote = ray.remote(function)
    refs = [
        remote.options(
            num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node["NodeID"], soft=False)
        ).remote(*args)
        for node in nodes
    ]
    return ray.get(refs, timeout=timeout)


def docker_nodes(nodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [node for node in nodes if node["Resources"].get(DOCKER_SLOT)]


def prefetch_images(instances: list[Instance], options: BatchOptions, nodes: list[dict[str, Any]]) -> None:
    """--prefetch-images: every docker node pulls the batch's images before the first task starts."""

    images = sorted({instance.image for instance in instances})
    pull = batch_config(options).environment.pull
    for node, fetched, seconds in on_nodes(ensure_images, docker_nodes(nodes), images, pull, timeout=3600):
        log.info("prefetch: node %s has the %d images (%d fetched, %.1f s)", node, len(images), fetched, seconds)


def remove_batch_containers(instances: list[Instance]) -> int:
    """Every docker node removes the containers the batch's runs left (those of killed tasks); another run's of the
    same instances, live, stays."""

    nodes = docker_nodes(alive_nodes())
    removed = on_nodes(remove_containers, nodes, [instance.instance_id for instance in instances], timeout=120)
    return sum(count for _, count in removed)


def write_run_files(output: Path, instance_id: str, files: dict[str, bytes]) -> None:
    folder = output / instance_id
    folder.mkdir(parents=True, exist_ok=True)
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / name, data)


class RayBatch:
    """The driver's side of one batch: submit, drain the hub's events into the progress, record the results."""

    def __init__(
        self, instances: list[Instance], options: BatchOptions, progress: BatchProgress, spent: float = 0.0
    ) -> None:

        self.options, self.progress = options, progress
        self.store = OutputStore(options.output)
        here = NodeAffinitySchedulingStrategy(ray.get_runtime_context().get_node_id(), soft=False)
        hub = BatchHub.options(scheduling_strategy=here)
        self.hub = hub.remote(options.cost_limit, spent, self.store.call_cost())  # as long as we
        self.task = ray.remote(run_instance_task).options(**task_options(options))
        self.queued, self.pending = list(instances), dict[Any, Instance]()
        self.outcomes: dict[str, Outcome] = {}
        self.not_started: list[str] = []
        self.started: set[str] = set()
        self.spent = spent
        self.lost = ""  # why the batch stopped: its checkpoint store out of reach
        self.submit()

    def submit(self) -> None:
        """Tasks for the queued instances, as many as the cluster has free slots; none once the budget is spent."""

        if not self.queued:
            return
        if ray.get(self.hub.exhausted.remote()):
            self.not_started += [instance.instance_id for instance in self.queued]
            self.queued = []
        free = slots(self.options, alive_nodes()) - len(self.pending)
        while self.queued and free > 0:
            instance, free = self.queued.pop(0), free - 1
            seed = seed_files(self.options.output, instance.instance_id)
            self.pending[self.task.remote(instance, self.options, self.hub, seed)] = instance

    def drain(self) -> None:

        events, self.spent = ray.get(self.hub.drain.remote())
        for instance_id, node, kind, phase, step, action, cost in events:
            if kind == "start":
                self.started.add(instance_id)
                self.progress.start(instance_id, node)
            elif kind == "tool_failed":
                self.progress.console.print(f"{instance_id}: {phase}", highlight=False, soft_wrap=True)
            else:
                self.progress.event(instance_id, kind, phase=phase, step=step, action=action, cost=cost)

    def wait(self, timeout: float = 0.5) -> None:
        ready, _ = ray.wait(list(self.pending), num_returns=1, timeout=timeout)
        self.drain()
        for ref in ready:
            self.collect(ref, self.pending.pop(ref))
        if ready:
            self.submit()

    def collect(self, ref: Any, instance: Instance) -> None:
        try:
            result = ray.get(ref)
            outcome, files = result.outcome, result.files
        except ray.exceptions.TaskCancelledError:
            self.not_started.append(instance.instance_id)
            return
        except ray.exceptions.RayError as error:  # its nodes died more often than it may be retried, or it raised
            outcome, files = self.crashed(instance, error), {}
        if outcome.exit_status is None:
            self.not_started.append(instance.instance_id)
            return
        try:
            write_run_files(self.options.output, instance.instance_id, files)
            record_outcome(self.store, self.options.model, outcome)
        except OSError as error:  # a full disk: the status is rebuilt from the trajectories later
            log.error("%s: result not recorded: %s", instance.instance_id, error)
        log_outcome(outcome, f"node {outcome.node or '?'}")
        self.outcomes[instance.instance_id] = outcome
        self.progress.finish(instance.instance_id, outcome.exit_status, outcome.cost, outcome.steps, outcome.error)
        if not self.lost and (why := store_out_of_reach(self.options, outcome)):
            self.stop_at_loss(why)

    def crashed(self, instance: Instance, error: ray.exceptions.RayError) -> Outcome:
        """A task that failed: its run could not open the batch's lost store (interrupted), or it crashed."""
        if why := store_out_of_reach(self.options):
            return not_opened(instance, why)
        status, text = crashed(raised(error))
        text = " ".join(text.split())[:300]
        return Outcome(instance.instance_id, status, error=text, details={"error": text})

    def stop_at_loss(self, why: str) -> None:
        """The checkpoint store is out of reach: no more tasks, the running ones end at their next event (as at
        Ctrl-C, their state as their last checkpoint holds it), the batch then stops."""
        self.lost = why
        ray.get(self.hub.stop.remote())
        self.not_started += [instance.instance_id for instance in self.queued]
        self.queued = []
        for ref, instance in self.pending.items():
            if instance.instance_id not in self.started:
                ray.cancel(ref, force=False)

    def interrupt(self, instances: list[Instance]) -> None:
        """Ctrl-C: queued tasks are cancelled, running ones end as `interrupted` at their next event (state saved,
        container removed, files sent back); a second Ctrl-C kills them. Either way every node then removes the
        batch's containers."""

        ray.get(self.hub.stop.remote())
        self.not_started += [instance.instance_id for instance in self.queued]
        self.queued = []
        self.drain()
        for ref, instance in self.pending.items():
            if instance.instance_id not in self.started:  # a running one ends by itself and sends its files back
                ray.cancel(ref, force=False)
        try:
            while self.pending:
                self.wait()
        except KeyboardInterrupt:
            log.warning("batch: interrupted again; killing the tasks")
            for ref in self.pending:
                ray.cancel(ref, force=True)
        finally:
            removed = remove_batch_containers(instances)
            log.info("batch: %d containers removed on the nodes", removed)


def run_batch_ray(
    instances: list[Instance], options: BatchOptions, progress: BatchProgress, summary: BatchSummary
) -> BatchSummary:

    options = absolute(options)
    reaper = connect(options.ray_address, options.workers, options.task_cpus)
    try:
        nodes = check_cluster(options)
        check_packages(nodes)
        with batch_log(options.output), progress:
            log.info(
                "batch: %d instances as Ray tasks on %d nodes (%s), model %s",
                len(instances),
                len(nodes),
                options.ray_address or "local",
                options.model,
            )
            if options.prefetch_images and capabilities(options.environment).image:
                prefetch_images(instances, options, nodes)
            batch = RayBatch(instances, options, progress, summary.spent_before)
            try:
                while batch.pending:
                    batch.wait()
            except KeyboardInterrupt:
                log.warning("batch: interrupted; the running instances end at their next event (Ctrl-C again: at once)")
                batch.interrupt(instances)
                raise
            finally:
                summary.outcomes.update(batch.outcomes)
                summary.not_started.extend(batch.not_started)
                summary.spent = batch.spent
                record_not_started(batch.store, batch.not_started)
            if batch.lost:
                say_store_lost(summary, batch.lost)
            elif options.cost_limit and batch.not_started:
                log_not_started(options.cost_limit, batch.spent, len(batch.not_started))
    finally:
        disconnect(reaper)
    return summary
