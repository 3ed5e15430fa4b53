"""Trajectories → RunView: llm-ide's own (`llm-ide-1`, an operation tree) and mini-swe-agent's (a linear chain)."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from llm_ide.inspector.context_rows import prompt_rows, shown_in_prompts, step_prompts
from llm_ide.inspector.model import (
    AttemptView,
    CallView,
    ChunkHeat,
    MessageView,
    NavigatorView,
    NodeView,
    RunView,
    ScriptView,
    StepStat,
    denial,
)
from llm_ide.inspector.recorded import TrajectoryError, llm_ide_trajectory, malformed, read_json
from llm_ide.inspector.rejected import rejected_replies, reply_text
from llm_ide.priced import navigator_priced, run_priced
from llm_ide.state.context import ScoreParams, score_steps
from llm_ide.state.operations import node_of, reasoning_chain

MINI_FORMAT = "mini-swe-agent-1"
MINI_COMMAND = re.compile(r"```(?:bash|sh)?\s*\n(.*?)\n```", re.DOTALL)
MARK_FIELDS = {"denied": "denied", "review": "review", "candidates": "sampled"}
BEFORE_STEPS = {"write_reproduction": "reproduction tests written"}  # call kinds of a phase before the first step


def refuse_planner_turns(data: dict[str, Any], path: Path) -> None:
    """A coop planner's turns (`planner_<n>.traj.json`) are not a run: every view refuses them in the same line."""
    if "turns" in data and "operations" not in data:
        raise TrajectoryError(f"{path} is a coop planner's turns (JSON), not an agent run's trajectory")


def load_run(path: Path) -> RunView:
    data = read_json(path)
    refuse_planner_turns(data, path)
    try:
        if data.get("trajectory_format") == MINI_FORMAT:
            return mini_run(data, path)
        if "operations" in data:
            data, notes = llm_ide_trajectory(data, path, prompts=True)
            return llm_ide_run(data, path).model_copy(update={"notes": notes})
    except (KeyError, TypeError, ValueError, AttributeError) as error:
        raise malformed(path, error) from None
    raise TrajectoryError(f"{path}: neither an llm-ide nor a {MINI_FORMAT} trajectory")


def llm_ide_run(data: dict[str, Any], path: Path) -> RunView:
    info = data.get("info") or {}
    stats = info.get("model_stats") or {}
    operations = data["operations"]
    recorded = data["model_calls"]
    kept = [call_view(call) for call in recorded]
    for position, why in rejected_replies(recorded, info).items():
        kept[position].rejected = why
    assign_steps(kept)
    paid = [call_view(call) for call in data.get("discarded_calls") or []]  # each before the call that replaced it
    calls = sorted([*kept, *paid], key=lambda call: (call.index, not call.discarded)) if paid else kept
    nodes = tree_nodes(operations, calls)
    memory = (info.get("config") or {}).get("memory") or {}
    return RunView(
        title=str(info.get("run_id") or path.name.removesuffix(".traj.json")),
        source_format=str(data.get("format") or "llm-ide"),
        exit_status=str(info.get("exit_status") or ""),
        error=str(info.get("error") or ""),
        model=str(info.get("model") or ""),
        task=str(data.get("task") or ""),
        patch=str(info.get("submission") or ""),
        cost=float(stats.get("cost") or 0.0),
        priced=run_priced(info),
        api_calls=int(stats.get("api_calls") or len(calls)),
        discarded=int(stats.get("discarded_calls") or 0),
        input_tokens=int(stats.get("input_tokens") or 0),
        output_tokens=int(stats.get("output_tokens") or 0),
        estimated=int(stats.get("estimated_calls") or 0),
        elapsed=float(info.get("elapsed") or 0.0),
        nodes=nodes,
        calls=calls,
        heat=heat_strips(data.get("code_context") or [], memory, len(operations), kept),
        steps=step_stats(calls),
        attempts=[AttemptView(**attempt) for attempt in info.get("attempts") or []],
        messages=[
            MessageView(sender=str(m.get("from")), text=str(m.get("text")), step=int(m.get("step") or 0))
            for m in info.get("received") or []
        ],
        navigator=navigator_view(info.get("navigator"), navigator_priced(info)),
        reproductions=script_views(info.get("reproduction") or {}),
        dropped=sum(not c.get("kept") for c in (info.get("reproduction") or {}).get("candidates") or []),
    )


def script_views(record: dict[str, Any]) -> list[ScriptView]:
    after = record.get("after") or {}
    verdict = lambda run: f"{run.get('verdict')} (exit {run.get('returncode')})"  # noqa: E731
    return [
        ScriptView(
            name=str(item.get("name")),
            source=str(item.get("source")),
            before=verdict(item.get("before") or {}),
            after=verdict(after[item["name"]]) if item.get("name") in after else "",
            output=str((item.get("before") or {}).get("output") or ""),
        )
        for item in record.get("scripts") or []
    ]


