"""Kills survived, and made at will. At most once: an operation that changes the workspace is recorded (and synced to
disk) before it runs, so that a resumed run which meets it again knows a killed process had started it, and does not
run it a second time (`IntentLog`). Failpoints, for the fault tests and scripts/fault_suite.py: with
`LLM_IDE_FAILPOINTS="name=N,…"` in the environment the process SIGKILLs itself the N-th time it reaches the failpoint
`name` (a kill at an exact moment, such as between a step's saved writes and its checkpoint row). Without the variable
a failpoint costs one lookup."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

CHANGES_WORKSPACE = frozenset({"bash", "edit", "create"})


class IntentLog:
    """`<run id>.intents.jsonl`: one line per started operation (node id and action type), appended and fsynced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._started: set[int] = set()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            lines = []
        for line in lines:
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill: its operation never started
            if isinstance(entry, dict) and isinstance(entry.get("node"), int):
                self._started.add(entry["node"])

    def started_before(self, node_id: int) -> bool:
        return node_id in self._started

    def begin(self, node_id: int, action_type: str) -> None:
        line = json.dumps({"node": node_id, "action": action_type}) + "\n"
        with self._lock:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, line.encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
            self._started.add(node_id)


_hits: Counter[str] = Counter()
_lock = threading.Lock()


def armed() -> dict[str, int]:
    spec = os.environ.get("LLM_IDE_FAILPOINTS", "")
    points = {}
    for item in filter(None, (part.strip() for part in spec.split(","))):
        name, _, count = item.partition("=")
        points[name] = int(count or 1)
    return points


def failpoint(name: str) -> None:
    if "LLM_IDE_FAILPOINTS" not in os.environ:
        return
    target = armed().get(name)
    if target is None:
        return
    with _lock:
        _hits[name] += 1
        if _hits[name] == target:
            os.kill(os.getpid(), signal.SIGKILL)


STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


@contextmanager
def interrupts_held() -> Iterator[None]:
    """Ctrl-C, SIGTERM and SIGHUP that come in the block are delivered as it ends (what it does is not cut half-way: a
    reply's record and its charge); outside the main thread, which they never interrupt, none are held."""
    came: list[int] = []
    main = threading.current_thread() is threading.main_thread()
    held = {signum: signal.signal(signum, lambda signum, _: came.append(signum)) for signum in STOPPING} if main else {}
    try:
        yield
    finally:
        for signum, handler in held.items():
            signal.signal(signum, signal.SIG_DFL if handler is None else handler)  # (None: not set from Python)
        if came:
            signal.raise_signal(came[0])
