"""A command's output as the agent gets it: read from its pipe as it arrives (`pump_output`; `drain` after a kill)
into a cap that keeps its head and tail (`OutputCap`), and the notes on it (the `environment.messages` templates of the
bundled default config: elision line, timeout note)."""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from llm_ide.prompting import render_source
from llm_ide.settings import bundled_yaml

OnOutput = Callable[[bytes], None] | None  # told a command's output as it arrives
READ_CHUNK = 1 << 16
EXIT_GRACE = 0.2  # seconds to drain output after the shell exits while a background child still holds the pipe


def render(template: str, **values: object) -> str:
    return render_source(template, **values)


@cache
def default_messages() -> dict[str, str]:
    """The `environment.messages` templates of the bundled default config (elision line, timeout note)."""
    return dict(bundled_yaml("default.yaml")["environment"]["messages"])


def append_note(text: str, note: str) -> str:
    """`note` on a line of its own after `text`."""
    return text + note if not text or text.endswith("\n") else f"{text}\n{note}"


@dataclass
class OutputCap:
    """Keeps the first and last `max_bytes / 2` bytes of a stream and counts the rest, in bounded memory; each piece
    is also handed to `on_output` as it arrives (a live display of the command)."""

    max_bytes: int
    on_output: OnOutput = None
    total: int = 0
    head: bytearray = field(default_factory=bytearray)
    tail: bytearray = field(default_factory=bytearray)

    @property
    def head_limit(self) -> int:
        return self.max_bytes // 2

    @property
    def tail_limit(self) -> int:
        return self.max_bytes - self.head_limit

    def feed(self, data: bytes) -> None:
        if self.on_output is not None:
            self.on_output(data)
        self.total += len(data)
        room = self.head_limit - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        self.tail += data[-self.tail_limit :] if len(data) > self.tail_limit else data
        if len(self.tail) > 2 * self.tail_limit:
            del self.tail[: len(self.tail) - self.tail_limit]

    @property
    def truncated(self) -> bool:
        return self.total > self.max_bytes

    def text(self, elided_template: str | None = None) -> str:
        tail = bytes(self.tail[-self.tail_limit :]) if self.tail_limit else b""
        if not self.truncated:
            return (bytes(self.head) + tail).decode("utf-8", errors="replace")
        note = render(
            elided_template or default_messages()["elided"],
            elided_bytes=self.total - len(self.head) - len(tail),
            total_bytes=self.total,
        )
        return append_note(bytes(self.head).decode("utf-8", errors="replace"), note) + tail.decode(
            "utf-8", errors="replace"
        )


def pump_output(fd: int, cap: OutputCap, process: subprocess.Popen[bytes], deadline: float) -> bool:
    """Streams `fd` into `cap` until EOF, the deadline, or shortly after `process` exits. True when the deadline hit."""
    poller = select.poll()
    poller.register(fd, select.POLLIN | select.POLLHUP | select.POLLERR)
    exited_at: float | None = None
    while True:
        now = time.monotonic()
        if exited_at is None and process.poll() is not None:
            exited_at = now
        if exited_at is not None and now - exited_at > EXIT_GRACE:
            return False
        if now >= deadline:
            return exited_at is None
        if poller.poll(min(deadline - now, 0.05) * 1000):
            data = os.read(fd, READ_CHUNK)
            if not data:
                return False
            cap.feed(data)


def drain(fd: int, cap: OutputCap, seconds: float) -> None:
    """Reads what is left in the pipe after a kill (bounded in time: an escaped process may still hold it)."""
    end = time.monotonic() + seconds
    while (left := end - time.monotonic()) > 0 and select.select([fd], [], [], left)[0]:
        data = os.read(fd, READ_CHUNK)
        if not data:
            return
        cap.feed(data)
