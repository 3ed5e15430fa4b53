"""What every command shares: the consoles, the one-line failure, live run events, model warnings, help defaults."""

from __future__ import annotations

import json
import logging
import re
import shlex
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from textwrap import indent
from typing import Annotated, Any

import typer
import yaml
from rich.console import Console, RenderableType
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table
from rich.text import Text

from llm_ide.errors import masked
from llm_ide.fileio import atomic_write
from llm_ide.secrets import MASK, redact, registered
from llm_ide.terminal import plural, terminal_safe
from llm_ide.user_config import user_config_path

console = Console(highlight=False, soft_wrap=True)
err_console = Console(stderr=True, highlight=False, soft_wrap=True, emoji=False)  # `openai:x:` is no emoji


def fail(message: str) -> typer.Exit:
    """The one line of a usage error (what the user typed in it shown, not obeyed: escape codes, bidi controls)."""
    err_console.print(f"[bold red]error:[/] {escape(terminal_safe(redact(message, registered())))}")
    return typer.Exit(2)


STEP_INDENT = " " * 9  # under `step   1 `
Thoughts = Annotated[
    bool,
    typer.Option("--thoughts/--no-thoughts", help="Show the agent's reasoning at each step.", show_default="on"),
]


WHY_CHARS = 400  # of why a reply was rejected, on its console line (cut at a word)
DETAIL_CHARS = 200  # of a phase's detail (a review's reasons, a choice's), on its line


@dataclass
class StepPrinter:
    """A run's events on the console: its phases (a review's reasons beside it, unless `thoughts` is off), its tools'
    progress, each reply rejected (why, as it happens), and each step: the action, the reasoning that chose it (unless
    `thoughts` is off), the first line of what it showed, and the run's cost so far (its tokens, for a model of no
    price: never a cost of $0 that is only unknown)."""

    priced: bool = True
    thoughts: bool = True
    apart: bool | None = None  # whether what its variants pay apart (a navigator's calls) has a price; None: priced
    anew: str = ""  # the command's way to run a task anew, said by a finished run (FinishedBefore) in its words

    def __call__(self, event: Any) -> None:
        if event.kind == "tool":
            tool_progress()(event.tool)
        elif event.kind == "phase":
            style = "yellow" if event.phase.startswith("warning:") else "dim"
            detail = " ".join(terminal_safe(event.observation).split()) if self.thoughts else ""
            words = getattr(event.phase, "said", None)  # (run/guard.FinishedBefore)
            phase = words(self.anew) if words and self.anew else event.phase
            said = f"{phase} — {whole_words(detail, DETAIL_CHARS)}" if detail else phase
            console.print(f"[{style}]… {escape(terminal_safe(said))}[/]")
        elif event.kind == "step":
            self.step(event)
        elif event.kind == "verdict":
            self.failed(event)
        elif event.kind == "format_error":
            rejected, limit = event.rejected
            why = (terminal_safe(event.observation).strip().splitlines() or [""])[0]
            console.print(
                f"[bold cyan]step {event.step:>3}[/] [yellow]✗ reply rejected ({rejected} of {limit} in a row): "
                f"{escape(whole_words(why))}[/]"
            )

    def failed(self, event: Any) -> None:
        """An operation the model judged a failed alternative (a sibling takes its place), with its lesson."""
        text = Text.assemble((f"step {event.step:>3}", "bold cyan"), " ", ("✗ a failed alternative", "yellow"))
        lesson = first_meaningful_line(terminal_safe(event.observation)).strip() if self.thoughts else ""
        if lesson:
            text.append(": " + whole_words(lesson))
        console.print(text)

    def step(self, event: Any) -> None:
        """One print of styled text: the action, the thought and the output as written (no markup, no emoji codes)."""
        first = first_meaningful_line(terminal_safe(event.observation))  # a command's escape codes never reach it
        text = Text.assemble((f"step {event.step:>3}", "bold cyan"), " ", terminal_safe(event.action)[:110])
        thought = terminal_safe(getattr(event, "thought", "")).strip()
        if self.thoughts and thought:
            text.append("\n" + indent(thought, STEP_INDENT), style="italic")
        spent = money(event.cost, self.priced, self.apart)
        if not self.priced:  # the driver's cost unknown: its tokens said (a cost of $0 that is only unknown never)
            spent = f"{getattr(event, 'tokens', 0):,} tokens, {spent}"
        if first:
            text.append(f"\n{STEP_INDENT}").append(f"→ {first[:110]}", style="dim").append("  ").append(spent, "green")
        console.print(text)


