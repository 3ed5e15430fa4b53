"""What the doors' tests share (test_doors, test_doors_python_api, test_doors_variants, test_doors_options): a port
nothing listens on, the Studio graphs run in process as `langgraph dev` serves them, the settings without tools."""

from __future__ import annotations

import asyncio
from typing import Any


def studio_run(inputs: dict[str, Any], thread: str) -> dict[str, Any]:
    """The agent graph as `langgraph dev` serves it (llm_ide.studio.graph), run in process on a thread of its own."""
    from langgraph.checkpoint.memory import InMemorySaver

    from llm_ide.studio import graph

    async def run() -> dict[str, Any]:
        async with graph({"configurable": {}}) as compiled:
            served = compiled.copy(update={"checkpointer": InMemorySaver()})
            config = {"configurable": {"thread_id": thread}}
            return await served.ainvoke({"task": "Fix Cart.total.", **inputs}, config)

    return asyncio.run(run())


def studio_graph_run(name: str, inputs: dict[str, Any], thread: str) -> dict[str, Any]:
    """A graph of llm_ide.studio as `langgraph dev` serves it (`name`: navigator_graph, sampled_graph; attempts:
    llm_ide.attempts.studio.graph), in process."""
    from langgraph.checkpoint.memory import InMemorySaver

    from llm_ide import studio
    from llm_ide.attempts import studio as attempts_studio

    made = attempts_studio.graph if name == "attempts" else getattr(studio, name)

    async def run() -> dict[str, Any]:
        async with made({"configurable": {}}) as compiled:
            served = compiled.copy(update={"checkpointer": InMemorySaver()})
            return await served.ainvoke({"task": "Fix Cart.total.", **inputs}, {"configurable": {"thread_id": thread}})

    return asyncio.run(run())


NAVIGATOR, SAMPLED = "navigator_graph", "sampled_graph"


NO_TOOLS = {"environment": {"tools": []}}
