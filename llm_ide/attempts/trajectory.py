"""The trajectory of a run with attempts: every attempt's operations and model calls (each marked with its attempt,
call indexes made unique), the reviewer's and chooser's calls, and in `info.attempts` each attempt's outcome, score,
reasons and whether it was chosen (the shapes llm_ide/inspector reads)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_ide.fileio import atomic_write
from llm_ide.navigator.protocol import NavigatorUsage
from llm_ide.run.call_log import added, spent
from llm_ide.run.calls_read import read_log
from llm_ide.run.trajectory import FORMAT, load_trajectory
from llm_ide.state.graph_state import empty_usage
from llm_ide.version import __version__

Read = dict[Path, tuple[tuple[int, int], dict[str, Any]]]  # the attempts' trajectories read so far, by file
USAGE_KEYS = (
    "api_calls",
    "input_tokens",
    "output_tokens",
    "cache_read_tokens",
    "cache_write_tokens",
    "cost",
    "estimated_calls",
)


def paid_path(output_dir: Path, run_id: str) -> Path:
    """The reviewer's and chooser's calls, each appended as it is paid for (the state has it when its node saves)."""
    return output_dir / f"{run_id}.calls.jsonl.gz"


def paid_outside(output_dir: Path, run_id: str, state: dict[str, Any]) -> dict[str, Any]:
    """The usage of the reviewer's and chooser's calls paid for and not in the state (a kill before their node saved;
    the resumed run asks again)."""
    path = paid_path(output_dir, run_id)
    logged = read_log(path)[0] if path.exists() else []
    outside = dict(empty_usage())
    for call in logged:
        outside = added(outside, spent(call))
    for call in state.get("calls", []):
        outside = {key: value - spent(call).get(key, 0) for key, value in outside.items()}
    return outside if outside["api_calls"] > 0 else dict(empty_usage())


def navigators(records: list[dict[str, Any]]) -> dict[str, Any]:
    """The attempts' navigators as one (`info.navigator`): their mode and their usage summed, as `model_stats` sum
    their drivers' ({}: no attempt had one)."""
    usages = [NavigatorUsage(**(record.get("usage") or {})) for record in records]
    if not usages:
        return {}
    summed = {key: sum(getattr(usage, key) for usage in usages) for key in NavigatorUsage.model_fields}
    return {"mode": records[0].get("mode", ""), "usage": NavigatorUsage(**summed).model_dump()}


def attempts_info(state: dict[str, Any]) -> list[dict[str, Any]]:
    chosen = state.get("chosen")
    return [
        {
            "index": record["index"],
            "chosen": record["index"] == chosen,
            "score": record.get("score"),
            "reasons": record.get("reasons", ""),
            "exit_status": record.get("exit_status", ""),
            "cost": record.get("cost", 0.0),
            **({"cost_apart": record["cost_apart"]} if record.get("cost_apart") else {}),
            "steps": record.get("steps", 0),
            "submission": record.get("submission", ""),
            "trajectory": record.get("trajectory", ""),
            **({"facts": record["facts"]} if record.get("facts") else {}),
            **({"checks": record["checks"], "rank": record.get("rank", [])} if record.get("checks") else {}),
        }
        for record in state.get("attempts", [])
    ]


def attempt_trajectory(path: Path, cache: Read) -> dict[str, Any]:
    """A finished attempt's trajectory with its prompts, read again only when the file changed."""
    stat = path.stat()
    key = (stat.st_mtime_ns, stat.st_size)
    if path not in cache or cache[path][0] != key:
        cache[path] = (key, load_trajectory(path))
    return cache[path][1]


def combined(output_dir: Path, state: dict[str, Any], info: dict[str, Any], read: Read) -> dict[str, Any]:
    operations: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    usage: dict[str, Any] = dict(empty_usage())
    navigated: list[dict[str, Any]] = []
    for record in state.get("attempts", []):
        path = output_dir / record.get("trajectory", "")
        try:
            data = attempt_trajectory(path, read)
        except (OSError, ValueError):
            continue
        stats = (data.get("info") or {}).get("model_stats") or {}
        for key in USAGE_KEYS:
            usage[key] += stats.get(key, 0) or 0
        if navigator := (data.get("info") or {}).get("navigator"):
            navigated.append(navigator)
        operations += [{**op, "attempt": record["index"]} for op in data.get("operations", [])]
        offset = len(calls)
        calls += [
            {**call, "index": offset + n, "attempt_call": call.get("index"), "attempt": record["index"]}
            for n, call in enumerate(data.get("model_calls", []))
        ]
    for call in state.get("calls", []):  # the reviewer's and the chooser's
        calls.append({**call, "index": len(calls)})
        usage = added(usage, spent(call))
    if (outside := paid_outside(output_dir, info["run_id"], state))["api_calls"]:
        discarded = usage.get("discarded_calls", 0) + outside["api_calls"]
        usage = {**added(usage, outside), "api_calls": usage["api_calls"], "discarded_calls": discarded}
    return {
        "format": FORMAT,
        "info": {
            "version": __version__,
            "model_stats": usage,
            **({"navigator": navigator} if (navigator := navigators(navigated)) else {}),
            "n_operations": len(operations),
            **info,
            "exit_status": state.get("exit_status") or info.get("exit_status"),
            **({"error": state["error"]} if state.get("error") else {}),
            "submission": state.get("submission", ""),
            "attempts": attempts_info(state),
            "choice": {
                "attempt": state.get("chosen"),
                "by": state.get("chosen_by", ""),
                "reasons": state.get("choice_reasons", ""),
                **({"execution": state.get("execution_pick", [])} if state.get("verification") else {}),
            },
            **({"verification": state["verification"]} if state.get("verification") else {}),
        },
        "task": state.get("task", ""),
        "operations": operations,
        "code_context": [],
        "model_calls": calls,
    }


def write_combined(path: Path, state: dict[str, Any], info: dict[str, Any], read: Read) -> dict[str, Any]:
    """The combined trajectory written at `path`; `read`: the run's cache of its attempts' trajectories."""
    data = combined(path.parent, state, info, read)
    atomic_write(path, json.dumps(data, ensure_ascii=False, indent=None))
    return data
