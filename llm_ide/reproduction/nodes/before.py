from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.reproduction.record import PhaseState, original, record_of, tell
from llm_ide.reproduction.script import reproduction_script
from llm_ide.variant import AgentContext


def reproduce_before(state: PhaseState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The given scripts run on the original code (a generated one's validation was its run there); the phase done."""
    ctx = runtime.context
    record = record_of(state)
    known = {item["content"] for item in record["scripts"]}
    fresh = [item for item in ctx.resources.get("reproduction") or [] if item["content"] not in known]
    scripts = list(record["scripts"])
    for item in fresh:
        original(ctx, state)
        scripts.append({**item, "before": (run := reproduction_script(ctx.codebase.env, item, ctx.settings))})
        tell(ctx, item, run, "on the original code")
    if fresh:
        original(ctx, state)
    scripts.sort(key=lambda item: item["source"] != "given")
    return {"reproduction": {**record, "scripts": scripts, "done": True}}
