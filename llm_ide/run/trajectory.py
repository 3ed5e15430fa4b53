from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from llm_ide import __version__
from llm_ide.state.graph_state import empty_usage

FORMAT = "llm-ide-1"


def atomic_write(path: Path, text: str) -> None:
    """Write temp + rename: a reader (or a crash) never sees a half-written file."""
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


class Recorder:
    """The trajectory of one run: model calls appended to a side log as they happen (so that a killed run keeps
    them), the whole trajectory JSON rewritten atomically after every step."""

    def __init__(self, output_dir: Path, run_id: str) -> None:
        self.path = output_dir / f"{run_id}.traj.json"
        self.calls_path = output_dir / f"{run_id}.calls.jsonl"
        self._calls: dict[int, str] = {}
        self._nodes: dict[int, str] = {}
        if self.calls_path.exists():
            for line in self.calls_path.read_text(encoding="utf-8").splitlines():
                try:
                    call = json.loads(line)
                except json.JSONDecodeError:
                    continue
                self._calls[call["index"]] = line

    def record_call(self, call: dict[str, Any]) -> None:
        line = json.dumps(call, ensure_ascii=False)
        with self.calls_path.open("a", encoding="utf-8") as handle:
            handle.write(line + "\n")
        self._calls[call["index"]] = line

    def write(self, state: dict[str, Any], info: dict[str, Any]) -> None:
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
        operations = ",\n".join(self._operations(state.get("operations", [])))
        context = ",\n".join(_dumps(chunk) for chunk in state.get("code_context", []))
        calls = ",\n".join(line for index, line in sorted(self._calls.items()) if index < usage["api_calls"])
        body = _dumps(head)[:-1]
        atomic_write(
            self.path,
            f'{body},\n"operations": [\n{operations}\n],\n"code_context": [\n{context}\n],\n'
            f'"model_calls": [\n{calls}\n]}}\n',
        )

    def _operations(self, nodes: list[Any]) -> list[str]:
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


def _encode(value: Any) -> Any:
    if hasattr(value, "_asdict"):
        return value._asdict()
    raise TypeError(f"cannot encode {type(value).__name__} in a trajectory")


def _dumps(value: Any) -> str:
    return json.dumps(value._asdict() if hasattr(value, "_asdict") else value, ensure_ascii=False, default=_encode)
