"""The tests' own Ray cluster (tests/ray_cluster.py) on a loaded machine: a port picked for a node and bound by another
process before the node binds it (the free port raced) starts the whole cluster again on fresh ports."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from pg_server import free_port
from ray_cluster import TAKEN, ray_cluster

pytestmark = pytest.mark.slow

NODES = "import ray, sys; ray.init(address=sys.argv[1]); print(sorted(n['Alive'] for n in ray.nodes()))"


def test_a_port_bound_by_another_process_first_starts_the_cluster_again_on_fresh_ports(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The first port drawn (the head's, which the second node is sent to) is listened on by someone else: the head's
    GCS aborts, said in its log; the cluster is started again, both nodes on ports of their own, and nothing of the
    first start is left running. (It failed after the head's `ray start` gave up, 40 s later.)"""
    with socket.create_server(("0.0.0.0", 0)) as other:
        taken = other.getsockname()[1]
        drawn = iter([taken])
        with ray_cluster(tmp_path / "ray", [{}, {}], ports=lambda: next(drawn, None) or free_port()) as cluster:
            assert not cluster.address.endswith(f":{taken}")
            assert cluster.restarts == [f"head: a port it was given was bound by another process first ({TAKEN})"]
            command = [sys.executable, "-c", NODES, cluster.address]
            env = {**os.environ, **cluster.env}
            listed = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
            nodes = list(cluster.nodes)
            assert listed.stdout.strip() == "[True, True]", listed.stderr
    assert [node.pids() for node in nodes] == [[], []]
    assert "ray_cluster: start 1/3 given up: head: a port it was given" in capsys.readouterr().err


def test_a_port_drawn_twice_is_given_once_and_the_cluster_starts(tmp_path: Path) -> None:
    """The same free port drawn twice in a row (as the kernel may hand out a port just let go): the head's GCS and its
    node manager would share it, which Ray refuses (the head ends). Each number is given once, and no restart."""
    port = free_port()
    drawn = iter([port, port, port])
    with ray_cluster(tmp_path / "ray", [{}, {}], ports=lambda: next(drawn, None) or free_port()) as cluster:
        assert (cluster.address.endswith(f":{port}"), cluster.restarts) == (True, [])
        command = [sys.executable, "-c", NODES, cluster.address]
        listed = subprocess.run(command, capture_output=True, text=True, env={**os.environ, **cluster.env}, timeout=120)
        assert listed.stdout.strip() == "[True, True]", listed.stderr
