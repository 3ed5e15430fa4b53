from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.prompting import render_string
from llm_ide.reproduction.record import PhaseState, original, record_of
from llm_ide.reproduction.script import remove_reproduction_script, reproduction_script
from llm_ide.variant import AgentContext


def validate_reproduction(state: PhaseState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """The test just written, run on the original code (the worktree put back as the run found it, before and after):
    kept when it shows the issue (a marker line, else a failing exit status), dropped (and removed) otherwise."""
    ctx = runtime.context
    record = record_of(state)
    pending = record.pop("pending")
    env = ctx.codebase.env
    original(ctx, state)
    run = reproduction_script(env, pending, ctx.settings)
    original(ctx, state)
    kept = run["verdict"] == "reproduced"
    reason = "" if kept else render_string(ctx.settings.reproduction.templates.not_shown, **run)
    scripts = record["scripts"]
    if kept:
        scripts = [
            *scripts,
            {"name": pending["name"], "content": pending["content"], "source": "generated", "before": run},
        ]
    else:
        remove_reproduction_script(env, pending)
    candidate = {**pending, "kept": kept, "reason": reason, "run": run}
    return {"reproduction": {**record, "scripts": scripts, "candidates": [*record["candidates"], candidate]}}