print_event = StepPrinter()


def whole_words(text: str, limit: int = WHY_CHARS) -> str:
    """`text`, or its first `limit` characters cut at a word."""
    return text if len(text) <= limit else text[:limit].rsplit(" ", 1)[0] + " …"


def first_meaningful_line(text: str) -> str:
    """The line that says what an output is: the first with a letter or a digit (not a rule of `-----`, a row of
    test dots), else the first that is not blank."""
    lines = [line for line in text.splitlines() if line.strip()]
    return next((line for line in lines if any(char.isalnum() for char in line)), lines[0] if lines else "")


def money(cost: float, priced: bool = True, apart: bool | None = None) -> str:
    """`cost`, `unpriced`, or `$X + unpriced` when only the driver or only what its variants paid apart is priced."""
    from llm_ide.priced import cost_text

    return cost_text(cost, priced, apart)


def navigator_usage(info: dict[str, Any]) -> dict[str, Any]:
    """A trajectory's `info`: its navigator's model usage (calls, tokens, cost; the driver's `model_stats` exclude it),
    empty for a run without one; `priced`: whether its model had a price."""
    from llm_ide.priced import navigator_priced

    usage = (info.get("navigator") or {}).get("usage") or {}
    return {**usage, "priced": navigator_priced(info)} if usage else {}


def usage_text(stats: dict[str, Any], priced: bool, navigator: dict[str, Any] | None = None) -> str:
    """A run's model usage in one phrase: calls (and those paid at steps that never completed), tokens (said when
    estimated), cost (or `unpriced`); a navigator's that made calls after it."""
    from llm_ide.priced import tokens_text

    calls = int(stats["api_calls"])
    made = calls + int(stats.get("discarded_calls") or 0)  # the tokens are those of the discarded calls too
    tokens = tokens_text(stats["input_tokens"], stats["output_tokens"], int(stats.get("estimated_calls") or 0), made)
    discarded = f" (+{stats['discarded_calls']} discarded)" if stats.get("discarded_calls") else ""
    said = f"{calls} model call{'s' * (calls != 1)}{discarded}, {tokens}, {money(stats['cost'], priced)}"
    return said + navigator_text(navigator, priced)


def navigator_text(navigator: dict[str, Any] | None, priced: bool) -> str:
    """`; its navigator: <calls>, <tokens>, <cost>` after the driver's usage, for a navigator that made calls."""
    from llm_ide.priced import tokens_text

    calls = (navigator or {}).get("api_calls", (navigator or {}).get("calls"))  # (a record of before: `calls`)
    if not calls:
        return ""
    cost = money(navigator["cost"], navigator.get("priced", priced))  # its own model's price, not the driver's
    estimated = int(navigator.get("estimated_calls") or 0)
    spent = f"{tokens_text(navigator['input_tokens'], navigator['output_tokens'], estimated, calls)}, {cost}"
    return f"; its navigator: {plural(calls, 'model call')}, {spent}"


@cache
def tool_progress() -> Any:
    from llm_ide.tools.progress import ToolProgress

    return ToolProgress(console)


def many(count: int, noun: str) -> str:
    """`1 pair`, `2 pairs`."""
    return f"{count} {noun}{'' if count == 1 else 's'}"


def interrupted_exit(interrupt: KeyboardInterrupt) -> typer.Exit:
    """Ctrl-C exits 130; SIGTERM/SIGHUP (`errors.Terminated`) 128 + the signal number."""
    from llm_ide.errors import Terminated

    return typer.Exit(interrupt.code if isinstance(interrupt, Terminated) else 130)


