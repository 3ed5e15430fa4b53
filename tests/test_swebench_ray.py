"""`llm-ide swebench --engine ray` on a real two-node Ray cluster of this machine, checkpoints in a real Postgres:
a node's raylet is SIGKILLed while it runs an instance; Ray retries the task on the other node, which resumes it;
a batch interrupted on both nodes; a SIGKILLed driver leaves nothing of its own one-node cluster
(test_swebench_ray_own.py holds that cluster's other tests)."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import BASE_IMAGE, wait_for
from pg_server import postgres_server
from ray_cluster import ray_cluster
from swebench_fixtures import (
    FIX_COMMAND,
    build_dataset,
    gated_batch,
    leftover_containers,
    official_image,
    write_config,
    write_script,
)

from llm_ide.environments.docker.cleanup import owner_labels

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


@pytest.fixture(scope="module")
def six(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[str]]:
    path, rows = dataset(tmp_path_factory.mktemp("ray-data"), 6)
    return path, sorted(row["instance_id"] for row in rows)


@pytest.fixture(scope="module")
def postgres_server_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


@pytest.fixture
def postgres_url(postgres_server_url: str, request: pytest.FixtureRequest) -> str:
    """A database of its own per test: the threads (named by instance ids) never meet another test's."""
    import psycopg

    name = "t_" + request.node.name.removeprefix("test_")[:40]
    with psycopg.connect(postgres_server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return postgres_server_url.rsplit("/", 1)[0] + "/" + name


@contextmanager
def two_nodes(tmp_path: Path) -> Iterator[tuple[Any, dict[str, Path]]]:
    """Two nodes of one docker slot each; each node's runs go to its own scratch folder (its "local disk")."""
    scratch = {name: tmp_path / f"scratch-{name}" for name in ("head", "node2")}
    env = [{"LLM_IDE_RAY_SCRATCH": str(scratch[name])} for name in ("head", "node2")]
    with ray_cluster(tmp_path / "ray", [{"docker_slot": 1}, {"docker_slot": 1}], env=env) as cluster:
        yield cluster, scratch


def batch_args(data: Path, model: str, output: Path, config: Path, address: str, url: str) -> list[str]:
    return [
        sys.executable, "-c", CLI, "swebench", "--subset", str(data), "--split", "test", "--model", model,
        "--output", str(output), "--config", str(config), "--engine", "ray", "--address", address,
        "--checkpoint", url, "--task-cpus", "0.5", "--task-memory", "256",
    ]  # fmt: skip


def start(args: list[str], cluster: Any) -> subprocess.Popen:
    env = {**os.environ, **cluster.env}
    return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)


def test_node_killed_mid_instance_resumes_on_the_other_node(
    tmp_path: Path, six: tuple[Path, list[str]], postgres_url: str
) -> None:
    import docker

    path, ids = six
    model = write_script(tmp_path / "steps.yaml", COMMANDS)
    output = tmp_path / "out"
    with two_nodes(tmp_path) as (cluster, scratch):
        args = batch_args(path, model, output, write_config(tmp_path / "c.yaml"), cluster.address, postgres_url)
        batch = start([*args, "--prefetch-images"], cluster)
        try:
            wait_for(lambda: any(len(ops) >= 1 for _, ops in running_on(scratch["node2"])), timeout=300)
            raylet = cluster.nodes[1].raylet_pid()
            assert raylet is not None
            os.kill(raylet, signal.SIGKILL)
            killed, at_kill = next((iid, ops) for iid, ops in running_on(scratch["node2"]) if len(ops) >= 1)
            node2 = next(scratch["node2"].iterdir()).name[:8]  # the folder is named by the node's id
            stdout, stderr = batch.communicate(timeout=600)
        finally:
            if batch.poll() is None:
                batch.kill()
    assert batch.returncode == 0, stderr[-3000:]
    assert "swebench: 6/6 done, cost $0.0000, submitted: 6" in stdout

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
    ended_on = dict(re.findall(r" (\S+): \w+ \(node (\S+)\)$", "\n".join(log), re.M))  # `<id>: <status> (node <n>)`
    assert ended_on[killed] != node2
    prefetched = [line for line in log if "prefetch: node" in line]
    assert len(prefetched) == 2 and all("has the 6 images" in line for line in prefetched)
    for iid in ids:
        assert preds[iid]["model_patch"].count("+one") == 1
    wait_for(lambda: leftover_containers(docker.from_env(), f"{PREFIX}__", anyones=True) == [], timeout=60)


