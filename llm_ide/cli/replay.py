"""`llm-ide replay`: another agent's trajectory (or one of ours) replayed through llm-ide's memory, command for
command; the bill and what each prompt held, for llm-ide and the original run."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from llm_ide.cli.console import console, err_console, fail
from llm_ide.terminal import terminal_safe

PIPED_WIDTH = 200  # piped output: the per-step table on one line per step


class ActionFormat(StrEnum):
    tools = "tools"
    text = "text"


FormatOption = Annotated[
    ActionFormat | None,
    typer.Option(
        help="tools: the actions as tools (the endpoint answers with tool calls); text: as tags in the text.",
        show_default="the config's (auto: text at this endpoint)",
    ),
]


def replay_command(
    trajectory: Annotated[Path, typer.Argument(help="A trajectory: mini-swe-agent-1 (.traj.json) or llm-ide-1.")],
    repo: Annotated[Path, typer.Option(help="The repository: a local clone or a git bundle (only read).")],
    branch: Annotated[
        str | None,
        typer.Option(help="The branch to replay on.", show_default="the trajectory's instance id, if it names one"),
    ] = None,
    commit: Annotated[str | None, typer.Option(help="The commit to replay on.", show_default="the branch's")] = None,
    out: Annotated[
        Path | None,
        typer.Option(help="Where the report, the wire log and the replayed run go.", show_default="replays/<run id>"),
    ] = None,
    html: Annotated[
        bool,
        typer.Option("--html", help="Write the replayed run's inspector page with the misses.", show_default="off"),
    ] = False,
    config: Annotated[
        list[Path] | None,
        typer.Option(help="YAML file(s) overriding any config key (memory settings…).", show_default="none"),
    ] = None,
    single_call: Annotated[
        bool | None,
        typer.Option("--single-call/--two-calls", help="agent.single_call.", show_default="the config's"),
    ] = None,
    action_format: FormatOption = None,
    cached_price: Annotated[float, typer.Option(help="Price of a character of the shared prefix.")] = 0.1,
    input_price: Annotated[float, typer.Option(help="Price of any other prompt character.")] = 1.0,
    output_price: Annotated[float, typer.Option(help="Price of an output character.")] = 8.0,
    misses: Annotated[int, typer.Option(help="Misses printed (all are in replay.json).")] = 40,
    unsandboxed: Annotated[
        bool,
        typer.Option(
            "--unsandboxed",
            help="Replay even without a working bubblewrap: the trajectory's commands then run as you, on this "
            "machine.",
            show_default="off: refused without bubblewrap",
        ),
    ] = False,
) -> None:
    """Replay TRAJECTORY through llm-ide on a fresh checkout of --repo (local environment, no network): the model
    side answers with the original's thoughts and commands. Prints, per step and in total, the bill and the raw and
    uncached characters of llm-ide and of the original at the same prices, edit grounding and reference recall, and
    the misses; writes replay.json, wire.jsonl and the run into --out. The definitions are in docs/replay.md."""
    from llm_ide.config import ConfigError
    from llm_ide.replay.formats import ReplayError, load
    from llm_ide.replay.model import Prices
    from llm_ide.replay.report import print_report
    from llm_ide.replay.run import replay, run_id_of

    if not trajectory.is_file():
        raise fail(f"trajectory not found: {trajectory}")
    try:
        loaded = load(trajectory)
        target = out or Path("replays") / run_id_of(loaded, trajectory)
        columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
        live = {"console": err_console, "transient": True, "disable": not err_console.is_terminal}
        with Progress(*columns, TextColumn("{task.description}"), **live) as progress:
            task = progress.add_task("", total=len(loaded.steps))

            def on_event(event) -> None:
                if event.kind == "step":
                    progress.update(task, completed=event.step, description=escape(terminal_safe(event.action)[:60]))

            report = replay(
                trajectory,
                repo,
                target,
                branch=branch,
                commit=commit,
                overrides=config or [],
                single_call=single_call,
                action_format=action_format,
                prices=Prices(cached=cached_price, input=input_price, output=output_price),
                on_event=on_event,
                unsandboxed=unsandboxed,
            )
    except (ReplayError, ConfigError) as error:
        raise fail(str(error)) from None
    print_report(report, console if console.is_terminal else Console(highlight=False, width=PIPED_WIDTH), misses)
    if html:
        from llm_ide.replay.page import write_replay_page

        page = write_replay_page(report, target)
        console.print(f"inspector page with the misses: {page}")
    console.print(f"report: {target / 'replay.json'}; the replayed run: {report.run_trajectory}")
    if report.diverged:
        raise typer.Exit(1)
