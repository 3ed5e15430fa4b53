"""`llm-ide inspect`: a trajectory's operation tree and prompt sizes; `--full` adds every thought, observation,
lesson and the patch."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import indent
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llm_ide.cli.console import console, fail, has_price, money, usage_text
from llm_ide.terminal import terminal_safe

PIPED_WIDTH = 1_000_000  # piped output is not cut to a terminal's width


def _crop(text: str, limit: int, cropped: bool) -> str:
    text = terminal_safe(text)  # what commands and models wrote never drives the terminal
    return text[:limit] + " …" if cropped and len(text) > limit else text


def _label(node: Any, on_chain: bool, full: bool, cropped: bool) -> str:
    params = json.dumps(node.action_params, ensure_ascii=False)
    label = escape(f"[{node.id}] {node.action_type} {_crop(params, 80, cropped and not full)}")
    if not on_chain:
        label = f"[red]✗ {label}[/] [dim](failed alternative)[/]"
    elif node.bad_action:
        label = f"[yellow]{label}[/] [dim](marked bad)[/]"
    candidates, choice = node.marks.get("candidates") or [], node.marks.get("choice") or {}
    if candidates:
        samples, method = choice.get("samples", "?"), choice.get("method")
        label += f" [magenta](sampled: {len(candidates)} distinct of {samples}, {method})[/]"
    if full:
        for candidate in candidates:
            mark = "✓" if candidate.get("chosen") else "·"
            params = json.dumps(candidate.get("action_params"), ensure_ascii=False)
            text = f"{mark} {candidate.get('samples', 1)}× {candidate.get('action_type')} {params}"
            label += f"\n  [magenta]{escape(terminal_safe(text))}[/]"
        sections = [("thought", node.thought), ("observation", node.observation)]
        sections += [("summary", node.summary), ("lessons", node.lessons)]
        for title, text in sections:
            if text.strip():
                label += f"\n[bold]{title}:[/]\n{escape(terminal_safe(text.rstrip()))}"
    elif node.summary:
        label += f"\n[dim]{escape(_crop(node.summary, 160, cropped))}[/]"
    return label


def attempt_label(attempt: dict[str, Any]) -> str:
    score = "not reviewed" if attempt.get("score") is None else f"score {attempt['score']:g}"
    label = f"[bold]attempt {attempt['index']}[/]: {attempt.get('exit_status', '')}, {score}"
    label += " [bold green](chosen)[/]" if attempt.get("chosen") else ""
    reasons = attempt.get("reasons") or ""
    return label + (f"\n[dim]{escape(_crop(reasons, 200, True))}[/]" if reasons else "")


def run_priced(info: dict[str, Any]) -> bool:
    """Whether the run's model had a price in its config (a trajectory without its config: taken as priced)."""
    from llm_ide.settings import PriceSettings

    prices = ((info.get("config") or {}).get("model") or {}).get("prices")
    if not isinstance(prices, dict):
        return True
    return has_price(str(info.get("model", "")), {name: PriceSettings(**price) for name, price in prices.items()})


def print_rejected(out: Console, calls: list[dict[str, Any]], info: dict[str, Any]) -> None:
    """`--full`: every reply the run could not use (a format error), why, and the reply itself."""
    from llm_ide.inspector.rejected import rejected_replies

    rejected = rejected_replies(calls, info)
    out.print(f"[bold]rejected replies[/] (format errors): {len(rejected) or 'none'}")
    for position, why in rejected.items():
        call = calls[position]
        where = f"step {call.get('step', '?')}, {call['kind']}"
        out.print(f"[red]✗ call {call['index']}[/] ({escape(where)}): {escape(terminal_safe(why))}")
        out.print(indent(terminal_safe(call["response"].rstrip()) or "(empty reply)", "    "), markup=False)


def inspect(
    trajectory: Annotated[
        Path, typer.Argument(help="A <run id>.traj.json file (llm-ide, or mini-swe-agent with --html).")
    ],
    out: Annotated[
        Path | None,
        typer.Argument(help="With --html: the page to write.", show_default="<run id>.html beside the trajectory"),
    ] = None,
    html: Annotated[
        bool, typer.Option("--html", help="Write a self-contained HTML inspector page.", show_default="off")
    ] = False,
    full: Annotated[
        bool,
        typer.Option(
            "--full",
            help="Every operation's thought, observation, summary and lessons, then the patch.",
            show_default="off",
        ),
    ] = False,
) -> None:
    """Show a trajectory's operation tree (failed alternatives marked) and the size of every prompt."""
    if html or out is not None:
        from llm_ide.cli.inspector import write_inspector_page

        if not html:
            raise fail(f"{out}: an output page is only written with --html")
        return write_inspector_page(trajectory, out)

    from rich.table import Table
    from rich.tree import Tree

    from llm_ide.run.trajectory import load_trajectory
    from llm_ide.state.operations import node_of, reasoning_chain

    if not trajectory.is_file():
        raise fail(f"trajectory not found: {trajectory}")
    try:
        data = load_trajectory(trajectory) if full else json.loads(trajectory.read_text(encoding="utf-8"))
        operations = [(int(op.get("attempt") or 0), node_of(op)) for op in data["operations"]]
        info = data["info"]
        stats = info["model_stats"]
    except (ValueError, KeyError, TypeError) as error:
        raise fail(f"{trajectory} is not an llm-ide trajectory: {error}") from None
    out = console if console.is_terminal else Console(highlight=False, width=PIPED_WIDTH, no_color=True)
    priced = run_priced(info)
    root = Tree(
        f"[bold]{escape(str(info.get('run_id', trajectory.stem)))}[/]: {info['exit_status']} — {len(operations)} "
        f"operations, {escape(usage_text(stats, priced))}"
    )
    attempts = {int(a["index"]): a for a in info.get("attempts") or []}
    for number in sorted({attempt for attempt, _ in operations}):
        nodes = [node for attempt, node in operations if attempt == number]
        chain = {node.id for node in reasoning_chain(nodes)}
        branches = {None: root.add(attempt_label(attempts[number])) if number in attempts else root}
        for node in nodes:
            label = _label(node, node.id in chain, full, cropped=out.is_terminal)
            branches[node.id] = branches[node.parent_id].add(label)
    out.print(root)
    if choice := info.get("choice"):
        picked = f"attempt {choice['attempt']}" if choice.get("attempt") else "no attempt"
        out.print(
            f"[bold]chosen:[/] {picked} ({choice.get('by', '')}) {escape(_crop(choice.get('reasons', ''), 300, True))}"
        )
    for message in info.get("received") or []:  # coop: the other agent's messages, where they arrived
        out.print(f"message before operation {message['step'] + 1}, from agent {escape(str(message['from']))}: "
                  f"{escape(terminal_safe(str(message['text'])))}")  # fmt: skip
    table = Table("call", "kind", "prompt chars", "prompt tokens", "response tokens", "cost")
    for call in data.get("model_calls", []):
        table.add_row(
            str(call["index"]),
            call["kind"],
            str(call["prompt_chars"]),
            str(call["prompt_tokens"]),
            str(call["response_tokens"]),
            money(call["cost"], priced),
        )
    out.print(table)
    if full:
        print_rejected(out, data.get("model_calls", []), info)
        patch = info.get("submission") or ""
        out.print("[bold]patch:[/]")
        out.print(terminal_safe(patch.rstrip("\n")) if patch.strip() else "(empty patch)", markup=False)
