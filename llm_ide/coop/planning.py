"""The planning phase as a LangGraph graph: planners (one subgraph each, run in parallel with `Send`) explore
read-only and talk through a coordinator that relays each round's messages into the other planner's context, until
every planner has called `agreement_reached(plan)`; at the turn limit a plan is forced."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import Send
from typing_extensions import TypedDict

from llm_ide.call_policy import CallPolicy
from llm_ide.coop.settings import CoopSettings
from llm_ide.coop.tools import READ_ONLY, run_tool
from llm_ide.errors import FormatError
from llm_ide.models import Model
from llm_ide.parsing import parse_params
from llm_ide.prompting import render_string
from llm_ide.text import extract_tag

MESSAGE_TYPES = ("analysis", "proposal", "question", "concern", "agreement")


def add_or_reset(left: list[Any] | None, right: list[Any] | None) -> list[Any]:
    return [] if right is None else [*(left or []), *right]


def merge_lists(left: dict[str, list[Any]] | None, right: dict[str, list[Any]]) -> dict[str, list[Any]]:
    merged = {key: list(value) for key, value in (left or {}).items()}
    for key, value in right.items():
        merged[key] = [*merged.get(key, []), *value]
    return merged


def merge_dict(left: dict[str, Any] | None, right: dict[str, Any]) -> dict[str, Any]:
    return {**(left or {}), **right}


class PlanningState(TypedDict, total=False):
    setting: str
    agents: list[str]
    features: dict[str, list[str]]
    round: int
    turns: Annotated[dict[str, list[dict[str, Any]]], merge_lists]
    outbox: Annotated[list[dict[str, Any]], add_or_reset]
    inbox: Annotated[dict[str, list[dict[str, Any]]], merge_lists]
    messages: Annotated[list[dict[str, Any]], add_or_reset]
    plans: Annotated[dict[str, str], merge_dict]
    forced: Annotated[dict[str, bool], merge_dict]


class PlannerOutput(TypedDict, total=False):
    """What one planner turn adds to the planning state (its channels start empty in the subgraph)."""

    turns: Annotated[dict[str, list[dict[str, Any]]], merge_lists]
    outbox: Annotated[list[dict[str, Any]], add_or_reset]
    plans: Annotated[dict[str, str], merge_dict]
    forced: Annotated[dict[str, bool], merge_dict]


class PlannerState(PlannerOutput, total=False):
    agent: str
    view: dict[str, Any]  # the planning state when the turn started (read-only)
    decision: dict[str, Any]


@dataclass
class PlanningContext:
    repo: Path
    models: dict[str, Model]
    settings: CoopSettings
    policy: CallPolicy = field(default_factory=CallPolicy)  # how the planners' model calls are made


def other_agent(state: PlanningState, agent: str) -> str:
    return next((a for a in state.get("agents", []) if a != agent), agent)


def coop(state: PlanningState) -> bool:
    return state.get("setting") in ("coop", "coop_ablation") and len(state.get("agents", [])) > 1


def history_text(turns: list[dict[str, Any]], settings: CoopSettings) -> str:
    """The planner's own earlier turns, newest kept when over the budget."""
    entries = [
        render_string(
            settings.templates.planner_history_entry,
            turn=t["turn"],
            action=t["action"],
            params=json.dumps(t["params"], ensure_ascii=False)[:300],
            observation=t["observation"],
        )
        for t in turns
    ]
    kept: list[str] = []
    for entry in reversed(entries):
        if sum(map(len, kept)) + len(entry) > settings.planning.history_chars and kept:
            break
        kept.insert(0, entry)
    return "\n".join(kept)


def think(planner: PlannerState, runtime: Runtime[PlanningContext]) -> dict[str, Any]:
    ctx, agent, state = runtime.context, planner["agent"], planner["view"]
    turns = state.get("turns", {}).get(agent, [])
    max_turns = ctx.settings.planning.max_iterations
    last = len(turns) + 1 >= max_turns
    prompt = render_string(
        ctx.settings.templates.planner_turn,
        setting=state["setting"],
        agent=agent,
        other=other_agent(state, agent),
        features=state["features"][agent],
        inbox=state.get("inbox", {}).get(agent, []),
        history=history_text(turns, ctx.settings),
        turn=len(turns) + 1,
        max_turns=max_turns,
        last_turn=last,
        coop=coop(state),
    )
    messages = [
        {"role": "system", "content": render_string(ctx.settings.templates.planner_system)},
        {"role": "user", "content": prompt},
    ]
    model = ctx.models[agent]
    reply, _ = ctx.policy.call(model, messages, kind="planner")
    allowed = (
        ["agreement_reached"]
        if last
        else [*READ_ONLY, *(["communicate_with_agent"] if coop(state) else []), "agreement_reached"]
    )
    decision: dict[str, Any] = {"prompt": prompt, "response": reply.text, "allowed": allowed, "last": last}
    try:
        decision["thought"] = extract_tag(reply.text, "thought", required=False) or ""
        decision["action"] = (extract_tag(reply.text, "action_type") or "").strip().strip("`'\"").lower()
        decision["params"] = parse_params(extract_tag(reply.text, "action_params", required=False))
    except FormatError as error:
        decision.update(action="(format error)", params={}, error=str(error))
    return {"decision": decision}


