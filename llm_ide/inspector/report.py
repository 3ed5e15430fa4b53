"""A SWE-bench batch folder → BatchView (and one inspector page per instance)."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml

from llm_ide.errors import UsageError
from llm_ide.fileio import file_name_problem
from llm_ide.inspector.load import TrajectoryError, load_run
from llm_ide.inspector.model import BatchView, InstanceRow
from llm_ide.inspector.page import run_page, write_page
from llm_ide.priced import apart_priced, run_priced
from llm_ide.settings import load_yaml

STATUSES = "exit_statuses.yaml"


class ReportError(UsageError):
    """A folder the report cannot read as a batch."""


# report keys, weakest first: a later one wins (the harness's completed ids are resolved or unresolved)
VERDICT_KEYS = (
    ("completed_ids", "unresolved"),
    ("unresolved_ids", "unresolved"),
    ("empty_patch_ids", "empty_patch"),
    ("error_ids", "error"),
    ("resolved_ids", "resolved"),
)


def find_evaluation(run_dir: Path) -> Path | None:
    """The batch's evaluation: `report.json` (llm-ide evaluate) or a swebench harness summary, newest first."""
    candidates = sorted(run_dir.rglob("*.json"), key=lambda p: p.stat().st_mtime, reverse=True)
    for path in candidates:
        if path.name == "preds.json" or path.name.endswith(".traj.json"):
            continue
        if verdicts(path) is not None:
            return path
    return None


def verdicts(path: Path) -> dict[str, tuple[str, str]] | None:
    """Each evaluated instance's (verdict, error detail) in an evaluation report; None when the file is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("resolved_ids"), list):
        return None
    details = data.get("instances") if isinstance(data.get("instances"), dict) else {}
    found: dict[str, tuple[str, str]] = {}
    for key, verdict in VERDICT_KEYS:
        for instance_id in data.get(key) or []:
            detail = (details.get(instance_id) or {}).get("detail", "") if verdict == "error" else ""
            found[str(instance_id)] = (verdict, " ".join(str(detail or "").split()))
    return found


def load_batch(run_dir: Path, evaluation: Path | None = None) -> tuple[BatchView, dict[str, Path]]:
    """The rows of a batch and, per instance, the trajectory that backs its inspector page."""
    statuses_path = run_dir / STATUSES
    if evaluation and not evaluation.is_file():
        raise ReportError(f"evaluation report not found: {evaluation}")
    if not statuses_path.is_file():
        raise ReportError(f"{run_dir}: not a batch folder ({STATUSES} is missing)")
    try:
        statuses: Any = (load_yaml(statuses_path.read_text(encoding="utf-8"), yaml.SafeLoader) or {}).get(
            "instances"
        ) or {}
    except (yaml.YAMLError, AttributeError, UnicodeDecodeError) as error:
        raise ReportError(f"{statuses_path}: unreadable ({' '.join(str(error).split())})") from None
    evaluation = evaluation or find_evaluation(run_dir)
    graded = verdicts(evaluation) if evaluation else None
    if evaluation and graded is None:
        raise ReportError(f"{evaluation}: not an evaluation report (no `resolved_ids`)")
    if not isinstance(statuses, dict):
        raise ReportError(f"{statuses_path}: `instances` is not a mapping of instance ids")
    rows, trajectories = [], {}
    for instance_id, info in sorted(statuses.items(), key=lambda item: str(item[0])):
        info = info if isinstance(info, dict) else {}
        trajectory = inside_batch(run_dir, statuses_path, instance_id, info.get("trajectory"))
        steps, prices = 0, {}
        if trajectory.is_file():
            trajectories[instance_id] = trajectory
            steps, prices = trajectory_facts(trajectory)
        verdict, error = (graded or {}).get(instance_id, (None, ""))
        rows.append(
            InstanceRow(
                instance_id=instance_id,
                exit_status=str(info.get("exit_status") or ""),
                steps=steps,
                cost=number(info.get("cost")),
                **prices,
                evaluation=verdict,
                error=error,
            )
        )
    title = f"{run_dir.resolve().name}" + (f" · evaluation {evaluation.name}" if evaluation else "")
    return BatchView(title=title, rows=rows, evaluated=graded is not None), trajectories


def inside_batch(run_dir: Path, statuses_path: Path, instance_id: Any, trajectory: Any) -> Path:
    """The instance's trajectory; an id that cannot name a page, or a trajectory outside the batch folder, is a
    ReportError (before anything is written)."""
    if problem := file_name_problem(instance_id):
        raise ReportError(f"{statuses_path}: instance id {str(instance_id)[:80]!r}: {problem}")
    path = run_dir / str(trajectory or f"{instance_id}/{instance_id}.traj.json")
    if not path.resolve().is_relative_to(run_dir.resolve()):
        where = str(trajectory)[:200]
        raise ReportError(f"{statuses_path}: {instance_id}: its trajectory {where} is outside {run_dir}")
    return path


def number(value: Any) -> float:
    """A cost as the batch recorded it; what is not a finite number counts as 0."""
    try:
        found = float(value or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return found if math.isfinite(found) else 0.0


def trajectory_facts(path: Path) -> tuple[int, dict[str, Any]]:
    """A trajectory's steps, and whether its driver's model and what its variants paid apart had a price."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        info = data.get("info") or {}
        prices = {"priced": run_priced(info), "apart": apart_priced(info)}
        return int(info.get("n_operations") or len(data.get("operations") or [])), prices
    except (OSError, ValueError, TypeError, AttributeError):
        return 0, {}


def write_instance_pages(batch: BatchView, trajectories: dict[str, Path], folder: Path, relative_to: Path) -> list[str]:
    """One inspector page per instance; the rows link to them. Returns the problems met (unreadable trajectories)."""
    problems = []
    for row in batch.rows:
        path = trajectories.get(row.instance_id)
        if path is None:
            continue
        try:
            page = write_page(run_page(load_run(path)), folder / f"{row.instance_id}.html")
        except TrajectoryError as error:
            problems.append(str(error))
            continue
        row.page = page.relative_to(relative_to).as_posix()
    return problems
