from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llm_ide.actions import Codebase
from llm_ide.budget import Budget, CostBudget
from llm_ide.models import Model
from llm_ide.run.intents import IntentLog
from llm_ide.settings import Settings, Templates
from llm_ide.state.context import ScoreParams

__all__ = ["AgentContext", "CostBudget"]


@dataclass
class AgentContext:
    """Static dependencies of a run, reaching the nodes through LangGraph's runtime context."""

    settings: Settings
    model: Model
    codebase: Codebase
    tool_usage: str = ""
    record_call: Callable[[dict[str, Any]], None] | None = None
    cost_budget: Budget | None = None
    snapshot_patch: Callable[[], str] | None = None  # the worktree against the base commit, after each change
    restore_worktree: Callable[[str], bool] | None = None  # puts a snapshot back (a command interrupted by a kill)
    intents: IntentLog | None = None
    sampler: Model | None = None  # `sampling.model`: the model of action sampling's choosing calls
    navigator: Any = None  # llm_ide.navigator.protocol.Navigator when navigator.mode is not off
    mark: float = field(default_factory=time.monotonic)
    rendered: dict[tuple[Any, ...], str] = field(default_factory=dict)  # prompt parts that never change once made
    redacted: dict[tuple[str, tuple[str, ...]], str] = field(default_factory=dict)  # messages already masked

    @property
    def templates(self) -> Templates:
        return self.settings.templates

    @property
    def score_params(self) -> ScoreParams:
        memory = self.settings.memory
        return ScoreParams(memory.alpha, memory.beta, memory.gamma, memory.threshold)
