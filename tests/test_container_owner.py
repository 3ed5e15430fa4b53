"""Whose container is whose: a container's labels say which process made it (host, PID, and its owner label: PID
namespace, PID, start time), and a sweep removes only those whose maker is gone, a reused PID told apart, another PID
namespace's or another host's never judged from here."""

from __future__ import annotations

import os
import socket

import pytest

from llm_ide.environments.docker import owner_alive, owner_labels
from llm_ide.environments.processes import start_time
from llm_ide.environments.scratch import pid_namespace

DEAD = 2**22 + 7  # a PID no process has


def labels(pid: int | None = None, owner: str | None = None, host: str | None = None) -> dict[str, str]:
    found = owner_labels("r")
    found |= {"llm-ide.pid": str(pid)} if pid else {}
    found |= {"llm-ide.owner": owner} if owner else {}
    found |= {"llm-ide.host": host} if host else {}
    return found


def own(namespace: int = 0, pid: int = 0, start: int | None = None) -> str:
    pid = pid or os.getpid()
    return f"{namespace or pid_namespace()}.{pid}.{start_time(os.getpid()) if start is None else start}"


@pytest.mark.parametrize(
    ("made", "alive"),
    [
        (lambda: owner_labels("r"), True),  # this process's
        (lambda: labels(owner=own(start=start_time(os.getpid()) + 1)), False),  # its PID, another start: reused
        (lambda: labels(owner=own(pid=DEAD, start=1)), False),  # a process gone
        (lambda: labels(owner=own(namespace=pid_namespace() + 1, pid=DEAD, start=1)), True),  # another namespace's
        (lambda: labels(owner=own(pid=DEAD, start=1), host="another-host"), True),  # another host's
        (lambda: {k: v for k, v in labels(pid=DEAD).items() if k != "llm-ide.owner"}, False),  # before the label: PID
        (lambda: {k: v for k, v in labels().items() if k != "llm-ide.owner"}, True),
        (lambda: labels(owner="not-a-tag"), True),  # nothing to judge by
    ],
)
def test_a_containers_maker_is_judged_by_its_owner_label(made, alive: bool) -> None:
    assert owner_alive(made()) is alive


def test_the_labels_name_this_process() -> None:
    found = owner_labels("run-1")
    assert found["llm-ide.run-id"] == "run-1" and found["llm-ide.host"] == socket.gethostname()
    assert found["llm-ide.pid"] == str(os.getpid()) and found["llm-ide.owner"] == own()
