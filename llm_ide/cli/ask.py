"""The human navigator on a terminal (`llm-ide run --navigator human`): each question the graph's interrupt asks is
shown (the action, the driver's thought, the diff) and answered with y/n and a reason, within the timeout."""

from __future__ import annotations

import select
import sys
import time
from typing import Any

from rich.markup import escape
from rich.syntax import Syntax

from llm_ide.cli.console import console
from llm_ide.terminal import terminal_safe


def read_line(prompt: str, deadline: float) -> str | None:
    """A line from stdin, or None when the deadline passes (or stdin ends) first."""
    console.print(prompt, end="", markup=False, highlight=False)
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        return None
    ready, _, _ = select.select([sys.stdin], [], [], remaining)
    if not ready:
        return None
    line = sys.stdin.readline()
    return None if line == "" else line.strip()


def yes_no(prompt: str, deadline: float) -> bool | None:
    while True:
        answer = read_line(prompt, deadline)
        if answer is None:
            return None
        if answer.lower() in {"y", "yes", "n", "no"}:
            return answer.lower().startswith("y")
        console.print("answer y or n")


def show(question: dict[str, Any]) -> None:
    kind = question.get("kind", "permission")
    console.rule(f"[bold magenta]navigator: {kind}[/]")
    if question.get("thought"):
        console.print(f"[bold]driver's thought:[/] {escape(terminal_safe(question['thought']))}")
    if question.get("action"):
        console.print(f"[bold]action:[/] {escape(terminal_safe(question['action'])[:2000])}")
    if question.get("summary"):
        console.print(f"[bold]summary:[/] {escape(terminal_safe(question['summary']))}")
    if question.get("question"):
        console.print(f"[bold]question:[/] {escape(terminal_safe(question['question']))}")
    diff = question.get("diff") or question.get("patch")
    if diff:
        console.print(Syntax(terminal_safe(diff), "diff", theme="ansi_dark", word_wrap=True))


def ask_on_terminal(question: dict[str, Any]) -> dict[str, Any]:
    """The answer to one navigator question; `{"timeout": True}` when none came within its timeout."""
    show(question)
    timeout = float(question.get("timeout") or 15.0)
    deadline = time.monotonic() + timeout
    kind = question.get("kind", "permission")
    if kind == "guidance":
        answer = read_line(f"answer ({timeout:g} s): ", deadline)
        return {"timeout": True} if answer is None else {"answer": answer}
    verdict = yes_no(f"{'approve' if kind == 'permission' else 'pass'}? [y/n] ({timeout:g} s): ", deadline)
    if verdict is None:
        console.print("\n[yellow]no answer in time: navigator.timeout_decision applies[/]")
        return {"timeout": True}
    reason = read_line("reason (Enter: none): ", max(deadline, time.monotonic() + timeout))
    if reason is None:
        console.print()  # none came: what follows starts on a line of its own
    reason = reason or ""
    if kind == "permission":
        return {"approved": verdict, "reason": reason}
    return {"passed": verdict, "comment": reason}
