"""The figures of a replay, step by step, for llm-ide (its requests on the wire) and the original run (its requests
rebuilt from the trajectory), priced the same way and matched against the same edits and references."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from jinja2 import TemplateError
from jinja2.sandbox import SandboxedEnvironment

from llm_ide.replay.endpoint import prompt_chars, shared_prefix
from llm_ide.replay.formats import Message, Request, Step, Trajectory
from llm_ide.replay.metrics import EditLines, Text, edit_lines, grounding, recall, references, rewritten
from llm_ide.replay.model import HISTORY, AgentStep, Fraction, Miss, Prices, StepReport
from llm_ide.replay.script import WireCall
from llm_ide.replay.tree import TreeWatch


@dataclass(frozen=True)
class Priced:
    """One request of either agent: its step, messages, reply, and the prefix shared with the previous request."""

    step: int
    messages: list[Message]
    raw: int
    cached: int
    reply: str

    @property
    def output(self) -> int:
        return len(self.reply)


def original_calls(requests: list[Request]) -> list[Priced]:
    priced, previous = [], []
    for request in requests:
        cached = shared_prefix(previous, request.messages)
        priced.append(Priced(request.step, request.messages, prompt_chars(request.messages), cached, request.written))
        previous = request.messages
    return priced


def full_history_calls(trajectory: Trajectory, operations: list[dict[str, Any]]) -> list[Priced] | None:
    """The original's requests as full history sends them on the replay's own outputs: each observation rendered again
    by the original's template over the replayed command's output (as the run recorded it, its last line ended) and
    return code: both agents billed for the same session where this machine's commands print otherwise than the
    original's did (None: no template)."""
    if not trajectory.observation_template or not trajectory.requests:
        return None
    try:
        template = SandboxedEnvironment().from_string(trajectory.observation_template)
        messages = list(trajectory.requests[-1].messages)
        for position, index in trajectory.observed.items():
            operation = operations[index] if index < len(operations) else {}
            if position < len(messages) and operation.get("returncode") is not None:
                shown = str(operation.get("observation") or "")  # the run keeps it without its last newline
                output = {"output": shown and f"{shown}\n", "returncode": operation["returncode"]}
                messages[position] = {"role": "user", "content": template.render(output=output)}
    except (TemplateError, TypeError, ValueError, KeyError, ArithmeticError):  # the trajectory's template, not ours
        return None
    return original_calls([replace(r, messages=messages[: len(r.messages)]) for r in trajectory.requests])


def wire_calls(calls: list[WireCall]) -> list[Priced]:
    return [Priced(call.step, call.messages, call.raw, call.cached, call.response) for call in calls]


def issuing_prompt(agent: str, calls: list[Priced]) -> list[Message]:
    """The messages of the request that issued the step's action: its last. llm-ide's act call continues the reflect
    call of its step, whose reply the replay took from the original's thought that goes with this very action (its
    first sentence): that reply is not counted, the memory did not hold it."""
    messages = calls[-1].messages
    if agent != "llm-ide" or len(calls) < 2:
        return messages
    supplied = calls[-2].reply
    found = [i for i, m in enumerate(messages) if m["role"] == "assistant" and m["content"] == supplied]
    return messages[: found[-1]] + messages[found[-1] + 1 :] if found else messages


def action_label(step: Step) -> str:
    if step.action_type == "bash":
        first = str(step.params.get("command") or "").strip().splitlines() or [""]
        return f"bash: {first[0][:100]}"
    detail = step.params.get("path") or step.params.get("pattern") or ""
    return f"{step.action_type} {detail}".strip()


def command_text(step: Step) -> str:
    """What a step's action says, for its references: a bash command, or the string parameters of another action."""
    if step.action_type == "bash":
        return str(step.params.get("command") or "")
    return "\n".join(str(value) for value in step.params.values() if isinstance(value, str | int))


