"""`llm-ide replay`: another agent's trajectory (or one of ours) replayed through llm-ide's memory, command for
command; the bill and what each prompt held, for llm-ide and the original run."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from llm_ide.cli.console import command_line, console, err_console, fail, interrupted_exit
from llm_ide.terminal import terminal_safe

if TYPE_CHECKING:
    from llm_ide.replay.model import ReplayReport
    from llm_ide.run.single import RunEvent

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

Trajectory = Annotated[Path, typer.Argument(help="A trajectory: mini-swe-agent-1 (.traj.json) or llm-ide-1.")]
Repo = Annotated[Path, typer.Option(help="The repository: a local clone or a git bundle (only read).")]
Branch = Annotated[
    str | None,
    typer.Option(help="The branch to replay on.", show_default="the trajectory's instance id, if it names one"),
]
Commit = Annotated[str | None, typer.Option(help="The commit to replay on.", show_default="the branch's")]
Out = Annotated[
    Path | None,
    typer.Option(
        "--output",
        "-o",
        "--out",
        help="Where the report, the wire log and the replayed run go.",
        show_default="replays/<run id>",
    ),
]
Html = Annotated[
    bool, typer.Option("--html", help="Write the replayed run's inspector page with the misses.", show_default="off")
]
Config = Annotated[
    list[Path] | None,
    typer.Option(
        "--config", "-c", help="YAML file(s) overriding any config key (memory settings…).", show_default="none"
    ),
]
SingleCall = Annotated[
    bool | None, typer.Option("--single-call/--two-calls", help="agent.single_call.", show_default="the config's")
]


class Profile(StrEnum):
    gpt = "gpt"
    claude55 = "claude55"
    open = "open"


ProfileOption = Annotated[
    Profile,
    typer.Option(
        help="The price list both agents are billed with and llm-ide's renewals weigh (per character of an uncached "
        "prompt / a cache write / a cached re-read / the output): gpt 1 / – / 0.1 / 8, claude55 1 / 1.25 / 0.05 / 5, "
        "open 1 / – / 0.02 / 3; the options below change one price of it."
    ),
]
CachedPrice = Annotated[
    float | None, typer.Option(help="Price of a character of the shared prefix.", show_default="the profile's")
]
InputPrice = Annotated[
    float | None, typer.Option(help="Price of any other prompt character.", show_default="the profile's")
]
WritePrice = Annotated[
    float | None,
    typer.Option(
        help="Price of a prompt character written to the cache (in place of --input-price).",
        show_default="the profile's",
    ),
]
OutputPrice = Annotated[float | None, typer.Option(help="Price of an output character.", show_default="the profile's")]
Misses = Annotated[int, typer.Option(help="Misses printed (all are in replay.json).", min=0)]
Unsandboxed = Annotated[
    bool,
    typer.Option(
        "--unsandboxed",
        help="Replay even without a working bubblewrap: the trajectory's commands then run as you, on this machine.",
        show_default="off: refused without bubblewrap",
    ),
]


def replay_command(
    trajectory: Trajectory,
    repo: Repo,
    branch: Branch = None,
    commit: Commit = None,
    out: Out = None,
    html: Html = False,
    config: Config = None,
    single_call: SingleCall = None,
    action_format: FormatOption = None,
    profile: ProfileOption = Profile.gpt,
    cached_price: CachedPrice = None,
    input_price: InputPrice = None,
    cache_write_price: WritePrice = None,
    output_price: OutputPrice = None,
    misses: Misses = 40,
    unsandboxed: Unsandboxed = False,
) -> None:
    """Replay TRAJECTORY through llm-ide on a fresh checkout of --repo (local environment, no network): the model
    side answers with the original's thoughts and commands. Prints, per step and in total, the bill and the raw and
    uncached characters of llm-ide and of the original at the same prices, edit grounding and reference recall, and
    the misses; writes replay.json, wire.jsonl and the run into --out. The definitions are in docs/replay.md."""
    if not trajectory.is_file():
        raise fail(f"trajectory not found: {trajectory}")
    from llm_ide.config import ConfigError
    from llm_ide.replay.formats import ReplayError, load, run_id_of
    from llm_ide.replay.model import Prices

    changed = {"cached": cached_price, "input": input_price, "cache_write": cache_write_price, "output": output_price}
    prices = Prices.of(profile.value)
    if any(value is not None for value in changed.values()):
        given = {key: value for key, value in changed.items() if value is not None}
        prices = prices.model_copy(update={**given, "profile": f"{profile.value}, changed"})
    try:
        loaded = load(trajectory)
        target = out or Path("replays") / run_id_of(loaded, trajectory)
        report = replay_with_progress(
            trajectory,
            repo,
            target,
            len(loaded.steps),
            branch=branch,
            commit=commit,
            overrides=config or [],
            single_call=single_call,
            action_format=action_format,
            prices=prices,
            unsandboxed=unsandboxed,
        )
    except (ReplayError, ConfigError) as error:
        raise fail(str(error)) from None
    show_report(report, target, misses, html)
    if report.diverged:
        raise typer.Exit(1)


def replay_with_progress(trajectory: Path, repo: Path, target: Path, steps: int, **options: Any) -> ReplayReport:
    """The replay under a progress bar on stderr (a terminal's only): the steps done and the action of the last."""
    from llm_ide.replay.run import replay

    columns = (TextColumn("replaying"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    live = {"console": err_console, "transient": True, "disable": not err_console.is_terminal}
    done = [0]
    try:
        with Progress(*columns, TextColumn("{task.description}"), **live) as progress:
            task = progress.add_task("", total=steps)

            def on_event(event: RunEvent) -> None:
                if event.kind == "step":
                    done[0] = event.step
                    progress.update(task, completed=event.step, description=escape(terminal_safe(event.action)[:60]))

            return replay(trajectory, repo, target, on_event=on_event, **options)
    except KeyboardInterrupt as interrupt:
        err_console.print(
            f"interrupted after {done[0]} of {steps} steps: no report written (the run so far: {target / 'run'}); "
            f"the same command replays it from the start:\n{command_line()}",
            highlight=False,
            soft_wrap=True,
        )
        raise interrupted_exit(interrupt) from None


def show_report(report: ReplayReport, target: Path, misses: int, html: bool) -> None:
    """The report (`misses` of its misses), with --html the inspector page, and where both runs are."""
    from llm_ide.replay.report import print_report

    print_report(report, console if console.is_terminal else Console(highlight=False, width=PIPED_WIDTH), misses)
    if html:
        from llm_ide.replay.page import write_replay_page

        page = write_replay_page(report, target)
        console.print(f"inspector page with the misses: {page}")
    console.print(f"report: {target / 'replay.json'}; the replayed run: {report.run_trajectory}")
