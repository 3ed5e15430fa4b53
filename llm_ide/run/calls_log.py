"""The append-only log of a run's model calls: one gzip stream of JSON lines, flushed after each record."""

from __future__ import annotations

import json
import threading
import zlib
from pathlib import Path
from typing import Any

from llm_ide.fileio import atomic_write
from llm_ide.run.calls_read import GZIP, SHARED, plain_records, read_log
from llm_ide.text import shared_start

LEVEL = 6
PROMPT_KEYS = ("prompt", "messages")  # kept in the log only; the trajectory holds the rest of each call
MIN_SHARED = 1024  # a shorter shared start is written out


def encoded(records: list[dict[str, Any]], previous: str = "") -> tuple[bytes, str]:
    """The JSON lines of `records`, each prompt written as what follows the start it shares with the prompt before
    it (a prompt that grows by appending costs its growth, not its size: a 32 kB gzip window cannot see a 100 kB
    prompt back); and the last prompt."""
    lines = []
    for record in records:
        prompt = record.get("prompt")
        if isinstance(prompt, str):
            shared = shared_start(previous, prompt)
            if shared >= MIN_SHARED:
                record = {**record, "prompt": prompt[shared:], SHARED: shared}
            previous = prompt
        lines.append(json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n")
    return b"".join(lines), previous


class CallLog:
    """Records go to one gzip member, each followed by a sync flush so that a killed writer leaves every record
    readable (`zcat` reads it too). `close` completes the member; a later record starts a new one. Opening a log
    whose last member is incomplete (a killed run) rewrites it, once, as a complete member."""

    def __init__(self, path: Path, legacy: Path | None = None) -> None:
        self.path = path
        self._lock = threading.Lock()
        self._zip: Any = None
        self.existing, finished = read_log(path) if path.exists() else ([], True)
        if legacy is not None and legacy.exists():
            self.existing, finished = plain_records(legacy) + self.existing, False
        prompts = [record["prompt"] for record in self.existing if isinstance(record.get("prompt"), str)]
        self._prompt = prompts[-1] if prompts else ""  # the last prompt written, the next one's base
        if not finished:
            self._rewrite(self.existing)
        if legacy is not None:
            legacy.unlink(missing_ok=True)

    def append(self, record: dict[str, Any]) -> int:
        """The bytes appended to the file."""
        with self._lock:
            line, self._prompt = encoded([record], self._prompt)
            if self._zip is None:
                self._zip = zlib.compressobj(LEVEL, zlib.DEFLATED, GZIP)
            data = self._zip.compress(line) + self._zip.flush(zlib.Z_SYNC_FLUSH)
            with self.path.open("ab") as handle:
                handle.write(data)
        return len(data)

    def close(self) -> None:
        with self._lock:
            if self._zip is not None:
                with self.path.open("ab") as handle:
                    handle.write(self._zip.flush())
                self._zip = None

    def restart(self, records: list[dict[str, Any]]) -> None:
        """The log anew, holding `records` as one complete member (its file was lost)."""
        with self._lock:
            self._zip = None
            self._rewrite(records)

    def _rewrite(self, records: list[dict[str, Any]]) -> None:
        packer = zlib.compressobj(LEVEL, zlib.DEFLATED, GZIP)
        lines, self._prompt = encoded(records)
        atomic_write(self.path, [packer.compress(lines) + packer.flush()])


def without_prompt(call: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in call.items() if key not in PROMPT_KEYS}
