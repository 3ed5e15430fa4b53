from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from llm_ide.actions import Workspace
from llm_ide.config import deep_merge, load_config
from llm_ide.models import Model
from llm_ide.run.intents import IntentLog
from llm_ide.state.context import ScoreParams


class CostBudget:
    """A cost limit shared by the runs of a batch (thread-safe)."""

    def __init__(self, limit: float | None) -> None:
        self.limit = limit
        self.spent = 0.0
        self._lock = threading.Lock()

    def add(self, cost: float) -> None:
        with self._lock:
            self.spent += cost

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.limit > 0 and self.spent >= self.limit


@dataclass
class AgentContext:
    """Static dependencies of a run, reaching the nodes through LangGraph's runtime context."""

    config: dict[str, Any]
    model: Model
    workspace: Workspace
    tool_usage: str = ""
    record_call: Callable[[dict[str, Any]], None] | None = None
    cost_budget: CostBudget | None = None
    snapshot_patch: Callable[[], str] | None = None
    intents: IntentLog | None = None
    mark: float = field(default_factory=time.monotonic)

    @property
    def templates(self) -> dict[str, Any]:
        return self.config["templates"]

    @property
    def agent(self) -> dict[str, Any]:
        return self.config["agent"]

    @property
    def score_params(self) -> ScoreParams:
        memory = self.config["memory"]
        return ScoreParams(memory["alpha"], memory["beta"], memory["gamma"], memory["threshold"])


_STUDIO_CONTEXTS: dict[str, AgentContext] = {}
_STUDIO_LOCK = threading.Lock()


def resolve(runtime: Runtime[AgentContext] | None, state: dict[str, Any]) -> AgentContext:
    """The run's context; for runs started without one (LangGraph Studio), built once per thread from the input."""
    if runtime is not None and isinstance(runtime.context, AgentContext):
        return runtime.context
    thread_id = str(get_config().get("configurable", {}).get("thread_id", "default"))
    with _STUDIO_LOCK:
        if thread_id not in _STUDIO_CONTEXTS:
            _STUDIO_CONTEXTS[thread_id] = context_from_input(state, thread_id)
        return _STUDIO_CONTEXTS[thread_id]


def release(runtime: Runtime[AgentContext] | None, state: dict[str, Any]) -> None:
    """A run started without a context (Studio) ended: close the environment that was built for it."""
    if not state.get("exit_status") or (runtime is not None and isinstance(runtime.context, AgentContext)):
        return
    thread_id = str(get_config().get("configurable", {}).get("thread_id", "default"))
    with _STUDIO_LOCK:
        ctx = _STUDIO_CONTEXTS.pop(thread_id, None)
    if ctx is not None:
        ctx.workspace.env.close()


def context_from_input(state: dict[str, Any], run_id: str) -> AgentContext:
    from llm_ide.run.setup import build_context

    if not state.get("repo") or not state.get("model"):
        raise ValueError("the graph input needs `repo` (a local repository path) and `model` (e.g. scripted:PATH)")
    overrides = state.get("config") or {}
    config = deep_merge(load_config(overrides.get("base", "default")), overrides)
    return build_context(
        config=config,
        model_spec=state["model"],
        base_url=state.get("base_url"),
        repo=Path(state["repo"]).expanduser().resolve(),
        run_id=run_id,
    )
