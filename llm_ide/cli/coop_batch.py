"""What `coop run` and `coop evaluate` show for several pairs: a rich progress while they run, one row per pair, and
the summary (pass rate, conflict rate, and both per setting)."""

from __future__ import annotations

import time
from contextlib import contextmanager
from typing import Any

from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, SpinnerColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from llm_ide.cli.console import console
from llm_ide.terminal import terminal_safe

PHASES = ("planning", "execution", "evaluation")


def rate(part: int, whole: int) -> str:
    return f"{part}/{whole} ({part / whole:.0%})" if whole else "—"


def verdict(outcome: dict[str, Any] | None) -> str:
    return "—" if outcome is None else f"{'pass' if outcome['passed'] else 'FAIL'} {outcome.get('tests_passed', '')}"


def pairs_table(results: list[dict[str, Any]]) -> Table:
    table = Table("pair", "setting", "merge", "feature 1", "feature 2", "both", *(f"{p[:4]} s" for p in PHASES))
    for result in results:
        pair = ",".join(map(str, result.get("pair", [])))
        if result.get("error"):
            table.add_row(pair, str(result.get("setting")), "[red]error[/]", escape(result["error"]), "", "no")
            continue
        seconds = result.get("seconds", {})
        merge = (result.get("merge") or {}).get("status", "—")
        both = "—" if "both_passed" not in result else ("yes" if result["both_passed"] else "no")
        features = (verdict(result.get("feature1")), verdict(result.get("feature2")))
        phases = (f"{seconds[p]:.1f}" if p in seconds else "—" for p in PHASES)
        table.add_row(pair, str(result.get("setting")), merge, *features, both, *phases)
    return table


def summary_table(summary: Any) -> Table:
    columns = ("setting", "pairs", "pass rate (both features; single: one)", "conflict rate (naive merge)", "errors")
    table = Table(*columns, title="summary")
    rows = list(summary.by_setting.items())
    if len(rows) > 1:
        rows.append(("all", summary.total))
    for name, rates in rows:
        passed, conflicts = rate(rates.passed, rates.graded), rate(rates.conflicts, rates.merged)
        table.add_row(name, str(rates.pairs), passed, conflicts, str(rates.errors))
    return table


class PairProgress:
    """One bar over the batch's pairs, a line for the pair running now and its agents' latest steps."""

    def __init__(self, progress: Progress, total: int) -> None:
        self.progress = progress
        self.bar = progress.add_task("pairs", total=total)
        self.current = "pairs"
        self.steps: dict[str, tuple[str, float | None]] = {}  # agent: what it does, since when (a command under way)

    def start(self, run: Any) -> None:
        self.begin(f"pair {run.pair[0]},{run.pair[1]} {run.setting} k={run.k}")

    def begin(self, label: str) -> None:
        self.progress.start()  # at the first pair: nothing shown when the checks before any pair fail
        self.current = label
        self.steps = {}

    def event(self, agent: str, event: Any) -> None:
        """An agent's step once done, and its command while it runs (its time so far counted on, output or not)."""
        if event.kind == "step":
            self.steps[agent] = (f"agent {agent} step {event.step}: {terminal_safe(str(event.action))[:40]}", None)
        elif event.kind == "command" and event.command.kind != "end":
            doing = f"agent {agent} step {event.step}: running {terminal_safe(event.command.command)[:40]}"
            self.steps[agent] = (doing, time.monotonic() - event.command.seconds)

    def line(self) -> str:
        """The bar's line now: the pair, then each agent's step or its command with the seconds it has run."""
        now = time.monotonic()
        doing = [text if since is None else f"{text} ({now - since:.0f} s)" for text, since in self.steps.values()]
        return "  ".join([self.current, " | ".join(sorted(doing))] if doing else [self.current])

    def done(self, run: Any, result: dict[str, Any]) -> None:
        """The pair's line above the bar (`run`: unused, the listener's signature)."""
        if result.get("error"):
            line = f"[red]error[/] {escape(result['error'])}"
        else:
            merge = (result.get("merge") or {}).get("status", "no merge")
            both = {True: "both pass", False: "not both pass"}.get(result.get("both_passed"), "not graded")
            both = {True: "its feature passes", False: "its feature fails"}.get(result.get("passed"), both)
            seconds = ", ".join(f"{p} {s:.1f} s" for p, s in result.get("seconds", {}).items())
            line = f"{merge}, {both} ({seconds})"
        self.progress.console.print(f"{escape(self.current)}: {line}")
        self.progress.advance(self.bar)


class LineColumn(ProgressColumn):
    """The pair's line, rendered anew at each refresh (a command's seconds go on while it prints nothing)."""

    def __init__(self) -> None:
        super().__init__()
        self.pairs: PairProgress | None = None

    def render(self, task: Any) -> Text:
        return Text(self.pairs.line() if self.pairs else task.description)


@contextmanager
def pair_progress(total: int):  # noqa: ANN201
    line = LineColumn()
    columns = (SpinnerColumn(), line, BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    progress = Progress(*columns, console=console, transient=False)
    line.pairs = PairProgress(progress, total)
    try:
        yield line.pairs
    finally:
        if progress.live.is_started:
            progress.stop()