def navigator_view(record: dict[str, Any] | None, priced: bool = True) -> NavigatorView | None:
    if not record:
        return None
    usage = record.get("usage") or {}
    return NavigatorView(
        mode=str(record.get("mode") or ""),
        plan=str(record.get("plan") or ""),
        calls=int(usage.get("api_calls", usage.get("calls")) or 0),
        tokens=int(usage.get("input_tokens") or 0) + int(usage.get("output_tokens") or 0),
        estimated=int(usage.get("estimated_calls") or 0),
        cost=float(usage.get("cost") or 0.0),
        priced=priced,
        decisions=list(record.get("decisions") or []),
        reviews=list(record.get("reviews") or []),
        guidance=list(record.get("guidance") or []),
        ended=str(record.get("ended") or ""),
    )


def call_view(call: dict[str, Any]) -> CallView:
    details = call.get("input_token_details") or {}
    cached = call.get("cache_read_tokens", call.get("cached_tokens", details.get("cache_read", 0))) or 0
    fields = {key: call[key] for key in CallView.model_fields if key in call and call[key] is not None}
    return CallView(**{**fields, "response": reply_text(call), "cached_tokens": int(cached)})


def assign_steps(calls: list[CallView]) -> None:
    """Calls recorded without their step (older trajectories): a step ends with an act call that is not retried."""
    step = 0
    for position, call in enumerate(calls):
        if call.step is not None:
            step = call.step
            continue
        call.step = step
        retried = position + 1 < len(calls) and calls[position + 1].kind == call.kind == "act"
        if call.kind == "act" and not retried:
            step += 1


def tree_nodes(operations: list[dict[str, Any]], calls: list[CallView]) -> list[NodeView]:
    """Nodes with their marks and calls (not those of a phase before the steps: their step is 0, before the first
    operation); the reasoning chain is each attempt's own (ids restart in every attempt)."""
    chain: set[tuple[int, int]] = set()
    for attempt in sorted({int(op.get("attempt") or 0) for op in operations}):
        records = [node_of(op) for op in operations if int(op.get("attempt") or 0) == attempt]
        chain |= {(attempt, node.id) for node in reasoning_chain(records)}
    nodes = []
    for op in operations:
        node_id, attempt = op["id"], int(op.get("attempt") or 0)
        mine = [
            (position, c)
            for position, c in enumerate(calls)
            if c.attempt == attempt
            and c.kind not in BEFORE_STEPS
            and ((c.kind != "reflect" and c.step == node_id) or (c.kind == "reflect" and c.step == node_id + 1))
        ]
        marks = ["chain" if (attempt, node_id) in chain else "failed"]
        if op.get("bad_action"):
            marks.append("bad")
        marks += [mark for field, mark in MARK_FIELDS.items() if op.get(field)]
        fields = {key: op[key] for key in NodeView.model_fields if key in op}
        said = {"denied": denial(op.get("denied"))} | ({"returncode": None} if op.get("denied") else {})
        fields |= said | {"marks": marks, "calls": [at for at, _ in mine], "cost": sum(c.cost for _, c in mine)}
        nodes.append(NodeView(**fields))
    return nodes


def heat_strips(
    chunks: list[dict[str, Any]], memory: dict[str, Any], steps: int, calls: list[CallView]
) -> list[ChunkHeat]:
    """Replays the decayed score S_t = γ·S_{t−1} + α·A_t + β·R_t of each chunk; it was shown at step t when its rows
    were in that step's prompt's code context (a step whose prompt the calls log lost: when S_t is above the
    threshold or the operation accessed it)."""
    params = ScoreParams(
        float(memory.get("alpha", 1.0)),
        float(memory.get("beta", 1.0)),
        float(memory.get("gamma", 0.9)),
        float(memory.get("threshold", 0.05)),
    )
    prompts = step_prompts(calls)
    rows = [prompt_rows(prompts[step]) if step in prompts else None for step in range(steps)]
    strips = []
    for chunk in chunks:
        activity = chunk.get("activity") or {}
        accessed, referred = (padded(activity.get(key) or [], steps) for key in ("accessed", "referred"))
        series = list(score_steps(accessed, referred, params))
        scores = [round(score, 3) for score in series]
        lines = sorted(chunk.get("lines") or [])
        held = shown_in_prompts(chunk["file_path"], lines, rows)
        estimated = (score > params.threshold or a == 1 for score, a in zip(series, accessed, strict=True))
        shown = [guess if known is None else known for known, guess in zip(held, estimated, strict=True)]
        scope = ".".join(part for part in (chunk.get("class_name"), chunk.get("function")) if part)
        label = f"{chunk['file_path']}:{line_ranges(lines)}{' ' + scope if scope else ''}"
        strips.append(ChunkHeat(label=label, file_path=chunk["file_path"], lines=lines, scores=scores, shown=shown))
    return strips


def padded(values: list[int], steps: int) -> list[int]:
    """A chunk's activity over `steps` operations (0 after its last entry)."""
    return [*values[:steps], *[0] * (steps - len(values))]


