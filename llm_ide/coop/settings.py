"""The coop settings (llm_ide/prompts/coop.yaml, overridable with --coop-config), validated once like the rest."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, PositiveInt, ValidationError

from llm_ide.config import PROMPTS_DIR, read_yaml
from llm_ide.errors import ConfigError
from llm_ide.settings import deep_merge, describe_error

COOP_CONFIG = PROMPTS_DIR / "coop.yaml"


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class PlanningSettings(Strict):
    max_iterations: PositiveInt
    read_max_lines: PositiveInt
    grep_max_results: PositiveInt
    history_chars: PositiveInt


class ExecutionSettings(Strict):
    step_limit: PositiveInt
    parallel: bool
    lockstep: bool


class ToolMessages(Strict):
    not_found: str
    outside: str
    bad_action: str
    bad_params: str
    no_matches: str
    sent: str


class MessageTemplates(Strict):
    sent: str
    duplicate: str
    received: str


class CoopTemplates(Strict):
    planner_system: str
    planner_turn: str
    planner_history_entry: str
    forced_plan: str
    execution_task: str
    tool_messages: ToolMessages
    messages: MessageTemplates


class CoopSettings(Strict):
    planning: PlanningSettings
    execution: ExecutionSettings
    templates: CoopTemplates


def load_coop_settings(override: Path | None = None, values: dict | None = None) -> CoopSettings:
    """coop.yaml, then the override file, then `values` (e.g. LangGraph Studio's input)."""
    layers = [(str(COOP_CONFIG), read_yaml(COOP_CONFIG))]
    if override is not None:
        layers.append((str(override), read_yaml(override)))
    if values:
        layers.append(("the coop values given", values))
    merged: dict = {}
    for _, data in layers:
        merged = deep_merge(merged, data)
    try:
        return CoopSettings.model_validate(merged)
    except ValidationError as error:
        raise ConfigError(describe_error(error, layers)) from None
