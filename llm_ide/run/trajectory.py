"""A run's trajectory (`Recorder`): its info, operations and code context, and its model calls without their prompts
(the calls log holds them: run/call_log.py), rewritten as the run grows; `load_trajectory` puts the prompts back."""

from __future__ import annotations

import json
import threading
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_ide.fileio import atomic_write
from llm_ide.run.call_log import PROMPT_KEYS, Calls, added, dumps
from llm_ide.run.calls_read import read_log
from llm_ide.state.graph_state import empty_usage
from llm_ide.state.operations import node_record
from llm_ide.version import __version__

FORMAT = "llm-ide-1"


GROWTH, GAP = 1.2, 3  # the trajectory is rewritten when the run has 20% more operations, and 3, than when last written


class Recorder:
    """The trajectory of one run, `<run>.traj.json`: info, operations, code context and the model calls without their
    prompts (`calls`: the run's calls, whose log holds them; `load_trajectory` puts them back). It is rewritten by a
    background thread, in order, whenever the run has grown by a fifth and by 3 steps (after steps 1, 4, 7, 10, 13,
    16, 20, 24, 29, …) and at the end (`save`), atomically: the bytes written stay within a constant multiple of its
    size, growing with the steps, not their square. `written` counts them (rewrites and log records), the same for the
    same run whatever the threads' timing. `extra_info`: what the run's variants add to the info from the state."""

    def __init__(
        self, output_dir: Path, run_id: str, extra_info: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    ) -> None:
        self.extra_info = extra_info or (lambda state: {})
        self.path = output_dir / f"{run_id}.traj.json"
        self.calls_path = output_dir / f"{run_id}.calls.jsonl.gz"
        self.calls = Calls(self.calls_path, legacy=output_dir / f"{run_id}.calls.jsonl")
        self._nodes: dict[int, bytes] = {}
        self._due = 0  # the operations at which the next rewrite is due
        self._rewritten = 0
        self._changed = threading.Condition()
        self._queue: deque[tuple[dict[str, Any], dict[str, Any], list[bytes]]] = deque()
        self._busy = False
        self._error: BaseException | None = None
        self._writer: threading.Thread | None = None
        self._config: tuple[Any, bytes] = (None, b"null")  # the run's settings and their JSON (see `_info`)

    @property
    def written(self) -> int:
        return self.calls.written + self._rewritten

    def write(self, state: dict[str, Any], info: dict[str, Any], *, force: bool = False) -> None:
        """Queue the state for the writer thread; between the scheduled rewrites (see the class) nothing is written
        unless `force`."""
        steps = state.get("n_operations", 0)
        if not force and steps < self._due:
            return
        self._due = max(steps * GROWTH, steps + GAP) if steps else 0
        with self._changed:
            self._raise()
            calls = [line for index, line in sorted(self.calls.lines.items()) if index < state_calls(state)]
            self._queue.append((dict(state), {**info, "calls_log": self.calls_path.name}, calls))
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=f"trajectory-{self.path.name}", daemon=True)
                self._writer.start()
            self._changed.notify_all()

    def save(self, state: dict[str, Any], info: dict[str, Any]) -> None:
        """Write the trajectory now and wait until it is on disk; the calls log's gzip member is completed."""
        self.calls.log.close()
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
                    self._rewritten += written
            except BaseException as error:  # handed to the agent's thread at its next write
                self._error = error
            with self._changed:
                self._busy = False
                self._changed.notify_all()

    def paid(self, state: dict[str, Any]) -> dict[str, Any]:
        """The state's usage, and the calls paid for outside its history (`discarded_calls`; in its cost and tokens)."""
        usage = dict(state.get("usage") or empty_usage())
        outside = self.calls.replaced
        for index, figures in self.calls.spent_at.items():
            if index >= usage["api_calls"]:  # made at a step that never completed
                outside = added(outside, figures)
        if not outside["api_calls"]:
            return usage
        total = added(usage, outside)
        return {**total, "api_calls": usage["api_calls"], "discarded_calls": outside["api_calls"]}

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
            b'{"format": ' + dumps(FORMAT) + b', "info": ',
            self._info(head),
            b', "task": ' + dumps(state.get("task", "")),
            b',\n"operations": [\n',
            b",\n".join(self._operations(state.get("operations", []))),
            b'\n],\n"code_context": [\n',
            dumps([chunk._asdict() for chunk in state.get("code_context", [])])[1:-1],
            b'\n],\n"model_calls": [\n',
            b",\n".join(calls),
            b"\n]}\n",
        ]
        atomic_write(self.path, parts)
        return sum(len(part) for part in parts)

    def _info(self, info: dict[str, Any]) -> bytes:
        """`dumps(info)`, the run's settings encoded once (its info holds the same dict all run long, never changed in
        place: at the first steps a fifth of a rewrite's CPU); str keys, joined as json joins a dict's items."""
        config = info.get("config")
        self._config = self._config if self._config[0] is config else (config, dumps(config))
        items = (dumps(k) + b": " + (self._config[1] if v is config else dumps(v)) for k, v in info.items())
        return b"{" + b", ".join(items) + b"}"

    def _operations(self, nodes: list[Any]) -> list[bytes]:
        """Each node encoded once it is final (its reflection arrives with the next node); the newest every time."""
        encoded = []
        for position, node in enumerate(nodes):
            text = self._nodes.get(node.id) if position < len(nodes) - 1 else None
            if text is None:
                text = dumps(node_record(node))
                if position < len(nodes) - 1:
                    self._nodes[node.id] = text
            encoded.append(text)
        return encoded


def state_calls(state: dict[str, Any]) -> int:
    return (state.get("usage") or empty_usage())["api_calls"]


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