PROGRAMS = ("llm-ide", "mini-extra")
MASKED = f"{MASK} stands for a password or token given on the command line, not printed: put it back"


class Note(str):
    """A word of a command's arguments that is none: what the printed command cannot say (a shell comment after it)."""


def command_line(*extra: str, args: list[str] | None = None) -> str:
    """This process's command line (or `args` in its place), shell-quoted, with `extra` arguments appended: what
    resumes a run. A credential in it is masked, and a comment after it says so (and the `Note`s of `args`)."""
    program = Path(sys.argv[0]).name
    given = [program if program in PROGRAMS else "llm-ide", *(sys.argv[1:] if args is None else args), *extra]
    words = [word for word in given if not isinstance(word, Note)]
    shown = [re.sub(r"\S+", masked, word) for word in words]
    notes = [*([MASKED] if shown != words else []), *(word for word in given if isinstance(word, Note))]
    return shlex.join(shown) + "".join(f"  # {note}" for note in notes)


IN_MEMORY = "its thread was in memory only (--checkpoint memory): it cannot be resumed; the same command starts it over"


def print_interrupted(
    note: str, *extra: str, checkpoint: str | None = None, args: list[str] | None = None, trajectory: Path | None = None
) -> None:
    """Ctrl-C or SIGTERM: say so, what was kept, and the exact command that continues (on lines of their own: a tool's
    spinner still up is ended first); a thread kept in memory is gone, and the line says so instead. The run's line in
    its `trajectory` is said too when something failed after the interruption (errors.beside: the patch not had)."""
    if tool_progress.cache_info().currsize:
        tool_progress().stop()
    err_console.print(f"[bold yellow]interrupted[/]: {escape(note)}")
    if " (then " in (error := interrupted_line(trajectory)):
        err_console.print(f"[red]{escape(terminal_safe(error))}[/]")
    if checkpoint == "memory":
        err_console.print(IN_MEMORY)
        return
    err_console.print("resume with:")
    err_console.print(command_line(*extra, args=args), markup=False)


def interrupted_line(trajectory: Path | None) -> str:
    """The line an interrupted run's trajectory ends with (none to read: empty)."""
    try:
        return str((json.loads(trajectory.read_text(encoding="utf-8")).get("info") or {}).get("error") or "")
    except (OSError, ValueError, AttributeError):
        return ""


Say = Callable[[RenderableType], None]


def print_whole(table: Table) -> None:
    """A table of instances: on a terminal, fitted to it; into a file or a pipe (where rich assumes 80 columns, and
    cut the ids to `psf__requests-…`), at its own width, every cell whole."""
    if console.is_terminal:
        console.print(table)
        return
    width, console.width = console.width, Measurement.get(console, console.options.update(width=10_000), table).maximum
    try:
        console.print(table)
    finally:
        console.width = width


def say_on_stderr(line: RenderableType) -> None:
    err_console.print(line)


class _ConsoleWarnings(logging.Handler):
    def __init__(self, say: Say) -> None:
        super().__init__(logging.WARNING)
        self.say = say

    def emit(self, record: logging.LogRecord) -> None:
        self.say(Text(terminal_safe(redact(record.getMessage())), style="yellow"))


@contextmanager
def warnings_on_console(say: Say = say_on_stderr, more: tuple[str, ...] = ()) -> Iterator[None]:
    """Warnings shown as they happen, not only logged, each on its own line: the model's retries (with their
    reason) and its other warnings, and the environment's (local commands that run unsandboxed, without bubblewrap),
    and those of the loggers `more` names. `say` prints one (a live display's own, so that it lands above the live
    line, not in it)."""
    handler = _ConsoleWarnings(say)
    loggers = [logging.getLogger(name) for name in ("llm_ide.models", "llm_ide.environment", *more)]
    for logger in loggers:
        logger.addHandler(handler)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeHandler(handler)


