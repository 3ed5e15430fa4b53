"""Demonstrations: trajectories of ours rendered as worked examples (their reasoning chain, lessons and patch)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from llm_ide.prompting import render, render_string, truncate
from llm_ide.sampling.settings import SamplingTemplates, read_demonstration
from llm_ide.settings import Templates
from llm_ide.state.operations import OperationNode, all_lessons, node_of, reasoning_chain


def operation_nodes(operations: list[dict[str, Any]]) -> list[OperationNode]:
    return [node_of(op) for op in operations]


def step_view(node: OperationNode, templates: Templates) -> dict[str, Any]:
    params = json.dumps(node.action_params, ensure_ascii=False)
    return {
        "thought": node.thought,
        "action": render(templates, "action_written", action_type=node.action_type, params=params),
        "returncode": node.returncode,
        "observation": node.observation,
    }


def chosen_operations(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The operations to show: a run with attempts (llm_ide/attempts) shows only its chosen attempt's."""
    operations = data["operations"]
    if not any("attempt" in op for op in operations):
        return operations
    attempts = (data.get("info") or {}).get("attempts") or []
    chosen = next((a["index"] for a in attempts if a.get("chosen")), max(op.get("attempt", 0) for op in operations))
    return [op for op in operations if op.get("attempt") == chosen]


def render_demonstration(templates: SamplingTemplates, path: Path, number: int, run: Templates) -> str:
    """One demonstration, its actions written as the run's are (`run`: the run's templates)."""
    data = read_demonstration(path)
    nodes = operation_nodes(chosen_operations(data))
    return render_string(
        templates.demonstration,
        number=number,
        task=str(data.get("task") or ""),
        steps=[step_view(node, run) for node in reasoning_chain(nodes)],
        lessons=all_lessons(nodes),
        patch=str((data.get("info") or {}).get("submission") or ""),
    )


def render_demonstrations(settings: Any, run: Templates) -> str:
    """The demonstrations section of the system prompt (each within `sampling.demonstration_max_chars`), their
    actions written as the run's are (`run`: the run's templates); empty without demonstrations."""
    paths, sampling = settings.demonstrations, settings.sampling
    if not paths:
        return ""
    cap = sampling.demonstration_max_chars
    parts = [
        truncate(render_demonstration(sampling.templates, path, number, run), cap, settings.templates)
        for number, path in enumerate(paths, 1)
    ]
    return render_string(sampling.templates.demonstrations, demonstrations="\n\n".join(parts))
