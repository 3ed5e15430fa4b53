"""`llm-ide swebench --engine ray` on the batch's own one-node cluster (no `--address`): the shared cost limit held by
Ray workers, one after another and all at once; Ctrl-C reaching a task's silent command, and the rerun; how many
instances the driver runs at once for a cluster's slots."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from conftest import wait_for
from swebench_fixtures import build_dataset, gated_batch

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = "from llm_ide.cli import app; app()"


def test_global_cost_limit_holds_across_ray_workers(tmp_path: Path) -> None:
    """The budget lives in the batch's hub actor: runs in Ray worker processes add to it and stop at it. A real
    OpenAI-compatible server on loopback; every call costs $1."""
    from openai_server import OpenAIServer
    from ray_cluster import require_ray
    from swebench_fixtures import dollar_calls

    from llm_ide.swebench.batch import BatchOptions, run_swebench

    require_ray()
    data, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_calls(tmp_path, 3)
    with OpenAIServer(replies=calls) as server:
        options = BatchOptions(
            model="gpt-test", output=tmp_path / "out", environment="local", config_files=[config], base_url=server.url,
            cost_limit=4.0, engine="ray",
        )  # fmt: skip
        summary = run_swebench(str(data), "test", options)
    # one instance at a time (`--workers 1`), in the dataset's order, however long a task waits for the hub (Ray
    # alone would start the next one then): the first run submits at its third dollar, the second is stopped after
    # its first, the third never starts
    ended = {name: (outcome.exit_status, outcome.cost) for name, outcome in summary.outcomes.items()}
    assert ended == {"demo__calc-1": ("submitted", 3.0), "demo__text-1": ("cost_limit", 1.0)}
    assert (summary.not_started, summary.cost) == (["demo__shapes-1"], 4.0)
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    assert statuses["demo__shapes-1"] == {"exit_status": "not_started"}  # as the local batch: it was missing
    log = (tmp_path / "out" / "swebench.log").read_text()
    assert "demo__calc-1: submitted (node" in log.split("demo__text-1: cost_limit (node")[0]
    assert re.search(r"demo__text-1: cost_limit \(node \w+\): the shared cost limit is reached", log)
    assert "global cost limit $4.0000 reached (spent $4.0000, earlier runs in this folder included); 1 instance" in log


def test_ctrl_c_ends_a_ray_tasks_silent_command_at_once_and_the_rerun_runs_it_again(tmp_path: Path) -> None:
    """The run is in a Ray worker, in a command that prints nothing (no event to stop at): the hub's stop flag
    reaches it there, as Ctrl-C reaches a batch's threads; the rerun runs the cut command again. The instance queued
    behind it is in exit_statuses.yaml as not started, as in a local batch."""
    from ray_cluster import require_ray

    from llm_ide.swebench.store import read_preds

    require_ray()
    command = [sys.executable, "-c", CLI, *gated_batch(tmp_path, 2), "--engine", "ray"]
    batch = subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for((tmp_path / "started").exists, timeout=300, what="the command's start")
        batch.send_signal(signal.SIGINT)
        stdout, stderr = batch.communicate(timeout=120)  # the gate still shut
    finally:
        if batch.poll() is None:
            batch.kill()
    assert batch.returncode == 130, stdout + stderr
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    said = [(status["exit_status"], status.get("steps")) for status in statuses.values()]
    assert said == [("interrupted", 0), ("not_started", None)]

    (tmp_path / "gate").touch()
    rerun = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert (tmp_path / "trail").read_text() == "waited\n" * 3  # the cut command again, on resume; then the other's
    assert sorted(read_preds(tmp_path / "out")) == sorted(statuses)


@pytest.mark.parametrize(
    ("environment", "address", "workers", "task_cpus", "nodes", "expected"),
    [
        ("local", None, 1, 1.0, [{"CPU": 1.0, "docker_slot": 1.0}], 1),  # the batch's own cluster: --workers
        ("local", None, 3, 0.5, [{"CPU": 2.0, "docker_slot": 3.0}], 3),  # 2 whole CPUs hold 4 halves, 3 asked
        ("local", "head:6379", 1, 0.5, [{"CPU": 2.0}, {"CPU": 1.0}], 6),  # a cluster: its CPUs, whatever --workers
        ("docker", "head:6379", 1, 1.0, [{"CPU": 8.0, "docker_slot": 2.0}, {"CPU": 4.0}], 2),  # docker slots bind
        ("docker", "head:6379", 1, 2.0, [{"CPU": 3.0, "docker_slot": 4.0}], 1),  # 3 CPUs hold one 2-CPU task
        ("local", "head:6379", 1, 4.0, [{"CPU": 2.0}], 1),  # too small for one: one queued in Ray, not none
    ],
)
def test_the_driver_runs_as_many_instances_at_once_as_the_cluster_has_slots(
    tmp_path: Path,
    environment: str,
    address: str | None,
    workers: int,
    task_cpus: float,
    nodes: list[dict[str, float]],
    expected: int,
) -> None:
    from llm_ide.swebench.batch import BatchOptions
    from llm_ide.swebench.ray_engine import slots

    options = BatchOptions(
        model="m", output=tmp_path, environment=environment, ray_address=address, workers=workers, task_cpus=task_cpus
    )
    assert slots(options, [{"Resources": resources} for resources in nodes]) == expected


def test_global_cost_limit_holds_for_ray_workers_calling_at_the_same_moment(tmp_path: Path) -> None:
    """Three Ray tasks at once whose first calls the server answers only once all three have arrived: the hub admits
    each call (check and reservation in one actor method), so $4 buys four $1 calls whatever the order."""
    from openai_server import OpenAIServer
    from ray_cluster import require_ray
    from swebench_fixtures import assert_four_dollars, dollar_steps

    from llm_ide.swebench.batch import BatchOptions, run_swebench

    require_ray()
    data, _ = build_dataset(tmp_path / "data", 3)
    calls, config = dollar_steps(tmp_path, 12)
    with OpenAIServer(replies=calls, together=3) as server:
        options = BatchOptions(
            model="gpt-test", output=tmp_path / "out", environment="local", config_files=[config], base_url=server.url,
            cost_limit=4.0, engine="ray", workers=3, task_cpus=0.5,
        )  # fmt: skip
        summary = run_swebench(str(data), "test", options)
    assert_four_dollars(server, summary)
