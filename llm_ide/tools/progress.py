"""Tool installation on the console: a spinner with the tool and its current step, then one line per tool."""

from __future__ import annotations

from rich.console import Console
from rich.markup import escape
from rich.status import Status

from llm_ide.tools.installer import ToolEvent


def activity(event: ToolEvent) -> str:
    """What is going on, for a spinner or a batch's phase column: `installing tool navigator: pip`."""
    return f"installing tool {event.tool}" + (f": {event.detail}" if event.kind == "step" else "")


def outcome_line(event: ToolEvent) -> str:
    """The line that stays: installed (how, how long) or failed (which step, its last output line). Rich markup."""
    if event.kind == "installed":
        return f"[green]✓[/] tool {escape(event.tool)} installed ({escape(event.detail)}, {event.seconds:.1f} s)"
    return (
        f"[bold red]✗ tool {escape(event.tool)} failed to install:[/] [red]{escape(event.detail)}[/]"
        " [dim](the run goes on without it; the full output is in the run's log)[/]"
    )


BUILDING = (
    "… building the tools (a first run, or a new version of them): usually under a minute, a few minutes on a slow "
    "connection; later runs take them from the tool cache (`llm-ide tools cache`)"
)


class ToolProgress:
    """Feed it ToolEvents: while a tool installs a transient spinner shows it (on a terminal), then its outcome line
    is printed. The first build (a tool not in the cache) says once what is going on and how long it takes."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.status: Status | None = None
        self.said_building = False

    def __call__(self, event: ToolEvent) -> None:
        if event.kind == "step" and not self.said_building:  # a build step: the tool was not in the cache
            self.said_building = True
            self.stop()
            self.console.print(BUILDING, style="dim", markup=False)
        if event.kind in ("installing", "step"):
            if self.status is None:
                self.status = self.console.status(activity(event))
                self.status.start()
            else:
                self.status.update(activity(event))
            return
        self.stop()
        self.console.print(outcome_line(event))

    def stop(self) -> None:
        if self.status is not None:
            self.status.stop()
            self.status = None
