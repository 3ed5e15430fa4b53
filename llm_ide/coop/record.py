"""A coop pair's record (its folder's run.json): the task, the two features, the setting they run in, the model and the
repetition; and the pairs batches were asked for in a folder (pairs.json): what the command line checks and reads
without the pairs' graph."""

from __future__ import annotations

import json
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from llm_ide.coop.task import CoopTask


class Setting(StrEnum):
    SINGLE = "single"
    SOLO = "solo"
    COOP = "coop"
    COOP_ABLATION = "coop_ablation"


class CoopRun(BaseModel):
    task: Path
    pair: tuple[int, int]
    setting: Setting
    model: str
    k: int = Field(0, ge=0)
    repo_source: Path
    base_url: str | None = None
    environment: str | None = None

    def agents(self) -> dict[str, list[int]]:
        """Agent → the features it implements."""
        if self.setting in (Setting.COOP, Setting.COOP_ABLATION):
            return {"1": [self.pair[0]], "2": [self.pair[1]]}
        return {"1": list(self.pair) if self.setting == Setting.SOLO else [self.pair[0]]}

    def folder_name(self, task: CoopTask) -> str:
        return f"{task.repo_name}_task{task.task_id}_f{self.pair[0]}_f{self.pair[1]}_{self.setting}_k{self.k}"


PLANNED = "pairs.json"  # the pairs a batch was asked for, each its folder's name: one never started is counted


def planned(folder: Path) -> dict[str, dict[str, Any]]:
    """The pairs batches were asked for in `folder`: folder name → {setting, k, pair}."""
    path = folder / PLANNED
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else {}