def line_ranges(lines: list[int]) -> str:
    """[1, 2, 3, 8, 9] → "1-3,8-9"."""
    ranges: list[list[int]] = []
    for line in lines:
        if ranges and line == ranges[-1][1] + 1:
            ranges[-1][1] = line
        else:
            ranges.append([line, line])
    return ",".join(f"{a}-{b}" if a != b else str(a) for a, b in ranges)


def step_stats(calls: list[CallView]) -> list[StepStat]:
    """Each step's sums, a step of each attempt apart (their steps are counted from 1 in each), a phase before the
    steps (the reproduction tests written) before them, and in a run of attempts the choice among them (its calls of
    no attempt) last."""
    attempted = any(call.attempt for call in calls)
    stats: dict[tuple[float, int], StepStat] = {}
    for call in calls:
        choice, before = attempted and not call.attempt, BEFORE_STEPS.get(call.kind)
        key = (math.inf, 0) if choice else (call.attempt, -1 if before else call.step or 0)
        what = before or f"step {key[1] + 1}"
        label = "choice" if choice else f"attempt {call.attempt}, " * bool(call.attempt) + what
        stat = stats.setdefault(key, StepStat(step=key[1], label=label))
        stat.prompt_chars += call.prompt_chars
        stat.cached_tokens += call.cached_tokens
        stat.uncached_tokens += max(0, call.prompt_tokens - call.cached_tokens)
        stat.output_tokens += call.response_tokens
        stat.cost += call.cost
    return [stats[key] for key in sorted(stats)]


def mini_run(data: dict[str, Any], path: Path) -> RunView:
    """A mini-swe-agent run is a chain: each assistant message is one operation, the next user message its output."""
    info = data.get("info") or {}
    messages = data.get("messages") or []
    nodes, calls = list[NodeView](), list[CallView]()
    task = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    for position, message in enumerate(messages):
        if message.get("role") != "assistant":
            continue
        text = content_text(message)
        step = len(nodes)
        following = messages[position + 1] if position + 1 < len(messages) else {}
        observation = content_text(following) if following.get("role") == "user" else ""
        calls.append(mini_call(messages, position, step))
        command = MINI_COMMAND.search(text)
        thought = text[: command.start()].strip() if command else text.strip()
        returncode = re.search(r"<returncode>(-?\d+)</returncode>", observation)
        nodes.append(
            NodeView(
                id=step,
                parent_id=step - 1 if step else None,
                action_type="bash" if command else "(no command)",
                action_params={"command": command.group(1)} if command else {},
                thought=thought.removeprefix("THOUGHT:").strip(),
                observation=observation,
                returncode=int(returncode.group(1)) if returncode else None,
                marks=["chain"],
                calls=[step],
            )
        )
    stats = info.get("model_stats") or {}
    reported = [message_usage(m) for m in messages if m.get("role") == "assistant" and message_usage(m)]
    return RunView(
        title=str(data.get("instance_id") or path.name.removesuffix(".traj.json")),
        source_format=MINI_FORMAT,
        exit_status=str(info.get("exit_status") or ""),
        model=str((((info.get("config") or {}).get("model") or {}).get("model_name")) or ""),
        task=task,
        patch=str(info.get("submission") or ""),
        cost=float(stats.get("instance_cost") or 0.0),
        api_calls=int(stats.get("api_calls") or len(calls)),
        input_tokens=sum(call.prompt_tokens for call in calls),
        output_tokens=sum(call.response_tokens for call in calls),
        usage_calls=len(reported) if reported else None,
        nodes=nodes,
        calls=calls,
        steps=step_stats(calls),
    )


def mini_call(messages: list[dict[str, Any]], position: int, step: int) -> CallView:
    """The call that made the reply at `position`: its prompt the whole history before it, its usage where kept."""
    usage = message_usage(messages[position])
    cached = ((usage.get("prompt_tokens_details") or {}).get("cached_tokens")) or 0
    prompt_chars = sum(len(content_text(m)) for m in messages[:position])
    return CallView(
        index=step,
        kind="step",
        step=step,
        response=content_text(messages[position]),
        prompt_chars=prompt_chars,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        cached_tokens=int(cached),
        response_tokens=int(usage.get("completion_tokens") or 0),
        cost=float(usage.get("cost") or 0.0),  # litellm's, where the provider's usage carries it
        prompt=f"({position} earlier messages, {prompt_chars:,} characters: the whole history)",
    )


def message_usage(message: dict[str, Any]) -> dict[str, Any]:
    """The usage the provider said for a mini-swe-agent reply (litellm's response, kept in its `extra`), or none."""
    return (((message.get("extra") or {}).get("response") or {}).get("usage")) or {}


def content_text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, list):
        return "\n".join(str(part.get("text", "")) if isinstance(part, dict) else str(part) for part in content)
    return "" if content is None else str(content)
