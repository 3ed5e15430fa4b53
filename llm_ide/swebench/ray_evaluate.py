"""`llm-ide evaluate --engine ray`: each prediction's evaluation as a Ray task on a docker node; the logs come back to
the driver, which writes the evaluation folder and the report."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import docker
import ray

from llm_ide.environments.docker import RUN_ID_LABEL
from llm_ide.errors import crashed
from llm_ide.settings import SweBenchSettings
from llm_ide.swebench.dataset import Instance, RowError
from llm_ide.swebench.evaluate import EvalReport, EvalResult, EvaluationError, Evaluator
from llm_ide.swebench.preflight import SWEbenchError
from llm_ide.swebench.ray_connect import connect, disconnect
from llm_ide.swebench.ray_engine import MAX_RETRIES, alive_nodes, docker_nodes, on_nodes, raised
from llm_ide.swebench.ray_worker import DOCKER_SLOT, node_name, scratch_folder


def evaluate_task(
    settings: SweBenchSettings,
    instance: Instance | RowError | None,
    instance_id: str,
    patch: str | None,
    timeout: float | None,
) -> tuple[EvalResult, dict[str, bytes], str]:
    """On a node: evaluate in a scratch folder; (result, its log files by name, node)."""
    scratch = scratch_folder(f"eval-{instance_id}")
    shutil.rmtree(scratch, ignore_errors=True)
    try:
        result = Evaluator(settings, scratch, timeout).evaluate(instance, instance_id, patch)
        folder = scratch / instance_id
        files = {path.name: path.read_bytes() for path in folder.iterdir() if path.is_file()} if folder.is_dir() else {}
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return result, files, node_name()


def remove_eval_containers(instance_ids: list[str]) -> tuple[str, int]:
    """On a node: the evaluation containers of these instances (a cancelled task's)."""
    client, removed = docker.from_env(), 0
    for instance_id in instance_ids:
        for container in client.containers.list(
            all=True, ignore_removed=True, filters={"label": f"{RUN_ID_LABEL}=eval-{instance_id}"}
        ):
            container.remove(force=True)
            removed += 1
    return node_name(), removed


def evaluate_on_ray(
    preds: dict[str, dict[str, Any]],
    instances: dict[str, Instance | RowError],
    *,
    settings: SweBenchSettings,
    log_dir: Path,
    address: str | None,
    workers: int = 1,
    task_cpus: float = 1.0,
    task_memory_mb: int = 1024,
    timeout: float | None = None,
    on_result: Callable[[EvalResult], None] | None = None,
) -> EvalReport:
    try:
        reaper = connect(address, workers, task_cpus)
    except SWEbenchError as error:
        raise EvaluationError(str(error)) from None
    try:
        if not docker_nodes(alive_nodes()):
            raise EvaluationError(f"no node of the Ray cluster offers a {DOCKER_SLOT} resource (ray start --resources)")
        task = ray.remote(evaluate_task).options(
            num_cpus=task_cpus,
            memory=task_memory_mb * 1024 * 1024,
            resources={DOCKER_SLOT: 1},
            max_retries=MAX_RETRIES,
        )
        pending = {
            task.remote(settings, instances.get(iid), iid, preds[iid].get("model_patch"), timeout): iid
            for iid in sorted(preds)
        }
        results: list[EvalResult] = []
        try:
            while pending:
                ready, _ = ray.wait(list(pending), num_returns=1, timeout=0.5)
                for ref in ready:
                    iid = pending.pop(ref)
                    try:
                        result, files, _node = ray.get(ref)
                    except ray.exceptions.RayError as error:  # (the task's own exception when it raised)
                        said = " ".join(crashed(raised(error))[1].split())[:300]
                        result, files = EvalResult(iid, "error", detail=said), {}
                    if files:
                        folder = log_dir / iid
                        folder.mkdir(parents=True, exist_ok=True)
                        for name, data in files.items():
                            (folder / name).write_bytes(data)
                        result.log_dir = str(folder)
                    results.append(result)
                    if on_result is not None:
                        on_result(result)
        except KeyboardInterrupt:
            for ref in pending:
                ray.cancel(ref, force=True)
            on_nodes(remove_eval_containers, docker_nodes(alive_nodes()), sorted(preds), timeout=120)
            raise
        return EvalReport(results)
    finally:
        disconnect(reaper)
