"""What a run's trajectory says it spent, read back without the run's imports (a batch's folder, a finished run's
summary): its `info`, and what its variants paid apart from the driver."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def trajectory_info(trajectory: Path | None) -> dict[str, Any]:
    """A run's trajectory's `info` (empty where there is none to read)."""
    if trajectory is None:
        return {}
    try:
        return json.loads(trajectory.read_text(encoding="utf-8")).get("info") or {}
    except (OSError, ValueError, AttributeError):
        return {}


def spent_apart(info: dict[str, Any]) -> dict[str, Any]:
    """The model calls, tokens and cost a run's variants paid on their own, apart from the driver's `model_stats`
    (their `usage` in its trajectory's `info`; a record of before names the calls `calls`)."""
    kept = [value.get("usage") for value in info.values() if isinstance(value, dict)]
    usages = [usage for usage in kept if isinstance(usage, dict)]
    summed = {key: sum(usage.get(key) or 0 for usage in usages) for key in ("input_tokens", "output_tokens", "cost")}
    return {"api_calls": sum(int(usage.get("api_calls") or usage.get("calls") or 0) for usage in usages), **summed}
