from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from llm_ide.actions import Codebase
from llm_ide.calls import CallListener
from llm_ide.environments import Environment, make_environment
from llm_ide.models import get_model
from llm_ide.resources import AgentContext, CostBudget
from llm_ide.run.intents import IntentLog
from llm_ide.run.workspace import restorer, snapshotter
from llm_ide.settings import Settings

if TYPE_CHECKING:
    from llm_ide.coop.messages import Mailbox

log = logging.getLogger("llm_ide.run")


def install_tools(
    env: Environment,
    names: list[str],
    task_vars: dict[str, Any],
    on_event: Callable[[Any], None] | None = None,
) -> tuple[str, tuple[str, ...]]:
    """Install the configured tools into the environment (from the per-user tool cache when it has them): the Tool
    Usage text and the tools' command names. `on_event` gets each ToolEvent (progress, failures)."""
    if not names:
        return "", ()
    from llm_ide.tools.cache import ToolCache
    from llm_ide.tools.installer import install_tools as install
    from llm_ide.tools.installer import tool_usage_text

    report = install(env, names, task_vars, on_event=on_event, cache=ToolCache.default())
    return tool_usage_text(report.installed), tuple(cmd for tool in report.installed for cmd in tool.commands)


def build_context(
    *,
    settings: Settings,
    model_spec: str,
    run_id: str,
    base_url: str | None = None,
    repo: Path | None = None,
    env: Environment | None = None,
    image: str | None = None,
    base: str | None = None,
    record_call: Callable[[dict[str, Any]], None] | None = None,
    cost_budget: CostBudget | None = None,
    task_vars: dict[str, Any] | None = None,
    intents: IntentLog | None = None,
    on_tool_event: Callable[[Any], None] | None = None,
    mailbox: Mailbox | None = None,
    on_model_call: CallListener | None = None,
) -> AgentContext:
    """What the nodes need; `on_model_call` is told of each call of the agent's model (and sampler) as it happens."""
    model = get_model(model_spec, settings.model, base_url, settings.agent.single_call)  # fails before tools install
    sampling = settings.sampling
    sampler = get_model(sampling.model, settings.model, base_url) if sampling.model and sampling.k > 1 else None
    for observed in (model, sampler):
        if observed is not None:
            observed.listener = on_model_call
    env = env or make_environment(settings.environment, repo, run_id, image)
    task_vars = {"run_id": run_id, "workdir": env.workdir, **(task_vars or {})}
    usage, commands = install_tools(env, settings.environment.tools, task_vars, on_tool_event)
    codebase = Codebase.for_settings(env, settings, tool_commands=commands, mailbox=mailbox)
    from llm_ide.navigator.factory import make_navigator

    return AgentContext(
        navigator=make_navigator(settings, codebase, model_spec, base_url),
        settings=settings,
        model=model,
        codebase=codebase,
        tool_usage=usage,
        record_call=record_call,
        intents=intents,
        sampler=sampler,
        cost_budget=cost_budget,
        snapshot_patch=snapshotter(env, base, settings) if base else None,
        restore_worktree=restorer(env, base, settings) if base else None,
    )
