"""A throwaway Ray cluster on this machine for tests and benchmarks: a head node and worker nodes, each its own
`ray start --block` process group with its own temp dir, small (no dashboard, a small object store). Stopping kills
the process groups we started and any process of ours left in those temp dirs, never other Ray processes. A port
picked for a node (free when picked) that another process binds before the node does makes a Ray server of the node
abort with "Address already in use" in its log: the whole cluster is then started again on fresh ports, up to
ATTEMPTS times.

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
from collections.abc import Callable, Iterator
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
TAKEN = "Address already in use"  # what Ray's gRPC servers (C++ and Python) log when their port is bound already
ATTEMPTS = 3
PROBE_HUNG = 60.0  # seconds


class PortTaken(Exception):
    """A node could not bind a port it was given: another process bound it between its pick and the node's start."""


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

    def port_taken(self) -> bool:
        """Whether `ray start` or a Ray process of the node said a port it was to bind was bound already."""
        logs = [*self.temp_dir.glob("session_latest/logs/*.err"), *([self.log] if self.log else [])]
        return any(TAKEN in path.read_text(errors="replace") for path in logs if path.is_file())


@dataclass
class Cluster:
    address: str
    nodes: list[Node]
    env: dict[str, str]  # what a driver needs in its environment (the cluster's auth token)
    restarts: list[str] = field(default_factory=list)  # why each earlier start was given up (a port taken)


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
    ports: Callable[[], int] = free_port,
) -> Node:
    """`ray start --block` of one node (the head, on `port`, when `head` is None)."""
    temp_dir = Path("/tmp") / f"rt{os.getpid()}{name}"  # short: Ray's socket paths must stay under 108 bytes
    shutil.rmtree(temp_dir, ignore_errors=True)
    args = [
        ray, "start", "--block", "--disable-usage-stats", f"--num-cpus={cpus:g}",
        f"--resources={json.dumps(resources)}",
        f"--object-store-memory={OBJECT_STORE}", f"--temp-dir={temp_dir}",
        f"--node-manager-port={ports()}", f"--object-manager-port={ports()}",
    ]  # fmt: skip
    if head is None:
        args += ["--head", f"--port={port}", "--include-dashboard=false", f"--ray-client-server-port={ports()}"]
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
    a node whose `ray start --block` ended will not come: said at once, with the end of each node's log; a node that
    lost a port it was given raises PortTaken as soon as its log says so."""
    count = len(nodes)
    deadline = time.monotonic() + timeout
    while True:
        alive, said = probe(address, nodes, auth)
        if alive >= count:
            return
        raise_if_taken(nodes)
        ended = [node.name for node in nodes if node.process.poll() is not None]
        if ended or time.monotonic() >= deadline:
            logs = "".join(f"\n{node.name}: {node.log.read_text()[-800:] if node.log else ''}" for node in nodes)
            raise AssertionError(f"the Ray cluster did not reach {count} nodes (ended: {ended}): {said[-500:]}{logs}")
        time.sleep(0.5)


def probe(address: str, nodes: list[Node], auth: dict[str, str]) -> tuple[int, str]:
    """The count of the cluster's nodes alive and what the probe said; while it runs, the nodes' logs are read for a
    port taken (a probe of a head whose server aborted would wait a minute)."""
    code = (
        "import ray, sys; ray.init(address=sys.argv[1], logging_level='ERROR', include_dashboard=False); "
        "print(sum(1 for n in ray.nodes() if n['Alive']))"
    )
    command = [sys.executable, "-c", code, address]
    process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **auth}
    )
    hung = time.monotonic() + PROBE_HUNG
    try:
        while time.monotonic() < hung:
            try:
                out, err = process.communicate(timeout=0.5)
            except subprocess.TimeoutExpired:
                raise_if_taken(nodes)
                continue
            return int(out.strip() or 0) if process.returncode == 0 else 0, err
        return 0, f"a probe hung for {PROBE_HUNG:g} s"
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()


def raise_if_taken(nodes: list[Node]) -> None:
    if taken := [node.name for node in nodes if node.port_taken()]:
        raise PortTaken(f"{', '.join(taken)}: a port it was given was bound by another process first ({TAKEN})")


def start_cluster(
    root: Path, resources: list[dict[str, float]], env: list[dict[str, str]], cpus: float, ray: str,
    auth: dict[str, str], ports: Callable[[], int], nodes: list[Node],
) -> str:  # fmt: skip
    """The head and the other nodes started (appended to `nodes` as they start) and waited for: the head's address."""
    port = ports()
    nodes.append(start_node("head", root, resources[0], None, env[0], cpus, port, auth, ray, ports))
    address = f"{node_ip()}:{port}"
    for number, (extra, node_env) in enumerate(zip(resources[1:], env[1:], strict=True), start=2):
        nodes.append(start_node(f"node{number}", root, extra, address, node_env, cpus, port, auth, ray, ports))
    wait_nodes(address, nodes, auth)
    return address


def distinct(ports: Callable[[], int]) -> Callable[[], int]:
    """`ports`, never one number twice: a port picked free and let go can be picked again at once, and Ray refuses to
    start a node two of whose servers were given the same port (CI: the head's GCS and its node manager)."""
    given: set[int] = set()

    def pick() -> int:
        while (port := ports()) in given:
            pass
        given.add(port)
        return port

    return pick


def stop_nodes(nodes: list[Node]) -> None:
    for node in reversed(nodes):
        node.kill()
        shutil.rmtree(node.temp_dir, ignore_errors=True)
    nodes.clear()


@contextmanager
def ray_cluster(
    root: Path,
    resources: list[dict[str, float]],
    *,
    env: list[dict[str, str]] | None = None,
    cpus: float = 1,
    ray: str = RAY,
    ports: Callable[[], int] = free_port,
) -> Iterator[Cluster]:
    """The cluster, started again on fresh ports (from `ports`) while a node lost one of its ports, ATTEMPTS times."""
    require_ray()
    ports = distinct(ports)
    root.mkdir(parents=True, exist_ok=True)
    env = env or [{} for _ in resources]
    token = os.environ.get("RAY_AUTH_TOKEN") or secrets.token_hex(32)  # a driver in this process has it already
    auth = {"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": token}
    nodes: list[Node] = []
    restarts: list[str] = []
    try:
        while True:
            try:
                address = start_cluster(root, resources, env, cpus, ray, auth, ports, nodes)
                break
            except PortTaken as taken:
                stop_nodes(nodes)
                restarts.append(str(taken))
                print(f"ray_cluster: start {len(restarts)}/{ATTEMPTS} given up: {taken}", file=sys.stderr)
                if len(restarts) == ATTEMPTS:
                    raise AssertionError(f"the Ray cluster lost a port {ATTEMPTS} times: {restarts}") from None
        yield Cluster(address, nodes, auth, restarts)
    finally:
        stop_nodes(nodes)
