"""`llm-ide inspect`: a trajectory's operation tree and prompt sizes; `--full` adds every thought, observation,
lesson and the patch."""

from __future__ import annotations

import json
from pathlib import Path
from textwrap import indent
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from llm_ide.cli.console import console, err_console, fail, money, navigator_usage, usage_text
from llm_ide.terminal import plural, terminal_safe

if TYPE_CHECKING:
    from rich.table import Table
    from rich.tree import Tree

PIPED_WIDTH = 1_000_000  # piped output is not cut to a terminal's width
NOT_ENDED = "not ended (still running, or killed)"  # a trajectory written before its run's end
MAX_NAMED = 5  # trajectories a folder of several runs names

Trajectory = Annotated[
    Path,
    typer.Argument(
        help="A <run id>.traj.json file (llm-ide, or mini-swe-agent with --html), or a folder holding one (or a folder "
        "in it holding one: `llm-ide demo --output D`'s D)."
    ),
]
Page = Annotated[
    str | None,
    typer.Argument(
        help="With --html: the page to write; a folder: <run id>.html in it.",
        show_default="<run id>.html beside the trajectory",
    ),
]
Html = Annotated[bool, typer.Option("--html", help="Write a self-contained HTML inspector page.", show_default="off")]
Full = Annotated[
    bool,
    typer.Option(
        "--full",
        help="Every operation's thought, observation, summary and lessons, then the patch.",
        show_default="off",
    ),
]


def _crop(text: str, limit: int, cropped: bool) -> str:
    text = terminal_safe(text)  # what commands and models wrote never drives the terminal
    return text[:limit] + " …" if cropped and len(text) > limit else text


def _label(node: Any, on_chain: bool, full: bool, cropped: bool) -> str:
    from llm_ide.inspector.model import denial

    params = json.dumps(node.action_params, ensure_ascii=False)
    label = escape(f"[{node.id}] {node.action_type} {_crop(params, 80, cropped and not full)}")
    if denied := denial(node.marks.get("denied")):  # refused before it ran
        label = f"[red]✗ {label}[/] [dim](not run: {escape(_crop(denied, 160, cropped and not full))})[/]"
    elif not on_chain:
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


def print_rejected(out: Console, calls: list[dict[str, Any]], info: dict[str, Any]) -> None:
    """`--full`: every reply the run could not use (a format error), why, and the reply itself."""
    from llm_ide.inspector.rejected import rejected_replies, reply_text

    rejected = rejected_replies(calls, info)
    out.print(f"[bold]rejected replies[/] (format errors): {len(rejected) or 'none'}")
    for position, why in rejected.items():
        call = calls[position]
        where = f"step {call['step'] + 1 if isinstance(call.get('step'), int) else '?'}, {call['kind']}"
        out.print(f"[red]✗ call {call['index']}[/] ({escape(where)}): {escape(terminal_safe(why))}")
        out.print(indent(terminal_safe(reply_text(call).rstrip()) or "(empty reply)", "    "), markup=False)


def inspect(trajectory: Trajectory, out: Page = None, html: Html = False, full: Full = False) -> None:
    """Show a trajectory's operation tree (failed alternatives marked) and the size of every prompt."""
    trajectory = run_trajectory(trajectory)
    if html or out is not None:
        from llm_ide.cli.inspector import write_inspector_page

        if not html:
            raise fail(f"{out}: an output page is only written with --html")
        return write_inspector_page(trajectory, out)
    from llm_ide.priced import run_priced

    data, operations, stats = loaded(trajectory, full)
    info, calls = data["info"], data.get("model_calls", [])
    screen = console if console.is_terminal else Console(highlight=False, width=PIPED_WIDTH, no_color=True)
    priced = run_priced(info)
    heading = escape(str(info.get("run_id", trajectory.stem)))
    used = usage_text(stats, priced, navigator_usage(info))
    screen.print(operation_tree(heading, info, operations, used, full, cropped=screen.is_terminal))
    if info.get("error"):  # why a run that did not submit ended
        screen.print(f"[bold]ended:[/] {escape(terminal_safe(str(info['error'])))}")
    print_choice_and_messages(screen, info)
    screen.print(calls_table(calls, priced, data.get("discarded_calls") or []))
    if full:
        print_rejected(screen, calls, info)
        patch = info.get("submission") or ""
        screen.print("[bold]patch:[/]")
        screen.print(terminal_safe(patch.rstrip("\n")) if patch.strip() else "(empty patch)", markup=False)


def run_trajectory(path: Path) -> Path:
    """`path`, or the one trajectory of the run folder it names (`runs/<thread id>`), else of a folder in it (a demo's
    `run/`, a batch's instances)."""
    if not path.is_dir():
        return path
    if (path / "run.json").is_file():  # a coop pair's: its planners' turns here, its agents' runs in agent<n>-run/
        runs = ", ".join(str(run) for run in sorted(path.glob("agent*-run"))) or "none has run yet"
        raise fail(f"{path} is a coop pair's folder: give one of its agents' runs ({runs})")
    found = sorted(path.glob("*.traj.json")) or sorted(path.glob("*/*.traj.json"))
    if len(found) > 1:
        names = ", ".join(str(trajectory.relative_to(path)) for trajectory in found[:MAX_NAMED])
        more = f" and {len(found) - MAX_NAMED} more" if len(found) > MAX_NAMED else ""
        raise fail(f"{path} holds {len(found)} runs' trajectories ({names}{more}): give one")
    if not found:
        raise fail(f"{path} is a folder without a trajectory: give a run's ({path / '<thread id>.traj.json'})")
    return found[0]


