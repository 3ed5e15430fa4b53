"""The navigator as a variant: a plan before the driver's first step (`plan`), a permission gate around the driver's
actions, its review and guidance actions answered by `consult`; its records in the state (`navigator`, `plan`), the
plan ahead of the driver's memory, its actions in the driver's action list."""

from __future__ import annotations

from functools import partial
from typing import Any

from typing_extensions import TypedDict

from llm_ide.codebase import ActionOutcome
from llm_ide.errors import ConfigError
from llm_ide.navigator.factory import make_navigator
from llm_ide.navigator.mcp_client import McpNavigator
from llm_ide.navigator.model import load_templates
from llm_ide.navigator.nodes.budget import budget
from llm_ide.navigator.nodes.consult import consult
from llm_ide.navigator.nodes.permission import permission
from llm_ide.navigator.nodes.plan import plan
from llm_ide.navigator.protocol import NavigatorError, NavigatorUnready
from llm_ide.navigator.settings import PROMPTS, SECTION
from llm_ide.prompting import render_string
from llm_ide.settings import bundled_yaml
from llm_ide.state.operations import OperationNode
from llm_ide.variant import (
    Action,
    ActionResult,
    ActionRun,
    AgentContext,
    Hook,
    ModelUse,
    Opening,
    PromptParts,
    State,
    Variant,
)


class NavigatorState(TypedDict, total=False):
    plan: str  # the navigator's plan, ahead of the driver's memory
    navigator: dict[str, Any]  # its records: decisions, reviews, guidance, calls, usage, turns


def absent(ctx: AgentContext, params: dict[str, Any], action_type: str) -> ActionOutcome:
    """A navigator action in a run without a navigator: it does nothing, and says so."""
    return ActionOutcome(render_string(ctx.settings.navigator.templates.absent, action_type=action_type), 1)


BUNDLED = bundled_yaml(PROMPTS)  # the actions' parameters (where the actions are tools) and lines (in the text)
ACTIONS = {
    name: Action(
        consult,
        partial(absent, action_type=name),
        bare=name == "request_review",
        schema=BUNDLED["tools"][name],
        line=BUNDLED["lines"][name],
    )
    for name in ("request_review", "request_guidance")
}


class Navigator(Variant):
    name = "navigator"
    settings = SECTION
    state = NavigatorState
    actions = ACTIONS

    def __init__(self, mode: str = "model") -> None:
        self.mode = mode

    @classmethod
    def enabled(cls, settings: Any) -> Navigator | None:
        mode = settings.navigator.mode
        return None if mode == "off" else cls(mode)

    def check(self, settings: Any) -> list[ModelUse]:
        """The server at `navigator.url` answers with its tools (mode mcp); the prompts file reads and the
        navigator's own model is checked as the run's is (mode model)."""
        navigator = settings.navigator  # (its mode, not the variant's: what `open` makes)
        try:
            if navigator.mode == "mcp":
                McpNavigator(navigator.url, navigator.permission_timeout).check()
            elif navigator.mode == "model":
                load_templates(navigator.prompts)
        except (ConfigError, NavigatorError) as error:
            raise NavigatorUnready(str(error)) from None
        if navigator.mode != "model" or not navigator.model:
            return []
        return [ModelUse("navigator.model", navigator.model, navigator.base_url, "navigator.base_url")]

    def nodes(self) -> list[Hook]:
        return [Hook("plan", plan, once=True), Hook("navigator_budget", budget)]

    def open(self, ctx: AgentContext, opening: Opening) -> Any:
        return make_navigator(
            ctx.settings, ctx.codebase, opening.model, opening.base_url, policy=ctx.policy, model_for=opening.model_for
        )

    def prompt(self, ctx: AgentContext, state: State) -> PromptParts:
        templates = ctx.settings.navigator.templates
        plan_text = state.get("plan", "")
        preface = render_string(templates.plan, plan=plan_text) + "\n" if plan_text else ""
        return PromptParts(actions=render_string(templates.actions), preface=preface)

    def wrap_action(self, ctx: AgentContext, state: State, node: OperationNode, run: ActionRun) -> ActionResult:
        return permission(ctx, state, node, run)

    def info(self, state: State) -> dict[str, Any]:
        """Its records, apart from the driver's usage."""
        record = state.get("navigator")
        return {"navigator": {**record, "plan": state.get("plan", "")}} if record else {}
