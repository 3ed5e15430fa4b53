"""Profiling helpers of bench_session.py: a cProfile per thread and the per-step table of the agent's parts."""

from __future__ import annotations

import cProfile
import pstats
import threading
from pathlib import Path
from typing import Any

from rich.table import Table


class ThreadProfiler:
    """cProfile in the calling thread and in every thread started while it is on (LangGraph runs nodes in a pool)."""

    def __init__(self) -> None:
        self.profiles: list[cProfile.Profile] = []
        self._lock = threading.Lock()

    def _start_in_thread(self, *_: object) -> None:
        profile = cProfile.Profile()
        with self._lock:
            self.profiles.append(profile)
        profile.enable()

    def __enter__(self) -> ThreadProfiler:
        main = cProfile.Profile()
        self.profiles.append(main)
        threading.setprofile(self._start_in_thread)
        main.enable()
        return self

    def __exit__(self, *_: object) -> None:
        threading.setprofile(None)
        self.profiles[0].disable()

    def stats(self) -> pstats.Stats:
        return pstats.Stats(*[profile for profile in self.profiles if profile.getstats()])


BREAKDOWN = [
    ("trajectory write (Recorder.write)", "llm_ide/run/trajectory.py", "write"),
    ("checkpoint put (whole state, per superstep)", "langgraph/checkpoint/sqlite/__init__.py", "put"),
    ("checkpoint put_writes", "langgraph/checkpoint/sqlite/__init__.py", "put_writes"),
    ("  of which msgpack serialisation", "langgraph/checkpoint/serde/jsonplus.py", "dumps_typed"),
    ("checkpoint prune", "llm_ide/run/checkpoint.py", "prune"),
    ("node render_context", "llm_ide/nodes/render_context.py", "render_context"),
    ("node reflect", "llm_ide/nodes/reflect.py", "reflect"),
    ("node branch", "llm_ide/nodes/branch.py", "branch"),
    ("node act", "llm_ide/nodes/act.py", "act"),
    ("node execute_tool (incl. commands)", "llm_ide/nodes/execute_tool.py", "execute_tool"),
    ("node update_activity", "llm_ide/nodes/update_activity.py", "update_activity"),
]


def profile_tables(stats: pstats.Stats, steps: int, limit: int = 15) -> list[Table]:
    entries: dict[tuple[str, int, str], tuple[Any, ...]] = stats.stats  # type: ignore[attr-defined]
    breakdown = Table(title=f"cProfile (all threads) of a {steps}-step session: per-step cost of the agent's parts")
    for column in ("part", "calls", "ms per step (profiled)"):
        breakdown.add_column(column, justify="left" if column == "part" else "right")
    for label, suffix, function in BREAKDOWN:
        found = [v for (f, _, name), v in entries.items() if name == function and f.endswith(suffix)]
        if found:
            calls, cumulative = sum(v[1] for v in found), sum(v[3] for v in found)
            breakdown.add_row(label, str(calls), f"{cumulative / steps * 1000:.1f}")
    top = Table(title="top own-time functions (waits on locks and queues are other threads' work)")
    for column in ("function", "calls", "own s", "cumulative s"):
        top.add_column(column, justify="left" if column == "function" else "right")
    rows = sorted(entries.items(), key=lambda item: item[1][2], reverse=True)
    for (filename, line, function), (_, calls, own, cumulative, _) in rows[:limit]:
        where = "/".join(Path(filename).parts[-2:])
        top.add_row(f"{function} ({where}:{line})", str(calls), f"{own:.2f}", f"{cumulative:.2f}")
    return [breakdown, top]
