"""A throwaway Ray cluster on this machine for tests and benchmarks: a head node and worker nodes, each its own
`ray start --block` process group with its own temp dir, small (no dashboard, a small object store). Stopping kills
the process groups we started and any process of ours left in those temp dirs, never other Ray processes.

    with ray_cluster(tmp_path, [{"docker_slot": 1}, {"docker_slot": 1}]) as cluster:
        cluster.address          # HOST:PORT for ray.init / --address
        cluster.nodes[1].raylet_pid()
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from conftest import unavailable
from pg_server import free_port

RAY = str(Path(sys.executable).parent / "ray")
OBJECT_STORE = 80 * 1024 * 1024
MARKER = "LLM_IDE_TEST_RAY_NODE"  # in the environment of every process of a node we started
# a dead raylet is noticed within about 1.5 s instead of the default 15 s+
FAST_HEALTH = {"RAY_health_check_period_ms": "500", "RAY_health_check_failure_threshold": "3"}


def require_ray() -> None:
    try:
        import ray  # noqa: F401
    except ImportError:
        unavailable("ray is not installed (pip install 'llm-ide[ray]')")


@dataclass
class Node:
    name: str
    temp_dir: Path
    process: subprocess.Popen
    env: dict[str, str] = field(default_factory=dict)
    log: Path | None = None  # what its `ray start` printed

    def pids(self) -> list[int]:
        """Our processes of this node: its process group and every process that inherited its marker variable."""
        marker = f"{MARKER}={self.temp_dir}".encode()
        found = set()
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            with suppress(OSError):
                environ = (entry / "environ").read_bytes().split(b"\0")
                if os.getpgid(int(entry.name)) == self.process.pid or marker in environ:
                    found.add(int(entry.name))
        return sorted(found)

    def raylet_pid(self) -> int | None:
        for pid in self.pids():
            with suppress(OSError):
                if Path(f"/proc/{pid}/comm").read_text().strip() == "raylet":
                    return pid
        return None

    def kill(self) -> None:
        with suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGKILL)
        for pid in self.pids():
            with suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        with suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=30)


@dataclass
class Cluster:
    address: str
    nodes: list[Node]
    env: dict[str, str]  # what a driver needs in its environment (the cluster's auth token)


def node_ip() -> str:
    """The address Ray picks for this machine's nodes (as `ray start` prints it)."""
    from ray._private.services import get_node_ip_address

    return get_node_ip_address()


def start_node(
    name: str,
    root: Path,
    resources: dict[str, float],
    head: str | None,
    env: dict[str, str],
    cpus: float,
    port: int,
    auth: dict[str, str],
    ray: str = RAY,
) -> Node:
    """`ray start --block` of one node (the head, on `port`, when `head` is None)."""
    temp_dir = Path("/tmp") / f"rt{os.getpid()}{name}"  # short: Ray's socket paths must stay under 108 bytes
    shutil.rmtree(temp_dir, ignore_errors=True)
    args = [
        ray, "start", "--block", "--disable-usage-stats", f"--num-cpus={cpus:g}",
        f"--resources={json.dumps(resources)}",
        f"--object-store-memory={OBJECT_STORE}", f"--temp-dir={temp_dir}",
        f"--node-manager-port={free_port()}", f"--object-manager-port={free_port()}",
    ]  # fmt: skip
    if head is None:
        args += ["--head", f"--port={port}", "--include-dashboard=false", f"--ray-client-server-port={free_port()}"]
    else:
        args += [f"--address={head}"]
    path = root / f"{name}.log"
    log = path.open("wb")
    full_env = {**os.environ, **FAST_HEALTH, "RAY_USAGE_STATS_ENABLED": "0", **auth, **env, MARKER: str(temp_dir)}
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT, env=full_env, start_new_session=True)
    return Node(name, temp_dir, process, env, path)


def wait_nodes(address: str, nodes: list[Node], auth: dict[str, str], timeout: float = 300) -> None:
    """Until the cluster has the nodes alive (asked through `ray status`-like listing from a subprocess). A probe
    that hangs (a driver can wait minutes on a head still starting on a loaded machine) is given up and asked again;
    a node whose `ray start --block` ended will not come: said at once, with the end of each node's log."""
    count = len(nodes)
    probe = (
        "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', include_dashboard=False); "
        "print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    deadline = time.monotonic() + timeout
    while True:
        command = [sys.executable, "-c", probe, address]
        try:
            result = subprocess.run(command, capture_output=True, text=True, timeout=60, env={**os.environ, **auth})
            alive, said = int(result.stdout.strip() or 0) if result.returncode == 0 else 0, result.stderr
        except subprocess.TimeoutExpired as hung:
            alive, said = 0, f"a probe hung for {hung.timeout:g} s"
        if alive >= count:
            return
        ended = [node.name for node in nodes if node.process.poll() is not None]
        if ended or time.monotonic() >= deadline:
            logs = "".join(f"\n{node.name}: {node.log.read_text()[-800:] if node.log else ''}" for node in nodes)
            raise AssertionError(f"the Ray cluster did not reach {count} nodes (ended: {ended}): {said[-500:]}{logs}")
        time.sleep(0.5)


@contextmanager
def ray_cluster(
    root: Path,
    resources: list[dict[str, float]],
    *,
    env: list[dict[str, str]] | None = None,
    cpus: float = 1,
    ray: str = RAY,
) -> Iterator[Cluster]:
    require_ray()
    root.mkdir(parents=True, exist_ok=True)
    env = env or [{} for _ in resources]
    nodes: list[Node] = []
    try:
        token = os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(32)  # a driver in this process has it already
        port, auth = free_port(), {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
        nodes.append(start_node("head", root, resources[0], None, env[0], cpus, port, auth, ray))
        address = f"{node_ip()}:{port}"
        for number, (extra, node_env) in enumerate(zip(resources[1:], env[1:], strict=True), start=2):
            nodes.append(start_node(f"node{number}", root, extra, address, node_env, cpus, port, auth, ray))
        wait_nodes(address, nodes, auth)
        yield Cluster(address, nodes, auth)
    finally:
        for node in reversed(nodes):
            node.kill()
            shutil.rmtree(node.temp_dir, ignore_errors=True)
