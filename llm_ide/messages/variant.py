"""The message channel as a variant: `receive_messages` before each step, `send_message` as an action, the messages
received (`received` in the state and the trajectory's info) shown where they arrived in the prompt."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from llm_ide.actions import ActionOutcome, ParamError
from llm_ide.messages.channel import Mailbox
from llm_ide.messages.receive_messages import receive_messages
from llm_ide.variant import Action, Node, Opening, Step, Variant


class MessagesState(TypedDict, total=False):
    received: list[dict[str, Any]]  # the other agent's messages (from, text, seq, step they arrived after)


def send_message(ctx: Any, params: dict[str, Any]) -> ActionOutcome:
    message = params.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ParamError("`message` must be a non-empty text")
    return ActionOutcome(ctx.resources["messages"].send(message.strip()), 0)


def no_channel(ctx: Any, params: dict[str, Any]) -> ActionOutcome:
    raise ParamError("`send_message` is only available when another agent works beside you (coop)")


class Messages(Variant):
    name = "messages"
    state = MessagesState
    step_start = ("receive_messages",)

    def __init__(self, mailbox: Mailbox | None = None) -> None:
        self.mailbox = mailbox  # None: the graph as drawn, no channel yet

    def refuse(self, variants: list[Variant]) -> str | None:
        if any(variant.interactive for variant in variants):
            names = ", ".join(variant.name for variant in variants if variant.interactive)
            return f"{names}: asks a person in one run at a time; it does not combine with two agents messaging"
        return None

    def nodes(self) -> dict[str, Node]:
        return {"receive_messages": receive_messages}

    def actions(self) -> dict[str, Action]:
        return {"send_message": Action(send_message)}

    @classmethod
    def absent_actions(cls) -> dict[str, Action]:
        return {"send_message": Action(no_channel)}

    def open(self, ctx: Any, opening: Opening) -> Any:
        return self.mailbox

    def news(self, ctx: Any, state: dict[str, Any], after: Step) -> str:
        chosen = [message for message in state.get("received", []) if after(message["step"])]
        return self.mailbox.section(chosen) if chosen and self.mailbox is not None else ""

    def info(self, state: dict[str, Any]) -> dict[str, Any]:
        return {"received": state["received"]} if state.get("received") else {}
