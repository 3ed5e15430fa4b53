from __future__ import annotations

from typing import Any

from langgraph.runtime import Runtime

from llm_ide.messages.channel import Mailbox
from llm_ide.state.graph_state import AgentState
from llm_ide.variant import AgentContext


def receive_messages(state: AgentState, runtime: Runtime[AgentContext]) -> dict[str, Any]:
    """Before each step: wait for this agent's turn (lockstep), then take the other agent's new messages into the
    state, marked with the step they arrived after (a resumed run shows the same ones)."""
    mailbox: Mailbox | None = runtime.context.resources.get("messages")
    if mailbox is None:
        return {}
    step = state.get("n_operations", 0)
    mailbox.wait_turn(step)
    received = state.get("received", [])  # type: ignore[typeddict-item]
    new = mailbox.receive(len(received))
    return {"received": [*received, *({**message, "step": step} for message in new)]} if new else {}
