from __future__ import annotations

import json
import threading
from pathlib import Path
from typing import Any

from llm_ide import __version__
from llm_ide.fileio import atomic_write
from llm_ide.state.graph_state import empty_usage

FORMAT = "llm-ide-1"


class Recorder:
    """The trajectory of one run: model calls appended to a side log as they happen (so that a killed run keeps
    them), the whole trajectory JSON rewritten atomically after every step — by a background thread, so that the
    agent's step does not wait for it (`write` hands over the newest state; `save` writes and waits)."""

    def __init__(self, output_dir: Path, run_id: str) -> None:
        self.path = output_dir / f"{run_id}.traj.json"
        self.calls_path = output_dir / f"{run_id}.calls.jsonl"
        self._calls: dict[int, bytes] = {}
        self._nodes: dict[int, bytes] = {}
        self._changed = threading.Condition()
        self._latest: tuple[dict[str, Any], dict[str, Any], list[bytes]] | None = None
        self._busy = False
        self._error: BaseException | None = None
        self._writer: threading.Thread | None = None
        if self.calls_path.exists():
            for line in self.calls_path.read_text(encoding="utf-8").splitlines():
                try:
                    call = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self._calls[call["index"]] = line.encode("utf-8")

    def record_call(self, call: dict[str, Any]) -> None:
        line = json.dumps(call, ensure_ascii=False)
        with self.calls_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self._calls[call["index"]] = line.encode("utf-8")

    def write(self, state: dict[str, Any], info: dict[str, Any]) -> None:
        """Hand the newest state to the writer thread (a newer one replaces a snapshot not yet written)."""
        with self._changed:
            self._raise()
            calls = [line for index, line in sorted(self._calls.items()) if index < state_calls(state)]
            self._latest = (dict(state), {**info}, calls)
            if self._writer is None:
                self._writer = threading.Thread(target=self._run, name=f"trajectory-{self.path.name}", daemon=True)
                self._writer.start()
            self._changed.notify_all()

    def save(self, state: dict[str, Any], info: dict[str, Any]) -> None:
        """Write the trajectory now and wait until it is on disk."""
        self.write(state, info)
        with self._changed:
            self._changed.wait_for(lambda: (self._latest is None and not self._busy) or self._error is not None)
            self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            error, self._error = self._error, None
            raise error

    def _run(self) -> None:
        while True:
            with self._changed:
                self._changed.wait_for(lambda: self._latest is not None)
                (state, info, calls), self._latest, self._busy = self._latest, None, True
            try:
                self._write_now(state, info, calls)
            except BaseException as error:  # handed to the agent's thread at its next write
                self._error = error
            with self._changed:
                self._busy = False
                self._changed.notify_all()

    def _write_now(self, state: dict[str, Any], info: dict[str, Any], calls: list[bytes]) -> None:
        usage = state.get("usage") or empty_usage()
        head = {
            "format": FORMAT,
            "info": {
                "version": __version__,
                "model_stats": dict(usage),
                "n_operations": state.get("n_operations", 0),
                "elapsed": round(state.get("elapsed", 0.0), 3),
                **info,
            },
            "task": state.get("task", ""),
        }
        atomic_write(
            self.path,
            [
                _dumps(head)[:-1],
                b',\n"operations": [\n',
                b",\n".join(self._operations(state.get("operations", []))),
                b'\n],\n"code_context": [\n',
                _dumps([chunk._asdict() for chunk in state.get("code_context", [])])[1:-1],
                b'\n],\n"model_calls": [\n',
                b",\n".join(calls),
                b"\n]}\n",
            ],
        )

    def _operations(self, nodes: list[Any]) -> list[bytes]:
        """Each node encoded once it is final (its reflection arrives with the next node); the newest every time."""
        encoded = []
        for position, node in enumerate(nodes):
            text = self._nodes.get(node.id) if position < len(nodes) - 1 else None
            if text is None:
                text = _dumps(node)
                if position < len(nodes) - 1:
                    self._nodes[node.id] = text
            encoded.append(text)
        return encoded


def state_calls(state: dict[str, Any]) -> int:
    return (state.get("usage") or empty_usage())["api_calls"]


def _encode(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return value._asdict()
    raise TypeError(f"cannot encode {type(value).__name__} in a trajectory")


def _dumps(value: Any) -> bytes:
    value = value._asdict() if hasattr(value, "_asdict") else value
    return json.dumps(value, ensure_ascii=False, default=_encode).encode("utf-8")