def agent_step(calls: list[Priced], prices: Prices) -> AgentStep:
    figures = AgentStep(
        calls=len(calls),
        raw=sum(c.raw for c in calls),
        cached=sum(c.cached for c in calls),
        output=sum(c.output for c in calls),
    )
    figures.bill = prices.bill(figures.raw, figures.cached, figures.output)
    return figures


def fidelity(
    figures: AgentStep, edit: EditLines, tokens: list[str], prompt: Text, step: int, agent: str, misses: list[Miss]
) -> None:
    """Fills the figures of what `prompt` held; its misses appended to `misses`."""
    removed, context = grounding(edit, prompt)
    found = recall(tokens, prompt)
    figures.pre_image, figures.context, figures.references = (
        Fraction(total=c.total, present=c.present) for c in (removed, context, found)
    )
    if removed.total:
        figures.edits, figures.edits_grounded = 1, int(removed.present == removed.total)
    for kind, counts in (("pre-image", removed), ("context", context), ("reference", found)):
        misses += [Miss(step=step, agent=agent, kind=kind, what=what) for what in counts.missing]


def measure(
    trajectory: Trajectory,
    calls: list[WireCall],
    watch: TreeWatch,
    operations: list[dict[str, Any]],
    prices: Prices,
) -> tuple[list[StepReport], list[Miss]]:
    """Every step the replay reached: the bill of each agent's calls, and what the prompt that issued its action held
    of the command's edit and references."""
    agents = {"llm-ide": wire_calls(calls), "original": original_calls(trajectory.requests)}
    history = full_history_calls(trajectory, operations)
    system = calls[0].messages[0]["content"] if calls and calls[0].messages[0]["role"] == "system" else ""
    fixed = Text(f"{trajectory.fixed_text}\n{system}")
    seen = {"original": "", "llm-ide": ""}
    reports: list[StepReport] = []
    misses: list[Miss] = []
    for number, step in enumerate(trajectory.steps[: len(operations)], start=1):
        operation = operations[number - 1]
        changes = watch.changes(number)
        edit = edit_lines(changes, rewritten(command_text(step), [change.path for change in changes]))
        tokens = references(command_text(step), [Text(text) for text in seen.values()], fixed)
        figures = {}
        for agent, priced in agents.items():
            mine = [call for call in priced if call.step == number]
            figures[agent] = agent_step(mine, prices)
            if mine:  # the prompt that issued the action: the step's last request
                prompt = Text.of(issuing_prompt(agent, mine))
                fidelity(figures[agent], edit, tokens, prompt, number, agent, misses)
        if history is not None:  # billed only: what it holds is the original's, outputs aside
            figures[HISTORY] = agent_step([call for call in history if call.step == number], prices)
        reports.append(
            StepReport(
                step=number,
                action=action_label(step),
                returncode=operation.get("returncode"),
                original_returncode=step.returncode,
                edited=[change.path for change in changes],
                references=tokens,
                agents=figures,
            )
        )
        seen["original"] += step.observation + "\n"
        seen["llm-ide"] += str(operation.get("observation") or "") + "\n"
    return reports, misses


def divergence(trajectory: Trajectory, operations: list[dict[str, Any]], rewrite: Callable[[str], str]) -> str:
    """Where the replayed operations stop being the trajectory's actions ("" when they never do)."""
    for number, (step, operation) in enumerate(zip(trajectory.steps, operations, strict=False), start=1):
        command = step.params.get("command")
        if operation.get("action_type") != step.action_type or (
            isinstance(command, str) and operation.get("action_params", {}).get("command") != rewrite(command)
        ):
            replayed = json.dumps(operation.get("action_params"), ensure_ascii=False)[:120]
            return f"step {number}: replayed {operation.get('action_type')} {replayed}, not {action_label(step)}"
    if len(operations) < len(trajectory.steps):
        return f"the run ended after {len(operations)} of {len(trajectory.steps)} steps"
    return ""
