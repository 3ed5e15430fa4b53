"""Before each step: the run's cost limit (`agent.cost_limit`) counts the navigator's model calls with the driver's,
so a run with a navigator ends (`cost_limit`) before the driver's next call once both together reached it."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.errors import CostLimit, ended, usd
from llm_ide.state.graph_state import AgentState, empty_usage
from llm_ide.variant import AgentContext


def budget(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    limit = runtime.context.settings.agent.cost_limit
    record: dict[str, Any] = state.get("navigator") or {}  # type: ignore[assignment]
    if not limit or not record or state.get("exit_status"):
        return {}
    driver, navigator = (state.get("usage") or empty_usage())["cost"], record["usage"]["cost"]
    if driver + navigator < limit:
        return {}
    spent = f"{usd(driver + navigator)}: the driver {usd(driver)}, the navigator {usd(navigator)}"
    return ended(CostLimit(f"the run's cost limit {usd(limit)} is reached (spent {spent})"))
