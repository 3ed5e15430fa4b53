from __future__ import annotations

import time
from typing import Any

from llm_ide.errors import ExitStatus
from llm_ide.prompting import render
from llm_ide.resources import AgentContext
from llm_ide.state.graph_state import AgentState, Usage, empty_usage


def messages_for(ctx: AgentContext, state: AgentState, prompt: str) -> list[dict[str, str]]:
    messages = [
        {"role": "system", "content": render(ctx.templates, "system")},
        {"role": "user", "content": prompt},
    ]
    if retry := state.get("retry"):
        messages += [{"role": "assistant", "content": retry["response"]}, {"role": "user", "content": retry["message"]}]
    return messages


def call_model(ctx: AgentContext, state: AgentState, kind: str, prompt: str) -> tuple[str, Usage]:
    """One model call: the reply text and the run's usage after it; the call is recorded for the trajectory."""
    messages = messages_for(ctx, state, prompt)
    usage = dict(state.get("usage") or empty_usage())
    started = time.perf_counter()
    reply = ctx.model.complete(messages, call_index=usage["api_calls"])
    if ctx.record_call is not None:
        ctx.record_call(
            {
                "index": usage["api_calls"],
                "kind": kind,
                "step": state.get("n_operations", 0),
                "prompt": "\n\n".join(f"[{m['role']}]\n{m['content']}" for m in messages),
                "prompt_chars": sum(len(m["content"]) for m in messages),
                "prompt_tokens": reply.input_tokens,
                "response": reply.text,
                "response_tokens": reply.output_tokens,
                "cost": reply.cost,
                "seconds": round(time.perf_counter() - started, 3),
            }
        )
    if ctx.cost_budget is not None:
        ctx.cost_budget.add(reply.cost)
    usage.update(
        api_calls=usage["api_calls"] + 1,
        input_tokens=usage["input_tokens"] + reply.input_tokens,
        output_tokens=usage["output_tokens"] + reply.output_tokens,
        cost=usage["cost"] + reply.cost,
    )
    return reply.text, Usage(**usage)


def format_failure(
    ctx: AgentContext, state: AgentState, response: str, error: Exception, expected: str
) -> dict[str, Any]:
    errors = state.get("format_errors", 0) + 1
    update: dict[str, Any] = {
        "format_errors": errors,
        "retry": {
            "response": response,
            "message": render(
                ctx.templates, "format_error", error=str(error), expected=render(ctx.templates, expected)
            ),
        },
    }
    if errors >= ctx.settings.agent.max_format_errors:
        update["exit_status"] = ExitStatus.FORMAT_ERROR
    return update
