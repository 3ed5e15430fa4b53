from __future__ import annotations

import json
import os
import tempfile
from dataclasses import asdict
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
        n_calls = usage["api_calls"]
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
            "operations": [asdict(node) for node in state.get("operations", [])],
            "code_context": [asdict(chunk) for chunk in state.get("code_context", [])],
        }
        calls = ",\n".join(line for index, line in sorted(self._calls.items()) if index < n_calls)
        text = json.dumps(head, ensure_ascii=False, indent=1)
        atomic_write(self.path, f'{text[:-2]},\n "model_calls": [\n{calls}\n ]\n}}\n')
