"""Reproduction first, as a variant: a script given with the task (`llm-ide run --reproduction FILE`, a dataset row's
`reproduction`, `Reproduction(script(...))`) and, with `reproduction.generate`, tests the agent writes before its
first step, each validated on the original code. Each is installed beside the tools; what it printed on the original
code is in the Task section; `reproduce` runs them at any time; they run again at submit; the trajectory's info holds
before and after. For attempts, `verify` runs every attempt's patch against all of them, and against the repository's
tests that touch the edited files, in a clean environment (llm_ide/reproduction/verify.py)."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from llm_ide.codebase import ActionOutcome
from llm_ide.errors import UsageError
from llm_ide.prompting import render_string
from llm_ide.reproduction.nodes.reproduce import reproduce
from llm_ide.reproduction.phase import reproduction
from llm_ide.reproduction.record import record_of, run_all, tell
from llm_ide.reproduction.script import Script, setup_reproduction_script, shown
from llm_ide.reproduction.settings import PROMPTS, SECTION
from llm_ide.reproduction.verify import verify_runs
from llm_ide.settings import bundled_yaml
from llm_ide.state.operations import OperationNode
from llm_ide.variant import Action, ActionResult, ActionRun, AgentContext, Hook, Opening, PromptParts, State, Variant
from llm_ide.verification import Finished, Verified

BUNDLED = bundled_yaml(PROMPTS)  # the action's parameters (where the actions are tools) and line (in the text)


class ReproductionState(TypedDict, total=False):
    reproduction: dict[str, Any]  # scripts kept (each with `before`), candidates written, `after` (at submit)


def absent(ctx: AgentContext, params: dict[str, Any]) -> ActionOutcome:
    return ActionOutcome(render_string(ctx.settings.reproduction.templates.absent), 1)


def described(run: dict[str, Any]) -> str:
    return f"{run['verdict']} (exit {run['returncode']})"


def facts_of(record: dict[str, Any]) -> dict[str, Any]:
    """What a reviewer of several runs is told: what each script showed on the original code and at submit."""
    after = record.get("after") or {}
    facts: dict[str, Any] = {}
    for item in record["scripts"]:
        facts[f"reproduction {item['name']} on the original code"] = described(item["before"])
        if item["name"] in after:
            facts[f"reproduction {item['name']} at submit"] = described(after[item["name"]])
    return facts


class Reproduction(Variant):
    name = "reproduction"
    settings = SECTION
    state = ReproductionState
    actions = {
        "reproduce": Action(
            reproduce, absent, bare=True, schema=BUNDLED["tools"]["reproduce"], line=BUNDLED["lines"]["reproduce"]
        )
    }

    def __init__(self, *given: Script) -> None:
        self.given = list(given)

    @classmethod
    def enabled(cls, settings: Any) -> Reproduction | None:
        return cls() if settings.reproduction.generate else None

    def check(self, settings: Any) -> list:
        """Each given script is one `script(text, name)` with something in it."""
        for item in self.given:
            if not isinstance(item, dict) or not isinstance(item.get("content"), str):
                raise UsageError(
                    f"Reproduction takes scripts (script(text, name)), not {type(item).__name__} {item!r:.60}"
                )
            if not item["content"].strip():
                raise UsageError(f"reproduction script {item.get('name')} is empty: it would show nothing of the issue")
        return []

    def nodes(self) -> list[Hook]:
        return [Hook("reproduction", reproduction, once=True)]

    def open(self, ctx: AgentContext, opening: Opening) -> Any:
        for item in self.given:
            setup_reproduction_script(ctx.codebase.env, item)
        return self.given

    def prompt(self, ctx: AgentContext, state: State) -> PromptParts:
        own = ctx.settings.reproduction
        scripts = [shown(ctx.codebase.env, item, item["before"]) for item in record_of(state)["scripts"]]
        notes = render_string(own.templates.task_notes, scripts=scripts, **own.markers.model_dump()) if scripts else ""
        return PromptParts(task_notes=notes)

    def wrap_action(self, ctx: AgentContext, state: State, node: OperationNode, run: ActionRun) -> ActionResult:
        """At submit, the scripts run again on the code as submitted."""
        result = run(node)
        record = record_of(state)
        if not result.submitted or not record["scripts"]:
            return result
        runs = run_all(ctx, state)
        for item in runs:
            tell(ctx, item, item["run"], "at submit")
        after = {item["name"]: item["run"] for item in runs}
        return result.merged({"reproduction": {**record, "after": after}})

    def info(self, state: State) -> dict[str, Any]:
        record = {key: value for key, value in (state.get("reproduction") or {}).items() if key != "pending"}
        if not record:
            return {}
        facts = facts_of(record_of(state))
        return {"reproduction": record, **({"facts": facts} if facts else {})}

    def verify(self, bench: Any, runs: list[Finished], record: dict[str, Any]) -> Verified | None:
        return verify_runs(bench, self.given, runs, record)