def test_interrupt_ends_the_running_instances_and_removes_every_nodes_containers(
    tmp_path: Path, six: tuple[Path, list[str]], postgres_url: str
) -> None:
    import docker

    path, ids = six
    model = write_script(tmp_path / "slow.yaml", ["sleep 1; date +%s%N"] * 3 + [FIX_COMMAND])
    output = tmp_path / "out"
    client = docker.from_env()
    with two_nodes(tmp_path) as (cluster, scratch):
        args = batch_args(path, model, output, write_config(tmp_path / "c.yaml"), cluster.address, postgres_url)
        without = start([arg for arg in args if arg not in ("--checkpoint", postgres_url)], cluster)
        _, stderr = without.communicate(timeout=300)
        assert without.returncode == 2 and "2 nodes needs --checkpoint postgres://" in " ".join(stderr.split())
        attempts = tmp_path / "attempts.yaml"
        attempts.write_text("attempts: {max: 3}\n")
        refused = start([*args, "--config", str(attempts)], cluster)
        _, stderr = refused.communicate(timeout=300)
        assert refused.returncode == 2 and "(attempts.max must be 1)" in " ".join(stderr.split()), stderr[-2000:]
        # another run of one of the batch's instances, live on this host (a local run, another batch): not the batch's
        other = client.containers.run(BASE_IMAGE, ["sleep", "infinity"], labels=owner_labels(ids[0]), detach=True)
        batch = start(args, cluster)
        try:
            wait_for(
                lambda: all(any(len(ops) >= 1 for _, ops in running_on(folder)) for folder in scratch.values()),
                timeout=300,
            )
            batch.send_signal(signal.SIGINT)
            stdout, stderr = batch.communicate(timeout=300)
        finally:
            if batch.poll() is None:
                batch.kill()
            alive = [container.id for container in client.containers.list(filters={"id": other.id})]
            with contextlib.suppress(docker.errors.NotFound):
                other.remove(force=True)
        assert batch.returncode == 130, stderr[-3000:]
        assert alive == [other.id]  # the batch's removal of what its runs left passed over it
        assert (
            leftover_containers(client, f"{PREFIX}__", anyones=True) == []
        )  # removed on every node before the driver returned
        statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())["instances_by_exit_status"]
        stopped = statuses.pop("interrupted")
        assert 1 <= len(stopped) <= 2 and set(statuses) <= {"submitted", "not_started"}  # at most one running per node
        at_stop = {iid: json.loads((output / iid / f"{iid}.traj.json").read_text())["operations"] for iid in stopped}
        assert all(len(ops) <= 5 for ops in at_stop.values()), {i: len(ops) for i, ops in at_stop.items()}

        rerun = start(args, cluster)
        stdout, stderr = rerun.communicate(timeout=600)
        assert rerun.returncode == 0, stderr[-3000:]
        evaluate = start(
            [sys.executable, "-c", CLI, "evaluate", str(output / "preds.json"), "--subset", str(path), "--split",
             "test", "--engine", "ray", "--address", cluster.address, "--output", str(tmp_path / "eval")],
            cluster,
        )  # fmt: skip
        stdout, stderr = evaluate.communicate(timeout=600)
    assert evaluate.returncode == 0, stderr[-3000:]
    assert "resolved 6/6 (100.0%)" in stdout
    assert all((tmp_path / "eval" / "logs" / iid / "test_output.txt").is_file() for iid in ids)  # logs came back
    assert sorted(json.loads((output / "preds.json").read_text())) == ids
    for iid, before in at_stop.items():
        after = json.loads((output / iid / f"{iid}.traj.json").read_text())["operations"]
        assert len(after) == 5
        assert [op["observation"] for op in after[: len(before)]] == [op["observation"] for op in before]
    assert leftover_containers(client, f"{PREFIX}__", anyones=True) == []


