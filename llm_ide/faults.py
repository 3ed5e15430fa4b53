"""Failpoints for the fault tests and scripts/fault_suite.py: with `LLM_IDE_FAILPOINTS="name=N,…"` in the
environment the process SIGKILLs itself the N-th time it reaches the failpoint `name` (a kill at an exact moment,
such as between a step's saved writes and its checkpoint row). Without the variable a failpoint costs one lookup."""

from __future__ import annotations

import os
import signal
import threading
from collections import Counter

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
