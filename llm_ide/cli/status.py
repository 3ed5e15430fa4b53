"""The live line while the model thinks: a spinner, the seconds so far, the prompt's tokens and (as the reply streams)
the tokens out and their rate; with -v the reply itself as it streams in. While a command of the agent's runs: the
command, its seconds so far and its latest output lines. Warnings said meanwhile land on their own lines."""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.spinner import Spinner
from rich.text import Text

from llm_ide.terminal import terminal_safe

if TYPE_CHECKING:
    from llm_ide.calls import CallProgress
    from llm_ide.environments.live import CommandProgress

TAIL_LINES = 6  # -v on a terminal: the last lines of the streaming reply, above the spinner


class ThinkingStatus:
    """A CallListener for a console. On a terminal: a transient live display during each call; elsewhere (a pipe, a
    log) nothing but, with `verbose`, the reply's text as it streams (and once it is whole, when it did not stream)."""

    def __init__(self, console: Console, verbose: bool = False, err_console: Console | None = None) -> None:
        self.console, self.verbose = console, verbose
        self.err_console = err_console or Console(stderr=True, highlight=False, soft_wrap=True)
        self.spinner = Spinner("dots", style="cyan")
        self.lock = threading.Lock()  # the calls (render reads them from Live's refresh thread)
        self.display = threading.Lock()  # starting and stopping the live display
        self.calls: dict[int, dict[str, float | int | str]] = {}  # per calling thread (sampling: k at once)
        self.live: Live | None = None
        self.partial = False  # a streamed reply's text is on the console, its line not ended yet
        self.running: CommandProgress | None = None  # the agent's command under way, as last told
        self.command_started = 0.0

    def __call__(self, progress: CallProgress) -> None:
        with self.lock:
            call = self.calls.setdefault(threading.get_ident(), {"started": time.monotonic(), "text": ""})
            if progress.kind == "start":
                call.update(started=time.monotonic(), prompt=progress.prompt_tokens, out=0, text="", first=0.0)
            elif progress.kind == "text":
                call.update(out=progress.output_tokens, text=str(call["text"]) + progress.text)
                call["first"] = call.get("first") or time.monotonic()
            else:
                self.calls.pop(threading.get_ident(), None)
            last = not self.calls
        with self.display:
            if progress.kind == "start" and self.live is None and self.console.is_terminal:
                self.live = Live(console=self.console, get_renderable=self.render, refresh_per_second=8, transient=True)
                self.live.start(refresh=True)
            elif progress.kind == "text" and self.verbose and self.live is None:
                self.console.print(terminal_safe(progress.text), end="", markup=False, highlight=False)
                self.partial = True
            elif progress.kind == "end" and last:
                self._end(str(call["text"]))

    def command(self, progress: CommandProgress) -> None:
        """A CommandListener: on a terminal, the command under way on the live display with its latest output."""
        if not self.console.is_terminal:
            return
        with self.lock:
            self.running = None if progress.kind == "end" else progress
            if progress.kind == "start":
                self.command_started = time.monotonic()
        with self.display:
            if progress.kind == "start" and self.live is None:
                self.live = Live(console=self.console, get_renderable=self.render, refresh_per_second=8, transient=True)
                self.live.start(refresh=True)
            elif progress.kind == "end" and self.live is not None and not self.calls:
                self.live.stop()
                self.live = None

    def stop(self) -> None:
        """The live display ended (its line cleared) before a line that must stand on its own (Ctrl-C)."""
        with self.display:
            if self.live is not None:
                self.live.stop()
                self.live = None

    def _end(self, text: str) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None
            if self.verbose and text:
                self.console.print(Text(terminal_safe(text.rstrip("\n")), style="dim"))
        elif self.partial:
            self.console.print(markup=False)  # the streamed text ends its line
            self.partial = False

    def say(self, line: RenderableType) -> None:
        """A line (a warning, a retry) on its own line: above the live display while there is one (rich keeps it
        below), else on stderr, after the streamed text's line is ended."""
        with self.display:
            if self.live is not None:
                self.live.console.print(line)
                return
            if self.partial:
                self.console.print(markup=False)
                self.partial = False
            self.err_console.print(line)

    def render(self) -> RenderableType:
        with self.lock:
            calls, running = list(self.calls.values()), self.running
        if running is not None and not calls:
            return self.render_command(running)
        if not calls:
            return Text("")
        self.spinner.update(text=Text(thinking_line(calls, time.monotonic()), style="cyan"))
        if not self.verbose:
            return self.spinner
        tail = "\n".join(terminal_safe(str(calls[0]["text"])).splitlines()[-TAIL_LINES:])
        return Group(Text(tail, style="dim"), self.spinner) if tail else self.spinner

    def render_command(self, running: CommandProgress) -> RenderableType:
        seconds = time.monotonic() - self.command_started
        command = " ".join(terminal_safe(running.command).split())
        command = command if len(command) <= COMMAND_CHARS else command[: COMMAND_CHARS - 1] + "…"
        self.spinner.update(text=Text(f"running {command} · {seconds:.1f} s", style="cyan"))
        width = max(20, self.console.width - 4)
        tail = [terminal_safe(line).expandtabs()[:width] for line in running.lines[-COMMAND_LINES:]]
        return Group(Text("\n".join(tail), style="dim"), self.spinner) if tail else self.spinner


COMMAND_CHARS = 80  # of the command shown on its live line
COMMAND_LINES = 5  # of its latest output above it


def thinking_line(calls: list[dict[str, float | int | str]], now: float) -> str:
    """`model thinking · 12.3 s · prompt ~1,234 tokens · 87 tokens out · 6.1 tokens/s`: the rate since the first
    token came (the prompt was read by then)."""
    seconds = max(now - float(call["started"]) for call in calls)
    prompt = sum(int(call.get("prompt", 0)) for call in calls)
    out = sum(int(call.get("out", 0)) for call in calls)
    what = "model thinking" if len(calls) == 1 else f"{len(calls)} model calls"
    line = f"{what} · {seconds:.1f} s · prompt ~{prompt:,} tokens"
    if not out:
        return line
    first = min((float(call["first"]) for call in calls if call.get("first")), default=now)
    rate = f" · {out / (now - first):.1f} tokens/s" if now - first >= 1 else ""
    return f"{line} · {out:,} token{'s' * (out != 1)} out{rate}"
