from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from llm_ide.budget import CostBudget
from llm_ide.call_policy import CallPolicy
from llm_ide.calls import CallListener
from llm_ide.codebase import Codebase
from llm_ide.composition import compose
from llm_ide.environments import make_environment
from llm_ide.environments.base import Environment
from llm_ide.environments.live import CommandListener
from llm_ide.exchange import exchange_for
from llm_ide.keep import Keep
from llm_ide.kills import IntentLog
from llm_ide.models import Model, get_model
from llm_ide.settings import CoreSettings
from llm_ide.tools.cache import ToolCache
from llm_ide.tools.installer import install_tools as install
from llm_ide.tools.installer import tool_usage_text
from llm_ide.variant import AgentContext, Clock, Opening, Variants
from llm_ide.workspace.patch import snapshotter
from llm_ide.workspace.putback import restorer

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
    report = install(env, names, task_vars, on_event=on_event, cache=ToolCache.default())
    return tool_usage_text(report.installed), tuple(cmd for tool in report.installed for cmd in tool.commands)


class RunModels:
    """The models of one run, made once each (the agent's, and those its variants ask for by spec), each told of its
    calls as they happen; `keep`: where they may keep what they need across the run's processes."""

    def __init__(self, settings: CoreSettings, listener: CallListener | None, keep: Keep | None = None) -> None:
        self.settings, self.listener, self.keep = settings, listener, keep
        self.made: dict[tuple[str, str | None], Model] = {}

    def __call__(self, spec: str, base_url: str | None = None) -> Model:
        if (spec, base_url) not in self.made:
            self.made[spec, base_url] = self.told(get_model(spec, self.settings.model, base_url, self.keep))
        return self.made[spec, base_url]

    def agent(self, spec: str, base_url: str | None, prepare: Callable[[Model], Model]) -> Model:
        """The agent's model, as the run's exchange has it (a variant asking for it gets this one)."""
        self.made[spec, base_url] = self.told(prepare(self(spec, base_url)))
        return self.made[spec, base_url]

    def told(self, model: Model) -> Model:
        model.listener = self.listener  # type: ignore[attr-defined]
        return model


def build_context(
    *,
    settings: CoreSettings,
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
    on_model_call: CallListener | None = None,
    on_command: CommandListener | None = None,
    variants: Variants | None = None,
    keep: Keep | None = None,
    clock: Clock | None = None,
    kept: Path | None = None,
    say: Callable[[str], None] | None = None,
) -> AgentContext:
    """What the nodes need, with the resources each of the run's `variants` (by default those its settings ask for)
    opens once the tools are in; `on_model_call` is told of each model call as it happens, `on_command` of each of
    the agent's commands as it runs; `keep`: the run's (its models may keep what they need there across processes:
    llm_ide/keep.py); `kept`: where a worktree put back before an operation runs again keeps what it held
    (llm_ide/workspace/putback.py); `say`: told a phase of the run as it happens."""
    models = RunModels(settings, on_model_call, keep)
    exchange = exchange_for(settings, models(model_spec, base_url))  # a bad model fails before any tool
    model = models.agent(model_spec, base_url, exchange.prepare)
    env = env or make_environment(settings.environment, repo, run_id, image)
    task_vars = {"run_id": run_id, "workdir": env.workdir, **(task_vars or {})}
    usage, commands = install_tools(env, settings.environment.tools, task_vars, on_tool_event)
    ctx = AgentContext(
        settings=settings,
        model=model,
        codebase=Codebase.for_settings(env, settings, tool_commands=commands, on_command=on_command),
        exchange=exchange,
        tool_usage=usage,
        policy=CallPolicy(record_call, cost_budget, settings.agent.max_reply_chars, settings.templates),
        intents=intents,
        cost_budget=cost_budget,
        snapshot_patch=snapshotter(env, base, settings) if base else None,
        restore_worktree=restorer(env, base, settings, kept) if base else None,
        variants=compose(settings) if variants is None else variants,
        clock=clock or Clock(),
        **({"say": say} if say else {}),
    )
    opening = Opening(model_spec, base_url, on_model_call, models)
    ctx.resources.update((variant.name, variant.open(ctx, opening)) for variant in ctx.variants)
    return ctx