PROMPTS = Path(__file__).resolve().parents[1] / "prompts"


@cache
def bundled_yaml(config: str) -> dict[str, Any]:
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    return yaml.load((PROMPTS / f"{config}.yaml").read_text(encoding="utf-8"), Loader=loader)


def bundled_value(key: str, config: str = "default") -> Any:
    """`key` in a bundled config as its YAML says (its `extends` chain followed), unvalidated: `--help` builds no
    settings (tests/test_cli.py holds each value shown to the validated one)."""
    data = bundled_yaml(config)
    value: Any = data
    for part in key.split("."):
        if not isinstance(value, dict) or part not in value:
            if "extends" not in data:
                raise KeyError(f"{key} is not in the bundled {config} config")
            return bundled_value(key, data["extends"])
        value = value[part]
    return value


@cache
def users_yaml(path: Path) -> Any:
    """The user's config file as read once per process for every option's `--help` text (None where it does not read:
    a mistake in it is told when a command runs)."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, yaml.YAMLError):
        return None


def config_default(key: str, config: str = "default") -> str:
    """`key` and its value in a bundled config, for `--help`: `config agent.step_limit = 100`; and the user's config
    file's value where it sets another."""
    value = bundled_value(key, config)
    said = f"{'' if config == 'default' else config + ' '}config {key} = {'none' if value is None else value}"
    try:
        path = user_config_path()
    except ValueError:
        return said
    mine: Any = users_yaml(path) if path else None
    for part in key.split("."):
        if not isinstance(mine, dict) or part not in mine:
            return said
        mine = mine[part]
    return said if mine == value else f"{said}; your config {path}: {'none' if mine is None else mine}"


def check_model_before_start(
    model: str,
    settings: Any,
    base_url: str | None,
    say: Say = say_on_stderr,
    timeout: float | None = None,
    variants: Any = None,
    environment: tuple[str | None, str | None] | None = (None, None),
) -> None:
    """The run's preflight (llm_ide/run/preflight.py, the same for every door): limits, the model's name, API key and
    endpoint, what the run's `variants` need, before the environment starts and the tools install (`run` checks its
    repository before: cli/run.py's `repository`). A problem is the one line said; the models' warnings meanwhile (no
    price) are said only when the checks pass."""
    from llm_ide.errors import UsageError
    from llm_ide.run.preflight import PREFLIGHT_TIMEOUT, preflight

    held: list[RenderableType] = []
    try:
        with warnings_on_console(held.append):
            wait = timeout or PREFLIGHT_TIMEOUT
            kind, image = environment or (None, None)  # the kind asked for and its image; None: each instance's
            preflight(
                model, settings, base_url=base_url, timeout=wait, quiet=False, variants=variants,
                environment=kind, image=image, imaged=environment is not None,
            )  # fmt: skip
    except UsageError as error:
        raise fail(str(error)) from None
    for line in held:
        say(line)


def write_patch(submission: str, path: Path) -> None:
    """The patch written to `path` and printed under its name, coloured on a terminal like `git diff`."""
    try:
        atomic_write(path, submission)
    except OSError as error:  # the run's folder replaced or locked under it: the patch is printed, the report follows
        err_console.print(f"the patch could not be written to {path}: {error.strerror or error}", markup=False)
    console.print(f"[bold]patch[/] ({escape(str(path))}):")
    console.print(coloured_patch(terminal_safe(submission.rstrip("\n"))) if submission.strip() else "(empty patch)")


PATCH_STYLES = (("+++", "bold"), ("---", "bold"), ("diff ", "bold"), ("@@", "cyan"), ("+", "green"), ("-", "red"))


def coloured_patch(patch: str) -> Text:
    """A unified diff as `git diff` colours it: added lines green, removed red, hunk headers cyan, file headers bold
    (a console that is no terminal prints it plain)."""
    text = Text()
    for line in patch.splitlines(keepends=True):
        style = next((style for prefix, style in PATCH_STYLES if line.startswith(prefix)), "")
        text.append(line, style=style)
    return text
