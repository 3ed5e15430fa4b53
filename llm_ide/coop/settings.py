"""The coop settings (llm_ide/prompts/coop.yaml, overridable with --coop-config), read and validated by the one
settings loader like the rest."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import PositiveInt

from llm_ide.config import set_by_file
from llm_ide.messages.channel import MessageTemplates
from llm_ide.settings import PROMPTS_DIR, Strict, TemplateSet, read_yaml, validate

COOP_CONFIG = PROMPTS_DIR / "coop.yaml"


class PlanningSettings(Strict):
    max_iterations: PositiveInt
    read_max_lines: PositiveInt
    grep_max_results: PositiveInt
    history_chars: PositiveInt


class ExecutionSettings(Strict):
    step_limit: PositiveInt
    parallel: bool
    lockstep: bool


class ToolMessages(TemplateSet):
    not_found: str
    outside: str
    bad_action: str
    bad_params: str
    no_matches: str
    sent: str


class CoopTemplates(TemplateSet):
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


def agents_step_limit(coop: CoopSettings, settings: Any, layers: Any, override: Path | None) -> CoopSettings:
    """`coop` whose agents' step limit is the settings' agent.step_limit when a config file of one's own sets it (the
    user's, `-c`), unless the coop override file sets execution.step_limit: the more specific one."""
    coop_set = override is not None and set_by_file([(str(override), read_yaml(override))], "execution.step_limit")
    if coop_set or not set_by_file(layers, "agent.step_limit"):
        return coop
    execution = coop.execution.model_copy(update={"step_limit": settings.agent.step_limit})
    return coop.model_copy(update={"execution": execution})


def load_coop_settings(override: Path | None = None, values: dict | None = None) -> CoopSettings:
    """coop.yaml, then the override file, then `values` (e.g. LangGraph Studio's input)."""
    layers = [(str(COOP_CONFIG), read_yaml(COOP_CONFIG))]
    if override is not None:
        layers.append((str(override), read_yaml(override)))
    if values:
        layers.append(("the coop values given", values))
    return validate(CoopSettings, layers)
