"""A batch folder's shared files: preds.json and exit_statuses.yaml, written atomically under a file lock."""

from __future__ import annotations

import fcntl
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llm_ide.errors import UsageError
from llm_ide.fileio import atomic_write

PREDS = "preds.json"
STATUSES = "exit_statuses.yaml"
LOCK = ".llm-ide-batch.lock"


class StoreError(UsageError, ValueError):
    """preds.json or exit_statuses.yaml cannot be read."""


@contextmanager
def file_lock(path: Path) -> Iterator[None]:
    """An exclusive flock on `path`: excludes other threads (each opens its own description) and processes."""
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def read_preds(output: Path) -> dict[str, dict[str, Any]]:
    path = output / PREDS
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise StoreError(f"{path} is not valid JSON ({error}); fix or move it away") from None
    if isinstance(data, list):
        data = {pred["instance_id"]: pred for pred in data if isinstance(pred, dict) and "instance_id" in pred}
    if not isinstance(data, dict):
        raise StoreError(f"{path}: expected an object of instance_id → prediction")
    return data


def read_statuses(output: Path) -> dict[str, Any]:
    path = output / STATUSES
    if not path.exists():
        return {}
    try:
        data = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except (yaml.YAMLError, UnicodeDecodeError) as error:
        raise StoreError(f"{path} is not valid YAML ({' '.join(str(error).split())}); fix or move it away") from None
    if not isinstance(data, dict) or not isinstance(data.get("instances") or {}, dict):
        raise StoreError(f"{path}: expected `instances:` mapping ids to exit statuses; fix or move it away")
    return data


@dataclass
class OutputStore:
    """preds.json and exit_statuses.yaml of a batch directory, updated read-modify-write under a file lock."""

    output: Path

    def __post_init__(self) -> None:
        self.output.mkdir(parents=True, exist_ok=True)

    @property
    def lock(self) -> Path:
        return self.output / LOCK

    def existing(self) -> set[str]:
        with file_lock(self.lock):
            return set(read_preds(self.output))

    def add_prediction(self, instance_id: str, model: str, patch: str) -> None:
        with file_lock(self.lock):
            preds = read_preds(self.output)
            preds[instance_id] = {"instance_id": instance_id, "model_name_or_path": model, "model_patch": patch}
            atomic_write(self.output / PREDS, json.dumps(preds, indent=2) + "\n")

    def remove_prediction(self, instance_id: str) -> None:
        with file_lock(self.lock):
            preds = read_preds(self.output)
            if preds.pop(instance_id, None) is not None:
                atomic_write(self.output / PREDS, json.dumps(preds, indent=2) + "\n")

    def record_status(self, instance_id: str, exit_status: str, **details: Any) -> None:
        with file_lock(self.lock):
            path = self.output / STATUSES
            instances: dict[str, Any] = read_statuses(self.output).get("instances") or {}
            instances[instance_id] = {"exit_status": str(exit_status), **details}
            by_status: dict[str, list[str]] = {}
            for iid, info in sorted(instances.items()):
                by_status.setdefault(info["exit_status"], []).append(iid)
            data = {"instances_by_exit_status": dict(sorted(by_status.items())), "instances": instances}
            atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))
