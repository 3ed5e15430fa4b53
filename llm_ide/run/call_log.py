"""A run's model calls as they happen (`Calls`): each appended to the run's calls log (`CallLog`: one gzip stream of
JSON lines, flushed after each record), kept without its prompt for the trajectory (run/trajectory.py), and its cost
noted."""

from __future__ import annotations

import json
import threading
import zlib
from pathlib import Path
from typing import Any

from llm_ide.fileio import atomic_write
from llm_ide.run.calls_read import GZIP, SHARED, plain_records, read_log
from llm_ide.state.graph_state import empty_usage
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


class Calls:
    """The run's calls: `<run>.calls.jsonl.gz` (every call, prompt, response, tokens and cost, appended once as it
    happens; a call repeated after a resume appears again: the last record of an index wins), each call's record
    without its prompt (`lines`, for the trajectory), and what each index's last call cost. A call paid for whose step
    never completed (Ctrl-C, a crash, a kill; a resume asks again) is not in the run's history, and its cost is no
    less spent: the trajectory's `Recorder.paid` adds such calls to the history's usage (`discarded_calls`)."""

    def __init__(self, path: Path, legacy: Path | None = None) -> None:
        self.log = CallLog(path, legacy)
        self.lines: dict[int, bytes] = {}
        self.written = 0  # the bytes appended to the log
        self._lock = threading.Lock()
        self.spent_at: dict[int, dict[str, Any]] = {}  # each index's last call: what it cost
        self.replaced = dict(empty_usage())  # the calls a later one of the same index replaced (asked again)
        for call in self.log.existing:
            self._note(call)

    def record(self, call: dict[str, Any]) -> None:
        appended = self.log.append(call)
        with self._lock:
            self.written += appended
        self._note(call)

    def _note(self, call: dict[str, Any]) -> None:
        index = call["index"]
        if index in self.spent_at:
            self.replaced = added(self.replaced, self.spent_at[index])
        self.spent_at[index] = spent(call)
        self.lines[index] = dumps(without_prompt(call))

    def rewrite(self) -> None:
        """The calls log again from the calls held in memory, without their prompts (its file was lost)."""
        self.log.restart([json.loads(line) for _, line in sorted(self.lines.items())])


def without_prompt(call: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in call.items() if key not in PROMPT_KEYS}


def spent(call: dict[str, Any]) -> dict[str, Any]:
    """A call record's usage, as the state counts a call."""
    return {
        "api_calls": 1,
        "input_tokens": call.get("prompt_tokens") or 0,
        "output_tokens": call.get("response_tokens") or 0,
        "cache_read_tokens": call.get("cache_read_tokens") or 0,
        "cache_write_tokens": call.get("cache_write_tokens") or 0,
        "cost": call.get("cost") or 0.0,
        "estimated_calls": int(bool(call.get("usage_estimated"))),
    }


def added(usage: dict[str, Any], more: dict[str, Any]) -> dict[str, Any]:
    return {key: value + more.get(key, 0) for key, value in usage.items()}


def _encode(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return value._asdict()
    raise TypeError(f"cannot encode {type(value).__name__} in a trajectory")


def dumps(value: Any) -> bytes:
    value = value._asdict() if hasattr(value, "_asdict") else value
    return json.dumps(value, ensure_ascii=False, default=_encode).encode("utf-8")
