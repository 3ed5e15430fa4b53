"""Live progress of a SWE-bench batch: a rich display on a terminal, plain log lines otherwise."""

from __future__ import annotations

import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from llm_ide.priced import cost_text
from llm_ide.terminal import terminal_safe
from llm_ide.tools.progress import activity, outcome_line


@dataclass
class Running:
    instance_id: str
    started: float
    phase: str = "queued"
    step: int = 0
    cost: float = 0.0
    action: str = ""
    node: str = ""  # the Ray node running it (--engine ray)


def one_line(text: str, limit: int = 300) -> str:
    """A failure's reason on one line: white space folded, escape codes out, cut at `limit` characters."""
    text = " ".join(terminal_safe(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def format_duration(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass
class BatchProgress:
    """Batch state fed from worker threads; renders itself (rich) or prints plain lines when not on a terminal."""

    total: int
    console: Console = field(default_factory=Console)
    title: str = "SWE-bench"
    live: bool | None = None  # None: live display iff the console is a terminal
    priced: bool = True  # False: the model has no price, its cost is shown as `unpriced`, never as $0
    apart: bool | None = None  # whether the runs' variants' own calls (a navigator's) have a price (None: priced)
    done: int = 0
    cost: float = 0.0
    statuses: Counter[str] = field(default_factory=Counter)
    running: dict[str, Running] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _live: Live | None = field(default=None, repr=False)
    _run_costs: dict[str, float] = field(default_factory=dict, repr=False)

    def __enter__(self) -> BatchProgress:
        self.started = time.monotonic()
        use_live = self.console.is_terminal if self.live is None else self.live
        if use_live:
            self._live = Live(console=self.console, get_renderable=self.render, refresh_per_second=4, transient=False)
            self._live.__enter__()
        else:
            self._plain(f"{self.title}: {self.total} instance{'s' * (self.total != 1)}")
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
            self._live = None
        line = f"{self.title}: {self.done}/{self.total} done, cost {self.money(self.cost)}, {self.status_text()}"
        self.console.print(line, markup=False, highlight=False)

    def start(self, instance_id: str, node: str = "") -> None:
        with self._lock:
            self.running[instance_id] = Running(instance_id, time.monotonic(), phase="starting", node=node)
        self._plain(f"[{self.done}/{self.total}] {instance_id}: started{f' on node {node}' * bool(node)}")

    def event(
        self, instance_id: str, kind: str, *, phase: str = "", step: int = 0, action: str = "", cost: float = 0.0
    ) -> None:
        with self._lock:
            run = self.running.get(instance_id)
            if run is None:
                return
            if kind == "phase" and phase:
                run.phase = phase
            elif kind == "step":
                run.phase, run.step, run.action = f"step {step}", step, terminal_safe(action)
            self._add_cost(instance_id, cost)
            run.cost = cost

    def tool(self, instance_id: str, event: Any) -> None:
        """A ToolEvent: installing shows as the instance's phase; a tool that failed to install gets its own line."""

        if event.kind in ("installing", "step"):
            self.event(instance_id, "phase", phase=activity(event))
        elif event.kind == "failed":
            self.console.print(f"{instance_id}: {outcome_line(event)}", highlight=False, soft_wrap=True)

    def finish(self, instance_id: str, exit_status: str, cost: float = 0.0, steps: int = 0, error: str = "") -> None:
        """An instance ended: one line, with the reason when it failed (`error`)."""
        with self._lock:
            self.running.pop(instance_id, None)
            self._add_cost(instance_id, cost)
            self.done += exit_status != "interrupted"  # stopped, not done: the batch's next run resumes it
            self.statuses[exit_status] += 1
            reason = f": {one_line(error)}" if error else ""
            ended = f"{instance_id}: {exit_status} ({steps} step{'s' * (steps != 1)}, {self.money(cost)}){reason}"
            totals = f"total {self.money(self.cost)} | ETA {format_duration(self.eta())} | {self.status_text()}"
            line = f"[{self.done}/{self.total}] {ended} | {totals}"
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)  # above the live display, if any

    def money(self, cost: float) -> str:
        return cost_text(cost, self.priced, self.apart)

    def _add_cost(self, instance_id: str, cost: float) -> None:
        """`cost` is cumulative per run; only its increase is added to the batch total."""
        previous = self._run_costs.get(instance_id, 0.0)
        if cost > previous:
            self.cost += cost - previous
            self._run_costs[instance_id] = cost

    def eta(self) -> float | None:
        if self.done == 0:
            return None
        elapsed = time.monotonic() - self.started
        return elapsed / self.done * (self.total - self.done)

    def status_text(self) -> str:
        return ", ".join(f"{status}: {count}" for status, count in sorted(self.statuses.items())) or "no exits yet"

    def _plain(self, line: str) -> None:
        if self._live is None:
            self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def render(self) -> RenderableType:
        with self._lock:
            elapsed = time.monotonic() - self.started
            header = Table.grid(padding=(0, 1))
            header.add_row(
                Text(self.title, style="bold"),
                ProgressBar(total=max(self.total, 1), completed=self.done, width=40),
                Text(f"{self.done}/{self.total}"),
                Text(self.money(self.cost), style="green"),
                Text(f"elapsed {format_duration(elapsed)}"),
                Text(f"ETA {format_duration(self.eta())}", style="cyan"),
            )
            statuses = Text(self.status_text(), style="dim" if not self.statuses else "")
            rows = Table(box=None, show_header=bool(self.running), padding=(0, 2))
            nodes = any(run.node for run in self.running.values())
            whole = {  # never squeezed for a long phase or action: they take what is left
                "instance": max((len(run.instance_id) for run in self.running.values()), default=8),
                "node": max((len(run.node) for run in self.running.values()), default=4),
                "cost": max((len(self.money(run.cost)) for run in self.running.values()), default=4),
                "time": 7,
            }
            for column in ("instance", *("node",) * nodes, "phase", "cost", "time", "last action"):
                rows.add_column(
                    column,
                    overflow="ellipsis",
                    no_wrap=True,
                    min_width=whole.get(column),
                    max_width={"phase": 40, "last action": 60}.get(column),
                )
            for run in sorted(self.running.values(), key=lambda r: r.started):
                rows.add_row(
                    run.instance_id,
                    *(run.node,) * nodes,
                    run.phase,
                    self.money(run.cost),
                    format_duration(time.monotonic() - run.started),
                    run.action.splitlines()[0] if run.action else "",
                )
            return Group(header, statuses, rows)