def act(planner: PlannerState, runtime: Runtime[PlanningContext]) -> dict[str, Any]:
    ctx, agent, decision, state = runtime.context, planner["agent"], planner["decision"], planner["view"]
    messages = ctx.settings.templates.tool_messages
    action, params, turn = decision["action"], decision["params"], len(state.get("turns", {}).get(agent, [])) + 1
    update: dict[str, Any] = {}
    if "error" in decision:
        observation = decision["error"]
    elif action not in decision["allowed"]:
        observation = render_string(messages.bad_action, action=action, allowed=", ".join(decision["allowed"]))
    elif action == "agreement_reached" and str(params.get("plan") or "").strip():
        observation, update["plans"] = "Plan recorded.", {agent: str(params["plan"]).strip()}
    elif action == "agreement_reached":
        observation = render_string(messages.bad_params, action=action, error="`plan` must be a non-empty text")
    elif action == "communicate_with_agent":
        kind = str(params.get("message_type") or "analysis")
        text = str(params.get("message") or "").strip()
        if kind not in MESSAGE_TYPES or not text:
            error = f"message_type must be one of {', '.join(MESSAGE_TYPES)} and message must not be empty"
            observation = render_string(messages.bad_params, action=action, error=error)
        else:
            other = other_agent(state, agent)
            update["outbox"] = [{"from": agent, "to": other, "type": kind, "text": text, "round": state["round"]}]
            observation = render_string(messages.sent, other=other)
    else:
        observation = run_tool(ctx.repo, action, params, ctx.settings)
    if decision["last"] and agent not in update.get("plans", {}):
        update["plans"] = {agent: render_string(ctx.settings.templates.forced_plan, thought=decision["thought"])}
        update.setdefault("forced", {})[agent] = True  # type: ignore[index]
    entry = {
        "turn": turn,
        "action": action,
        "params": params,
        "thought": decision["thought"],
        "observation": observation,
        "prompt": decision["prompt"],
        "response": decision["response"],
    }
    return {**update, "turns": {agent: [entry]}}


def build_planner() -> Any:
    builder = StateGraph(PlannerState, context_schema=PlanningContext, output_schema=PlannerOutput)
    builder.add_node("think", think)
    builder.add_node("act", act)
    builder.add_edge(START, "think")
    builder.add_edge("think", "act")
    builder.add_edge("act", END)
    return builder.compile(name="planner")


def dispatch(state: PlanningState) -> list[Send] | str:
    waiting = [agent for agent in state["agents"] if agent not in state.get("plans", {})]
    if not waiting:
        return END
    return [Send("planner", {"agent": agent, "view": dict(state)}) for agent in waiting]


def coordinator(state: PlanningState) -> dict[str, Any]:
    """Relays this round's messages into the receiver's inbox and keeps the whole conversation."""
    relayed: dict[str, list[dict[str, Any]]] = {}
    for message in state.get("outbox", []):
        relayed.setdefault(message["to"], []).append(message)
    return {
        "round": state.get("round", 1) + 1,
        "outbox": None,
        "inbox": relayed,
        "messages": list(state.get("outbox", [])),
    }


def build_planning_graph(checkpointer: Any = None) -> Any:
    builder = StateGraph(PlanningState, context_schema=PlanningContext)
    builder.add_node("planner", build_planner())
    builder.add_node("coordinator", coordinator)
    builder.add_conditional_edges(START, dispatch, ["planner", END])
    builder.add_edge("planner", "coordinator")
    builder.add_conditional_edges("coordinator", dispatch, ["planner", END])
    return builder.compile(checkpointer=checkpointer, name="coop-planning")