def loaded(trajectory: Path, full: bool) -> tuple[dict[str, Any], list[tuple[int, Any]], dict[str, Any]]:
    """The trajectory as the page reads it (`full`: with each call's prompt), its operations with the attempt each
    belongs to, and its model usage; each repair said."""
    from llm_ide.inspector.load import MINI_FORMAT, refuse_planner_turns
    from llm_ide.inspector.recorded import TrajectoryError, llm_ide_trajectory, malformed, read_json
    from llm_ide.state.operations import node_of

    try:
        data = read_json(trajectory)
        if data.get("trajectory_format") == MINI_FORMAT:
            said = "`llm-ide inspect --html` shows it as one page"
            raise TrajectoryError(f"{trajectory} is a mini-swe-agent trajectory: {said}")
        refuse_planner_turns(data, trajectory)
        if "operations" not in data:
            raise TrajectoryError(f"{trajectory}: not an llm-ide trajectory (no operations)")
        data, notes = llm_ide_trajectory(data, trajectory, prompts=full)
        operations = [(op.get("attempt", 0), node_of(op)) for op in data["operations"]]
    except TrajectoryError as error:
        raise fail(str(error)) from None
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise fail(str(malformed(trajectory, error))) from None
    for note in notes:
        err_console.print(f"warning: {note}", markup=False)
    return data, operations, data["info"]["model_stats"]


def operation_tree(
    heading: str, info: dict[str, Any], operations: list[tuple[int, Any]], usage: str, full: bool, cropped: bool
) -> Tree:
    """The run's operations under its heading, one branch per attempt; those off the reasoning chain marked. The
    chain goes on at one level, as the page draws it, each alternative a branch off its parent: a run of hundreds of
    steps nested as deep would be cut at a terminal's width."""
    from itertools import pairwise

    from rich.tree import Tree

    from llm_ide.state.operations import reasoning_chain

    status = info.get("exit_status") or NOT_ENDED
    root = Tree(f"[bold]{heading}[/]: {status} — {plural(len(operations), 'operation')}, {escape(usage)}")
    attempts = {int(a["index"]): a for a in info.get("attempts") or []}
    for number in sorted({attempt for attempt, _ in operations}):
        nodes = [node for attempt, node in operations if attempt == number]
        chain = reasoning_chain(nodes)
        going_on = {child.id for parent, child in pairwise(chain) if child.parent_id == parent.id}
        top = root.add(attempt_label(attempts[number])) if number in attempts else root
        drawn = [(node, Tree(_label(node, node in chain, full, cropped))) for node in nodes]
        branches = {node.id: branch for node, branch in reversed(drawn)}  # an id twice: its first node's children
        for node, branch in drawn:  # in the file's order, a child possibly before its parent
            under = node.parent_id is None or node.id in going_on
            (top if under else branches[node.parent_id]).children.append(branch)
    return root


def print_choice_and_messages(screen: Console, info: dict[str, Any]) -> None:
    """The attempt chosen and why; in a coop run, the other agent's messages and where they arrived."""
    if (choice := info.get("choice")) and choice.get("by"):  # (none yet: the run stopped before its choice)
        picked = f"attempt {choice['attempt']} ({choice['by']})" if choice.get("attempt") else "none (no patch)"
        reasons = escape(_crop(choice.get("reasons", ""), 300, True))
        screen.print(f"[bold]chosen:[/] {escape(picked)}{f' — {reasons}' if reasons else ''}")  # as the run said it
    for message in info.get("received") or []:
        sender, text = escape(str(message.get("from", "?"))), escape(terminal_safe(message.get("text", "")))
        screen.print(f"message before operation {message.get('step', 0) + 1}, from agent {sender}: {text}")


def calls_table(calls: list[dict[str, Any]], priced: bool, discarded: list[dict[str, Any]]) -> Table:
    """Each model call: its kind, prompt size, tokens and cost; in a run of attempts, the attempt it is of (— for the
    chooser's, of them all); the calls paid for outside the run's history (`discarded`), each before the one that
    replaced it, and why."""
    from rich.table import Table

    attempted = any(call.get("attempt") for call in calls)
    which = ["attempt"] if attempted else []
    table = Table("call", *which, "kind", "prompt chars", "prompt tokens", "response tokens", "cost")
    if discarded:
        table.add_column("discarded (paid, not in the run's history)")
    in_order = lambda call: (call["index"], "discarded" not in call)  # noqa: E731  (a discarded call first)
    rows = sorted([*calls, *discarded], key=in_order) if discarded else calls
    for position, call in enumerate(rows):
        cost = call.get("cost")
        table.add_row(
            str(call.get("index", position)),
            *[str(call.get("attempt") or "—") for _ in which],
            str(call.get("kind", "?")),
            *(str(call.get(key, "?")) for key in ("prompt_chars", "prompt_tokens", "response_tokens")),
            money(cost, priced) if isinstance(cost, int | float) else "?",
            *([escape(str(call.get("discarded", "")))] if discarded else []),
        )
    return table
