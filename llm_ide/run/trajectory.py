"""A run's record as it runs: the append-only log of its model calls (`CallLog`: one gzip stream of JSON lines,
flushed after each record) and its trajectory (`Recorder`), which holds the calls without their prompts."""

from __future__ import annotations

import json
import threading
import zlib
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_ide.fileio import atomic_write
from llm_ide.run.calls_read import GZIP, SHARED, plain_records, read_log
from llm_ide.state.graph_state import empty_usage
from llm_ide.state.operations import node_record
from llm_ide.text import shared_start
from llm_ide.version import __version__

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


FORMAT = "llm-ide-1"


GROWTH, GAP = 1.2, 3  # the trajectory is rewritten when the run has 20% more operations, and 3, than when last written


class Recorder:
    """The trajectory of one run, in two files.

    `<run>.calls.jsonl.gz`: every model call (prompt, response, tokens, cost) appended once, as it happens, to one
    gzip stream flushed after each call (a killed run keeps its calls; `zcat` reads it). A call repeated after a
    resume appears again: the last record of an index wins.
    `<run>.traj.json`: info, operations, code context and the model calls without their prompts (the log holds
    them; `load_trajectory` puts them back). It is rewritten by a background thread, in order, whenever the run has
    grown by a fifth and by 3 steps (after steps 1, 4, 7, 10, 13, 16, 20, 24, 29, …) and at the end (`save`),
    atomically: the bytes written stay within a constant multiple of its size, growing with the steps, not their square.
    `written` counts them (rewrites and log records), the same for the same run whatever the threads' timing.
    `extra_info`: what the run's variants add to the info from the state.
    A call paid for whose step never completed (Ctrl-C, a crash, a kill; a resume asks again) is not in the run's
    history, and its cost is no less spent: `paid` adds such calls to the history's usage (`discarded_calls`)."""

    def __init__(
        self, output_dir: Path, run_id: str, extra_info: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    ) -> None:
        self.extra_info = extra_info or (lambda state: {})
        self.path = output_dir / f"{run_id}.traj.json"
        self.calls_path = output_dir / f"{run_id}.calls.jsonl.gz"
        self._calls: dict[int, bytes] = {}
        self._nodes: dict[int, bytes] = {}
        self._log = CallLog(self.calls_path, legacy=output_dir / f"{run_id}.calls.jsonl")
        self._due = 0  # the operations at which the next rewrite is due
        self.written = 0
        self._changed = threading.Condition()
        self._queue: deque[tuple[dict[str, Any], dict[str, Any], list[bytes]]] = deque()
        self._busy = False
        self._error: BaseException | None = None
        self._writer: threading.Thread | None = None
        self._config: tuple[Any, bytes] = (None, b"null")  # the run's settings and their JSON (see `_info`)
        self._spent: dict[int, dict[str, Any]] = {}  # each index's last call: what it cost
        self._replaced = dict(empty_usage())  # the calls a later one of the same index replaced (asked again)
        for call in self._log.existing:
            self._note(call)

    def record_call(self, call: dict[str, Any]) -> None:
        appended = self._log.append(call)
        with self._changed:
            self.written += appended
        self._note(call)

    def _note(self, call: dict[str, Any]) -> None:
        index = call["index"]
        if index in self._spent:
            self._replaced = added(self._replaced, self._spent[index])
        self._spent[index] = spent(call)
        self._calls[index] = _dumps(without_prompt(call))

    def paid(self, state: dict[str, Any]) -> dict[str, Any]:
        """The state's usage, and the calls paid for outside its history (`discarded_calls`; in its cost and tokens)."""
        usage = dict(state.get("usage") or empty_usage())
        outside = self._replaced
        for index, figures in self._spent.items():
            if index >= usage["api_calls"]:  # made at a step that never completed
                outside = added(outside, figures)
        if not outside["api_calls"]:
            return usage
        total = added(usage, outside)
        return {**total, "api_calls": usage["api_calls"], "discarded_calls": outside["api_calls"]}

    def rewrite_calls(self) -> None:
        """The calls log again from the calls held in memory, without their prompts (its file was lost)."""
        self._log.restart([json.loads(line) for _, line in sorted(self._calls.items())])

    def write(self, state: dict[str, Any], info: dict[str, Any], *, force: bool = False) -> None:
        """Queue the state for the writer thread; between the scheduled rewrites (see the class) nothing is written
        unless `force`."""
        steps = state.get("n_operations", 0)
        if not force and steps < self._due:
            return
        self._due = max(steps * GROWTH, steps + GAP) if steps else 0
        with self._changed:
            self._raise()
            calls = [line for index, line in sorted(self._calls.items()) if index < state_calls(state)]
            self._queue.append((dict(state), {**info, "calls_log": self.calls_path.name}, calls))
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=f"trajectory-{self.path.name}", daemon=True)
                self._writer.start()
            self._changed.notify_all()

    def save(self, state: dict[str, Any], info: dict[str, Any]) -> None:
        """Write the trajectory now and wait until it is on disk; the calls log's gzip member is completed."""
        self._log.close()
        self.write(state, info, force=True)
        with self._changed:
            self._changed.wait_for(lambda: (not self._queue and not self._busy) or self._error is not None)
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: bool(self._queue))
                (state, info, calls), self._busy = self._queue.popleft(), True
            try:
                written = self._write_now(state, info, calls)
                with self._changed:
                    self.written += written
            except BaseException as error:  # handed to the agent's thread at its next write
                self._error = error
            with self._changed:
                self._busy = False
                self._changed.notify_all()

    def _write_now(self, state: dict[str, Any], info: dict[str, Any], calls: list[bytes]) -> int:
        head = {
            "version": __version__,
            "model_stats": self.paid(state),
            "n_operations": state.get("n_operations", 0),
            "elapsed": round(state.get("elapsed", 0.0), 3),
            **info,
            **self.extra_info(state),
        }
        parts = [
            b'{"format": ' + _dumps(FORMAT) + b', "info": ',
            self._info(head),
            b', "task": ' + _dumps(state.get("task", "")),
            b',\n"operations": [\n',
            b",\n".join(self._operations(state.get("operations", []))),
            b'\n],\n"code_context": [\n',
            _dumps([chunk._asdict() for chunk in state.get("code_context", [])])[1:-1],
            b'\n],\n"model_calls": [\n',
            b",\n".join(calls),
            b"\n]}\n",
        ]
        atomic_write(self.path, parts)
        return sum(len(part) for part in parts)

    def _info(self, info: dict[str, Any]) -> bytes:
        """`_dumps(info)`, the run's settings encoded once (its info holds the same dict all run long, never changed in
        place: at the first steps a fifth of a rewrite's CPU); str keys, joined as json joins a dict's items."""
        config = info.get("config")
        self._config = self._config if self._config[0] is config else (config, _dumps(config))
        items = (_dumps(k) + b": " + (self._config[1] if v is config else _dumps(v)) for k, v in info.items())
        return b"{" + b", ".join(items) + b"}"

    def _operations(self, nodes: list[Any]) -> list[bytes]:
        """Each node encoded once it is final (its reflection arrives with the next node); the newest every time."""
        encoded = []
        for position, node in enumerate(nodes):
            text = self._nodes.get(node.id) if position < len(nodes) - 1 else None
            if text is None:
                text = _dumps(node_record(node))
                if position < len(nodes) - 1:
                    self._nodes[node.id] = text
            encoded.append(text)
        return encoded


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


def state_calls(state: dict[str, Any]) -> int:
    return (state.get("usage") or empty_usage())["api_calls"]


def _encode(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return value._asdict()
    raise TypeError(f"cannot encode {type(value).__name__} in a trajectory")


def _dumps(value: Any) -> bytes:
    value = value._asdict() if hasattr(value, "_asdict") else value
    return json.dumps(value, ensure_ascii=False, default=_encode).encode("utf-8")


def load_trajectory(path: Path | str) -> dict[str, Any]:
    """A trajectory with each model call's prompt put back from the calls log beside it (when it is there)."""
    data, folder = json.loads(Path(path).read_text(encoding="utf-8")), Path(path).parent
    name = (data.get("info") or {}).get("calls_log") if isinstance(data, dict) else None  # no trajectory: as read
    if name and (folder / name).is_file():
        logged = {record["index"]: record for record in read_log(folder / name)[0]}
        for call in data.get("model_calls", []):
            record = logged.get(call.get("index"), {})
            call.update({key: record[key] for key in PROMPT_KEYS if key in record})
    return data