def test_local_environment_retry_on_another_node_resumes_from_the_worktree_snapshot(
    tmp_path: Path, postgres_url: str
) -> None:
    """`--environment local` on two nodes: the node running an instance dies while its second command runs, half
    done. The retry on the other node starts from a fresh checkout of its own, puts back the worktree snapshot of the
    last completed step (`one`) and runs the interrupted command again on it: each line once in the patch."""
    data, rows = build_dataset(tmp_path / "data", 2)
    sync = tmp_path / "sync"
    sync.mkdir()
    here = '$(basename "$(dirname "$PWD")")'  # the instance id: the checkout is <run folder>/repo
    half_way = (
        f"echo two-a >> steps.txt; touch {sync}/waiting-{here}; while [ ! -f {sync}/go-{here} ]; do sleep 0.05; done;"
        " echo two-b >> steps.txt"
    )
    model = write_script(tmp_path / "steps.yaml", ["echo one >> steps.txt", half_way, FIX_COMMAND])
    config = write_config(tmp_path / "c.yaml")
    config.write_text(yaml.safe_dump({**yaml.safe_load(config.read_text()), "environment": {
        "tools": [], "writable": [str(sync)],
    }}))  # fmt: skip
    output = tmp_path / "out"
    with two_nodes(tmp_path) as (cluster, scratch):
        args = batch_args(data, model, output, config, cluster.address, postgres_url)
        args[args.index("--task-cpus") + 1] = "1"  # one instance per node
        batch = start([*args, "--environment", "local"], cluster)
        try:
            wait_for(lambda: len(list(sync.glob("waiting-*"))) == 2, timeout=300)
            [(killed, _)] = running_on(scratch["node2"])
            cluster.nodes[1].kill()  # the whole node: its worker, mid-command, too
            for row in rows:
                (sync / f"go-{row['instance_id']}").touch()
            stdout, stderr = batch.communicate(timeout=600)
        finally:
            if batch.poll() is None:
                batch.kill()
    assert batch.returncode == 0, stderr[-3000:]
    assert "swebench: 2/2 done, cost $0.0000, submitted: 2" in stdout
    preds = json.loads((output / "preds.json").read_text())
    for row in rows:
        added = [line for line in preds[row["instance_id"]]["model_patch"].splitlines() if line.startswith("+")]
        assert [line for line in added if line in ("+one", "+two-a", "+two-b")] == ["+one", "+two-a", "+two-b"]
    resumed = json.loads((output / killed / f"{killed}.traj.json").read_text())["operations"]
    assert [op["action_type"] for op in resumed] == ["bash", "bash", "bash", "submit"]
    assert resumed[1]["observation"].startswith("[The run was stopped while this command ran. The repository's")
    log = (output / killed / f"{killed}.log").read_text()
    assert f"run {killed} resumed" in log and "the worktree put back as the last completed step left it" in log


def ray_processes(temp: Path) -> dict[int, tuple[str, int]]:
    """pid → (name, start time) of the processes with a file open under `temp` (every Ray process has its logs open in
    its session folder there; its title hides its command line and part of its environment)."""
    from llm_ide.environments.processes import start_time

    found = {}
    for entry in Path("/proc").iterdir():
        try:
            links = [os.readlink(fd) for fd in (entry / "fd").iterdir()] if entry.name.isdigit() else []
            if any(link.startswith(f"{temp}/") for link in links):
                found[int(entry.name)] = ((entry / "comm").read_text().strip(), start_time(int(entry.name)))
        except OSError:
            continue
    return found


def left_under(temp: Path) -> list[Path]:
    """What is under `temp` but Ray's empty root; a folder removed as it is walked is not gone yet."""
    try:
        return [path for path in temp.rglob("*") if path != temp / "ray"]
    except FileNotFoundError as error:
        return [Path(str(error.filename))]


def still_running(pid: int, start: int) -> bool:
    from llm_ide.environments.processes import start_time

    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return start_time(pid) == start and state not in ("Z", "X")


def test_a_killed_driver_leaves_nothing_of_its_own_ray_cluster(tmp_path: Path, postgres_url: str) -> None:
    """`swebench --engine ray` without --address, SIGKILLed while its instance runs: Ray's raylet and GCS die with it
    by themselves, but its agents lingered (a minute, 100 MB each), and its session folder, the nodes' scratch folder
    (Postgres checkpoints: the run is there) and the run's temp folders stayed for good. Its reaper takes them all."""
    from ray_cluster import require_ray

    require_ray()
    temp = Path(tempfile.mkdtemp(prefix="rk", dir="/tmp"))  # short: Ray's socket paths must stay under 108 bytes
    try:
        command = [sys.executable, "-c", CLI, *gated_batch(tmp_path), "--engine", "ray", "--checkpoint", postgres_url]
        env = {**os.environ, "TMPDIR": str(temp)}
        batch = subprocess.Popen(command, text=True, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
        try:
            wait_for((tmp_path / "started").exists, timeout=300, what="the instance's first command")
            cluster = ray_processes(temp)
            scratch = [path for path in temp.glob("llm-ide-ray*/*/*") if path.name.startswith("demo__")]
            assert [path.name for path in scratch] == ["demo__calc-1"]  # the run's folder on the node
            assert list(temp.glob("llm-ide-tmp-*")) and list(temp.glob("ray/session_*"))
        finally:
            batch.kill()
            batch.communicate()
        names = {name for name, _ in cluster.values()}
        assert {"raylet", "gcs_server", "ray::DashboardA", "ray::RuntimeEnv", "ray::run_instan"} <= names, names
        wait_for(lambda: left_under(temp) == [], what="the folders' removal")
        assert [(pid, name) for pid, (name, start) in cluster.items() if still_running(pid, start)] == []
    finally:
        shutil.rmtree(temp, ignore_errors=True)
