"""The live line while the model thinks: a spinner, the seconds so far, the prompt's tokens and (when the reply
streams) the tokens out; with -v the reply itself as it streams in. Warnings said meanwhile land on their own lines."""

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

    def __call__(self, progress: CallProgress) -> None:
        with self.lock:
            call = self.calls.setdefault(threading.get_ident(), {"started": time.monotonic(), "text": ""})
            if progress.kind == "start":
                call.update(started=time.monotonic(), prompt=progress.prompt_tokens, out=0, text="")
            elif progress.kind == "text":
                call.update(out=progress.output_tokens, text=str(call["text"]) + progress.text)
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
            calls = list(self.calls.values())
        if not calls:
            return Text("")
        now = time.monotonic()
        seconds = max(now - float(call["started"]) for call in calls)
        prompt = sum(int(call.get("prompt", 0)) for call in calls)
        out = sum(int(call.get("out", 0)) for call in calls)
        what = "model thinking" if len(calls) == 1 else f"{len(calls)} model calls"
        line = f"{what} · {seconds:.1f} s · prompt ~{prompt:,} tokens" + (f" · {out:,} tokens out" if out else "")
        self.spinner.update(text=Text(line, style="cyan"))
        if not self.verbose:
            return self.spinner
        tail = "\n".join(terminal_safe(str(calls[0]["text"])).splitlines()[-TAIL_LINES:])
        return Group(Text(tail, style="dim"), self.spinner) if tail else self.spinner
