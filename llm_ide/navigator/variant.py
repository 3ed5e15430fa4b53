"""The navigator as a variant: a plan before the driver's first step (`plan`), a permission gate between `act` and
the action (`permission`), the driver's review and guidance requests answered by `consult`; its records in the
state (`navigator`, `plan`), the plan ahead of the driver's memory, its actions in the driver's action list."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from llm_ide.actions import ActionOutcome
from llm_ide.navigator.factory import make_navigator
from llm_ide.navigator.nodes.consult import consult
from llm_ide.navigator.nodes.permission import permission
from llm_ide.navigator.nodes.plan import plan
from llm_ide.navigator.settings import NavigatorSettings
from llm_ide.prompting import render_string
from llm_ide.variant import Action, Node, Opening, Variant

CONSULTED = ("request_review", "request_guidance")


class NavigatorState(TypedDict, total=False):
    plan: str  # the navigator's plan, ahead of the driver's memory
    navigator: dict[str, Any]  # its records: decisions, reviews, guidance, calls, usage, turns


def absent(action_type: str) -> Action:
    """A navigator action in a run without a navigator: it does nothing, and says so."""

    def run(ctx: Any, params: dict[str, Any]) -> ActionOutcome:
        return ActionOutcome(render_string(ctx.settings.navigator.templates.absent, action_type=action_type), 1)

    return Action(run, bare=action_type == "request_review")


class Navigator(Variant):
    name = "navigator"
    sections = {"navigator": (NavigatorSettings, NavigatorSettings)}
    state = NavigatorState
    prelude = ("plan",)
    gates = ("permission",)
    routes = dict.fromkeys(CONSULTED, "consult")

    def __init__(self, mode: str = "model") -> None:
        self.mode = mode
        self.interactive = mode == "human"

    @classmethod
    def enabled(cls, settings: Any) -> Navigator | None:
        mode = settings.navigator.mode
        return None if mode == "off" else cls(mode)

    def nodes(self) -> dict[str, Node]:
        return {"plan": plan, "permission": permission, "consult": consult}

    def actions(self) -> dict[str, Action]:
        return self.absent_actions()  # the graph routes them to `consult`: they never run as actions

    @classmethod
    def absent_actions(cls) -> dict[str, Action]:
        return {name: absent(name) for name in CONSULTED}

    def open(self, ctx: Any, opening: Opening) -> Any:
        return make_navigator(ctx.settings, ctx.codebase, opening.model, opening.base_url, policy=ctx.policy)

    def action_lines(self, ctx: Any) -> str:
        return render_string(ctx.settings.navigator.templates.actions)

    def preface(self, ctx: Any, state: dict[str, Any]) -> str:
        plan_text = state.get("plan", "")
        return render_string(ctx.settings.navigator.templates.plan, plan=plan_text) + "\n" if plan_text else ""

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        """Its records, apart from the driver's usage."""
        record = state.get("navigator")
        return {"navigator": {**record, "plan": state.get("plan", "")}} if record else {}
