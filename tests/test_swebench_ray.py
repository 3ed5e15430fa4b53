"""`llm-ide swebench --engine ray` on a real two-node Ray cluster of this machine, checkpoints in a real Postgres:
a node's raylet is SIGKILLed while it runs an instance; Ray retries the task on the other node, which resumes it."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from pg_server import postgres_server
from ray_cluster import ray_cluster
from swebench_fixtures import (
    FIX_COMMAND,
    build_dataset,
    leftover_containers,
    official_image,
    write_config,
    write_script,
)

pytestmark = [pytest.mark.docker, pytest.mark.slow]

CLI = "from llm_ide.cli import app; app()"
PREFIX = f"r{os.getpid()}"
# each command leaves a mark in steps.txt (a command run twice leaves two) and prints a nanosecond timestamp
COMMANDS = [
    "date +%s%N; echo one >> steps.txt",
    "sleep 3; date +%s%N; echo two >> steps.txt",
    "date +%s%N; echo three >> steps.txt",
    FIX_COMMAND,
]


def wait_for(predicate: Any, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def dataset(root: Path, count: int) -> tuple[Path, list[dict[str, Any]]]:
    """The tiny instances under ids of this test process (containers of concurrent test runs never mix)."""
    import docker
    from conftest import require_docker

    require_docker()
    _, rows = build_dataset(root, count, client=docker.from_env())
    for row in rows:
        if not (row.get("image_name") or row.get("image")):
            row["image_name"] = official_image(row["instance_id"])
        row["instance_id"] = row["instance_id"].replace("demo__", f"{PREFIX}__")
    path = root / "ray.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return path, rows


def running_on(scratch: Path) -> list[tuple[str, list[dict[str, Any]]]]:
    """(instance id, operations of its trajectory) of the runs in a node's scratch folder."""
    found = []
    for path in scratch.glob("*/*/*.traj.json"):
        try:
            found.append((path.parent.name, json.loads(path.read_text())["operations"]))
        except (OSError, ValueError, KeyError):
            continue
    return found


def commands(trajectory: dict[str, Any]) -> list[tuple[str, str]]:
    return [(op["action_type"], op["action_params"].get("command", "")) for op in trajectory["operations"]]


def test_node_killed_mid_instance_resumes_on_the_other_node(tmp_path: Path) -> None:
    import docker

    path, rows = dataset(tmp_path / "data", 6)
    ids = sorted(row["instance_id"] for row in rows)
    model = write_script(tmp_path / "steps.yaml", COMMANDS)
    output = tmp_path / "out"
    scratch = {name: tmp_path / f"scratch-{name}" for name in ("head", "node2")}
    slots = [{"docker_slot": 1}, {"docker_slot": 1}]
    env = [{"LLM_IDE_RAY_SCRATCH": str(scratch[name])} for name in ("head", "node2")]
    with postgres_server() as url, ray_cluster(tmp_path / "ray", slots, env=env) as cluster:
        args = [
            sys.executable, "-c", CLI, "swebench", "--subset", str(path), "--split", "test", "--model", model,
            "--output", str(output), "--config", str(write_config(tmp_path / "c.yaml")), "--engine", "ray",
            "--address", cluster.address, "--checkpoint", url, "--task-cpus", "0.5", "--task-memory", "256",
        ]  # fmt: skip
        batch = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env={**os.environ, **cluster.env},
            start_new_session=True,
        )
        try:
            wait_for(lambda: any(len(ops) >= 1 for _, ops in running_on(scratch["node2"])))
            raylet = cluster.nodes[1].raylet_pid()
            assert raylet is not None
            os.kill(raylet, signal.SIGKILL)
            killed, at_kill = next((iid, ops) for iid, ops in running_on(scratch["node2"]) if len(ops) >= 1)
            node2 = next(scratch["node2"].iterdir()).name[:8]  # the folder is named by the node's id
            stdout, stderr = batch.communicate(timeout=600)
        finally:
            if batch.poll() is None:
                os.killpg(batch.pid, signal.SIGKILL)
    assert batch.returncode == 0, stderr[-3000:]
    assert "swebench: 6/6 done, cost $0.00, submitted: 6" in stdout

    preds = json.loads((output / "preds.json").read_text())
    assert sorted(preds) == ids
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())
    assert statuses["instances_by_exit_status"] == {"submitted": ids}
    trajectories = {iid: json.loads((output / iid / f"{iid}.traj.json").read_text()) for iid in ids}
    uninterrupted = next(t for iid, t in trajectories.items() if iid != killed)
    resumed = trajectories[killed]
    assert commands(resumed) == commands(uninterrupted)  # the same operations as an uninterrupted run
    kept = [op["observation"] for op in resumed["operations"][: len(at_kill)]]
    assert kept == [op["observation"] for op in at_kill]  # the steps done before the kill are not redone
    marks = [
        line[1:] for line in preds[killed]["model_patch"].splitlines() if line.startswith("+") and "+++" not in line
    ]
    steps = [mark for mark in marks if mark in ("one", "two", "three")]
    assert steps[0] == "one" and len(steps) == len(set(steps))  # each command at most once
    assert f"run {killed} resumed" in (output / killed / f"{killed}.log").read_text()
    assert f"{killed}: started on node {node2}" in stdout
    log = (output / "swebench.log").read_text().splitlines()
    ended_on = {line.split()[3].rstrip(":"): line.split()[-1] for line in log if " on node " in line}
    assert ended_on[killed] != node2
    for iid in ids:
        assert preds[iid]["model_patch"].count("+one") == 1
    wait_for(lambda: leftover_containers(docker.from_env(), f"{PREFIX}__") == [], timeout=60)
