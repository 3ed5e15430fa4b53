"""`llm-ide evaluate --attempts`: every attempt's patch graded, not only the chosen one; pass@k (any attempt
resolved) beside the chosen patch's resolve rate shows the chooser's quality, and how often the execution signal (the
attempts its verification ranked best, when it narrowed the choice) picked patches the harness resolves."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from llm_ide.swebench.dataset import Instance, RowError
from llm_ide.swebench.evaluate import EvalReport, EvalResult, Evaluator


def run_info(run_folder: Path, instance_id: str) -> dict[str, Any]:
    path = run_folder / instance_id / f"{instance_id}.traj.json"
    try:
        return json.loads(path.read_text(encoding="utf-8")).get("info") or {}
    except (OSError, ValueError):
        return {}


def attempt_patches(run_folder: Path, instance_id: str) -> dict[int, str]:
    """Attempt → patch, from the instance's trajectory in a batch folder; {} for a run without attempts."""
    return {int(a["index"]): a.get("submission") or "" for a in run_info(run_folder, instance_id).get("attempts") or []}


def execution_pick(run_folder: Path, instance_id: str) -> list[int]:
    """The attempts execution ranked best, when it narrowed the choice ([]: it did not)."""
    return [int(index) for index in (run_info(run_folder, instance_id).get("choice") or {}).get("execution") or []]


@dataclass
class AttemptsReport:
    chosen: dict[str, str]  # instance → status of the chosen patch (preds.json)
    attempts: dict[str, dict[int, str]] = field(default_factory=dict)  # instance → attempt → status
    execution: dict[str, list[int]] = field(default_factory=dict)  # instance → attempts execution ranked best

    @property
    def k(self) -> int:
        return max((len(statuses) for statuses in self.attempts.values()), default=0) or 1  # a run without: its own

    def passed(self, instance_id: str) -> bool:
        statuses = self.attempts.get(instance_id) or {0: self.chosen[instance_id]}
        return any(status == "resolved" for status in statuses.values())

    def by_attempt(self, instance_id: str) -> dict[str, str]:
        return {str(index): status for index, status in sorted(self.attempts.get(instance_id, {}).items())}

    def execution_resolved(self, instance_id: str) -> bool:
        """Every attempt the execution signal picked was resolved."""
        statuses = self.attempts.get(instance_id, {})
        picked = self.execution.get(instance_id) or []
        return bool(picked) and all(statuses.get(index) == "resolved" for index in picked)

    def to_json(self) -> dict[str, Any]:
        total = len(self.chosen) or 1
        passed = sum(self.passed(i) for i in self.chosen)
        resolved = sum(status == "resolved" for status in self.chosen.values())
        narrowed = [i for i in self.chosen if self.execution.get(i)]
        right = sum(self.execution_resolved(i) for i in narrowed)
        return {
            "k": self.k,
            "pass_at_k": round(passed / total, 4),
            "pass_at_k_count": passed,
            "chosen_resolve_rate": round(resolved / total, 4),
            "chosen_resolved_count": resolved,
            "execution_narrowed": len(narrowed),
            "execution_resolved": right,
            "execution_resolved_rate": round(right / len(narrowed), 4) if narrowed else None,
            "instances": {
                i: {
                    "chosen": self.chosen[i],
                    "attempts": {str(k): s for k, s in sorted(self.attempts.get(i, {}).items())},
                    "execution": self.execution.get(i, []),
                }
                for i in sorted(self.chosen)
            },
        }


def evaluate_attempts(
    report: EvalReport,
    preds: dict[str, dict[str, Any]],
    instances: dict[str, Instance | RowError],
    run_folder: Path,
    evaluator: Evaluator,
    *,
    workers: int = 1,
    on_result: Callable[[EvalResult], None] | None = None,
) -> AttemptsReport:
    """Grades each attempt whose patch differs from the chosen one (an attempt with the chosen patch shares its
    result; identical attempts are graded once) in `<logs>/<instance>.attempt<N>/`."""
    chosen = {r.instance_id: r.status for r in report.results}
    out = AttemptsReport(chosen)
    jobs: dict[tuple[str, str], list[int]] = {}
    for instance_id in sorted(preds):
        patches = attempt_patches(run_folder, instance_id)
        out.execution[instance_id] = execution_pick(run_folder, instance_id)
        out.attempts[instance_id] = {}
        for index, patch in sorted(patches.items()):
            if patch == (preds[instance_id].get("model_patch") or ""):
                out.attempts[instance_id][index] = chosen.get(instance_id, "error")
            else:
                jobs.setdefault((instance_id, patch), []).append(index)
    lock = threading.Lock()

    def one(job: tuple[str, str]) -> None:
        instance_id, patch = job
        indices = jobs[job]
        result = evaluator.evaluate(instances.get(instance_id), f"{instance_id}.attempt{indices[0]}", patch)
        with lock:
            for index in indices:
                out.attempts[instance_id][index] = result.status
            if on_result is not None:
                on_result(result)

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        list(pool.map(one, list(jobs)))
    return out
