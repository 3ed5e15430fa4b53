from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import cache

from llm_ide.prompting import render_source
from llm_ide.settings import bundled_yaml

OnOutput = Callable[[bytes], None] | None  # told a command's output as it arrives


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
