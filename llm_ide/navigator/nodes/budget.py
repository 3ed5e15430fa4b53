"""Before each step: the run's cost and token limits (`agent.cost_limit`, `agent.token_limit`) count the navigator's
model calls with the driver's, so a run with a navigator ends (`cost_limit`) before the driver's next call once both
together reached one of them."""

from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.errors import CostLimit, ended, usd
from llm_ide.settings import AgentSettings
from llm_ide.state.graph_state import AgentState, empty_usage
from llm_ide.variant import AgentContext


def budget(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    record: dict[str, Any] = state.get("navigator") or {}  # type: ignore[assignment]
    if not record or state.get("exit_status"):
        return {}
    driver, ctx = dict(state.get("usage") or empty_usage()), runtime.context
    models = ctx.model, getattr(getattr(ctx.resources.get("navigator"), "ctx", None), "model", None)
    priced = tuple(getattr(model, "price", True) is not None for model in models)  # (a scripted model: free)
    reached = limit_reached(ctx.settings.agent, driver, record["usage"], priced)
    return ended(CostLimit(reached)) if reached else {}


def limit_reached(
    agent: AgentSettings, driver: dict[str, Any], navigator: dict[str, Any], priced: tuple[bool, ...] = (True, True)
) -> str | None:
    """The limit the driver's and the navigator's usage reached together, if any, each one's part said (the cost of
    a model without a price in `model.prices`: unpriced, not $0)."""
    if agent.cost_limit and (cost := driver["cost"] + navigator["cost"]) >= agent.cost_limit:
        mine, its = (
            usd(u["cost"]) if known else "unpriced" for u, known in zip((driver, navigator), priced, strict=True)
        )
        parts = f"the driver {mine}, the navigator {its}"
        return f"the run's cost limit {usd(agent.cost_limit)} is reached (spent {usd(cost)}: {parts})"
    mine, its = (usage["input_tokens"] + usage["output_tokens"] for usage in (driver, navigator))
    if agent.token_limit and mine + its >= agent.token_limit:  # whatever the price, as the driver's alone
        parts = f"{mine + its:,} tokens: the driver {mine:,}, the navigator {its:,}"
        return f"the run's token limit ({agent.token_limit:,}) is reached ({parts})"
    return None
