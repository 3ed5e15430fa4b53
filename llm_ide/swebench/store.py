"""A batch folder's shared files: preds.json and exit_statuses.yaml, written atomically under a file lock."""

from __future__ import annotations

import fcntl
import json
import logging
import math
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from llm_ide.errors import UsageError
from llm_ide.fileio import atomic_write
from llm_ide.run.calls_read import read_log
from llm_ide.run.spent import spent_apart
from llm_ide.settings import load_yaml

PREDS = "preds.json"
STATUSES = "exit_statuses.yaml"
LOCK = ".llm-ide-batch.lock"
log = logging.getLogger("llm_ide.swebench")


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


def output_folder(output: Path) -> Path:
    """`output` made; a file there, or a folder that cannot be made, is the user's to fix (one line)."""
    try:
        output.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise UsageError(f"output folder {output}: cannot make it ({error.strerror}); give another --output") from None
    return output


def read_preds(output: Path) -> dict[str, dict[str, Any]]:
    """preds.json as instance_id → prediction; anything else (bad JSON, wrong shape) is an error, never overwritten."""
    path = output / PREDS
    if not path.exists():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError) as error:
        raise StoreError(f"{path} is not valid JSON ({error}); fix or move it away") from None
    if isinstance(data, list):
        ids = [pred.get("instance_id") if isinstance(pred, dict) else None for pred in data]
        data = dict(zip(ids, data, strict=True))
    if not isinstance(data, dict):
        raise StoreError(f"{path}: expected an object of instance_id → prediction, got {type(data).__name__}")
    for key, pred in data.items():
        if not (
            isinstance(pred, dict)
            and isinstance(key, str)
            and pred.get("instance_id") == key
            and isinstance(pred.get("model_patch"), str | None)
            and isinstance(pred.get("model_name_or_path", ""), str)
        ):
            raise StoreError(
                f"{path}: entry {str(key)[:80]!r} is not a prediction (an object with this instance_id, a "
                "model_name_or_path and a model_patch string); fix or move the file away"
            )
    return data


def statuses_from_trajectories(output: Path) -> dict[str, dict[str, Any]]:
    """Each instance's last outcome, as its trajectory saved it (to rebuild a lost or corrupt exit_statuses.yaml)."""
    instances: dict[str, dict[str, Any]] = {}
    for path in sorted(output.glob("*/*.traj.json")):
        try:
            info = json.loads(path.read_text(encoding="utf-8"))["info"]
            instance_id = info["run_id"]
        except (OSError, ValueError, KeyError, TypeError):
            continue
        if path.parent.name != instance_id or not info.get("exit_status"):
            continue
        stats, apart = info.get("model_stats") or {}, spent_apart(info)
        instances[instance_id] = {
            "exit_status": info["exit_status"],
            "cost": float(stats.get("cost", 0.0)) + apart["cost"],
            "api_calls": int(stats.get("api_calls", 0)),
            **({"calls_apart": apart["api_calls"]} if apart["api_calls"] else {}),
            "patch_lines": str(info.get("submission") or "").count("\n"),
            "trajectory": str(path.relative_to(output)),
        }
    return instances


def read_statuses(output: Path) -> dict[str, Any]:
    path = output / STATUSES
    if not path.exists():
        return {}
    try:
        data = load_yaml(path.read_text(encoding="utf-8"), yaml.SafeLoader) or {}
        instances = data.get("instances") or {}
        if not isinstance(instances, dict) or not all(
            isinstance(info, dict) and isinstance(info.get("exit_status"), str) for info in instances.values()
        ):
            raise ValueError("`instances` is not a mapping of instance id → exit_status")
        return instances
    except (OSError, ValueError, AttributeError, yaml.YAMLError) as error:
        log.warning("%s is corrupt (%s); rebuilt from the instances' trajectories", path, " ".join(str(error).split()))
        return statuses_from_trajectories(output)


@dataclass
class OutputStore:
    """preds.json and exit_statuses.yaml of a batch directory, updated read-modify-write under a file lock."""

    output: Path

    def __post_init__(self) -> None:
        output_folder(self.output)

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

    def spent(self) -> float:
        """What the batch's runs in this folder spent, as exit_statuses.yaml records it (a batch's cost limit counts
        it: a rerun goes on with what is left)."""
        with file_lock(self.lock):
            costs = [info.get("cost") for info in read_statuses(self.output).values()]
        return sum(cost for cost in costs if isinstance(cost, int | float) and math.isfinite(cost) and cost > 0)

    def call_cost(self) -> float:
        """What a model call of the batch's earlier runs cost: the dearest of their means (0 when none is known)."""
        with file_lock(self.lock):
            infos = read_statuses(self.output).values()
        means = [info["cost"] / all_calls(info) for info in infos if priced_calls(info)]
        return max((mean for mean in means if math.isfinite(mean)), default=0.0)

    def record_status(self, instance_id: str, exit_status: str, **details: Any) -> None:
        self.write_statuses(lambda instances: instances | {instance_id: {"exit_status": str(exit_status), **details}})

    def remove_status(self, instance_id: str) -> None:
        self.write_statuses(lambda instances: {iid: info for iid, info in instances.items() if iid != instance_id})

    def write_statuses(self, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        with file_lock(self.lock):
            path = self.output / STATUSES
            instances = change(read_statuses(self.output))
            by_status: dict[str, list[str]] = {}
            for iid, info in sorted(instances.items()):
                by_status.setdefault(info["exit_status"], []).append(iid)
            data = {"instances_by_exit_status": dict(sorted(by_status.items())), "instances": instances}
            atomic_write(path, yaml.safe_dump(data, sort_keys=False, allow_unicode=True))


def unrecorded_spend(output: Path, instance_ids: list[str], threads: Mapping[str, Mapping[str, Any]]) -> float:
    """What the instances' earlier runs paid beyond what exit_statuses.yaml holds for them (a batch killed mid-run
    recorded no outcome): each one's calls log, or its thread's last checkpoint (a Ray node kept the log)."""
    statuses = read_statuses(output) if output.is_dir() else {}
    total = 0.0
    for instance_id in instance_ids:
        log_path = output / instance_id / f"{instance_id}.calls.jsonl.gz"
        logged = sum(call.get("cost") or 0.0 for call in read_log(log_path)[0]) if log_path.is_file() else 0.0
        recorded = statuses.get(instance_id, {}).get("cost")
        paid = max(logged, thread_cost(threads.get(instance_id, {})))
        total += max(0.0, paid - (recorded if isinstance(recorded, int | float) else 0.0))
    return total


def thread_cost(values: Mapping[str, Any]) -> float:
    """A thread's spend at its last checkpoint: its own calls and its variants' (a navigator's)."""
    usages = [values.get("usage"), *(value.get("usage") for value in values.values() if isinstance(value, Mapping))]
    return sum(float(usage.get("cost") or 0.0) for usage in usages if isinstance(usage, Mapping))


def priced_calls(info: dict[str, Any]) -> bool:
    cost, calls = info.get("cost"), info.get("api_calls")
    return isinstance(cost, int | float) and cost > 0 and isinstance(calls, int) and all_calls(info) > 0


def all_calls(info: dict[str, Any]) -> int:
    """An instance's model calls: the driver's and those of its variants kept apart (a navigator's)."""
    apart = info.get("calls_apart")
    return info["api_calls"] + (apart if isinstance(apart, int) and apart > 0 else 0)
