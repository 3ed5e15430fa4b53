from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llm_ide.actions import Codebase
from llm_ide.budget import Budget, CostBudget
from llm_ide.call_policy import CallPolicy
from llm_ide.models import Model
from llm_ide.parsing import Grammar
from llm_ide.settings import CoreSettings, Templates
from llm_ide.state.context import ScoreParams
from llm_ide.variant import Variants
from llm_ide.workspace.intents import IntentLog

__all__ = ["AgentContext", "CostBudget"]


@dataclass
class AgentContext:
    """Static dependencies of a run, reaching the nodes through LangGraph's runtime context: the settings, the model,
    the repository, the run's variants and the resources they opened for it (`resources[variant name]`)."""

    settings: CoreSettings  # assembled at the top (llm_ide.composition): the variants' sections are there too
    model: Model
    codebase: Codebase
    tool_usage: str = ""
    policy: CallPolicy = field(default_factory=CallPolicy)  # how every model call of the run is made
    cost_budget: Budget | None = None
    snapshot_patch: Callable[[], str] | None = None  # the worktree against the base commit, after each change
    restore_worktree: Callable[[str], bool] | None = None  # puts a snapshot back (a command interrupted by a kill)
    intents: IntentLog | None = None
    variants: Variants = field(default_factory=Variants)
    resources: dict[str, Any] = field(default_factory=dict)
    mark: float = field(default_factory=time.monotonic)
    rendered: dict[tuple[Any, ...], str] = field(default_factory=dict)  # prompt parts that never change once made

    @property
    def tools(self) -> bool:
        """Whether the model is given the actions as tools (llm_ide/action_tools.py), else they are in the text."""
        return getattr(self.model, "action_format", "text") == "tools"

    @property
    def templates(self) -> Templates:
        """The run's templates; where the actions are tools, with the tool format's in place of theirs."""
        return self.settings.templates.with_tools if self.tools else self.settings.templates

    @property
    def score_params(self) -> ScoreParams:
        memory = self.settings.memory
        return ScoreParams(memory.alpha, memory.beta, memory.gamma, memory.threshold)

    @property
    def grammar(self) -> Grammar:
        return self.variants.grammar
