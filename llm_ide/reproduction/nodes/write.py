from __future__ import annotations

import re
from typing import Any

from langgraph.runtime import Runtime

from llm_ide.nodes.model_call import Spending
from llm_ide.prompting import render_string
from llm_ide.reproduction.record import PhaseState, record_of
from llm_ide.text import extract_tag
from llm_ide.variant import AgentContext, ModelRequest

FENCE = re.compile(r"^```[\w+-]*\n(.*?)\n?```$", re.DOTALL)


def repository_files(ctx: AgentContext) -> str:
    returncode, output = ctx.codebase.env.run_trusted("git ls-files", 120)
    files = output.decode("utf-8", errors="replace").strip() if returncode == 0 else ""
    limit = ctx.settings.reproduction.files_chars
    return files if len(files) <= limit else files[:limit].rsplit("\n", 1)[0] + "\n…"


def script_in(reply: str) -> str:
    text = (extract_tag(reply, "reproduction", required=False) or "").strip()
    fenced = FENCE.match(text)
    return (fenced.group(1) if fenced else text).strip()


def write_reproduction(state: PhaseState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """One call of the agent's model for a reproduction test: the issue, the repository's files, and the tests dropped
    before with what they printed. A reply without a test counts as a try."""
    ctx = runtime.context
    own = ctx.settings.reproduction
    record = record_of(state)
    dropped = [{**c, "output": (c.get("run") or {}).get("output", "")} for c in record["candidates"] if not c["kept"]]
    prompt = render_string(own.templates.write, task=state["task"], files=repository_files(ctx), dropped=dropped)
    messages = [
        {"role": "system", "content": render_string(own.templates.write_system, **own.markers.model_dump())},
        {"role": "user", "content": prompt},
    ]
    spending = Spending(ctx, state)  # type: ignore[arg-type]
    reply, usage = spending(ModelRequest("write_reproduction", messages)).text, spending.spent()["usage"]
    number = len(record["candidates"]) + 1
    content = script_in(reply)
    pending = {"name": f"reproduce_{number}.py", "content": content + "\n", "source": "generated", "number": number}
    if not content:
        candidate = {**pending, "kept": False, "reason": render_string(own.templates.no_test)}
        return {"reproduction": {**record, "candidates": [*record["candidates"], candidate]}, "usage": usage}
    return {"reproduction": {**record, "pending": pending}, "usage": usage}
