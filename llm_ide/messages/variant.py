"""The message channel as a variant: `receive_messages` before each step, `send_message` as an action, the messages
received (`received` in the state and the trajectory's info) shown where they arrived in the prompt."""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict

from llm_ide.codebase import ActionOutcome, ParamError
from llm_ide.messages.channel import Mailbox
from llm_ide.messages.receive_messages import receive_messages
from llm_ide.settings import bundled_yaml
from llm_ide.state.operations import OperationNode
from llm_ide.variant import Action, ActionResult, AgentContext, Hook, Opening, PromptParts, State, Step, Variant


class MessagesState(TypedDict, total=False):
    received: list[dict[str, Any]]  # the other agent's messages (from, text, seq, step they arrived after)


def send_message(ctx: AgentContext, state: State, node: OperationNode) -> ActionResult:
    message = node.action_params.get("message")
    if not isinstance(message, str) or not message.strip():
        raise ParamError("`message` must be a non-empty text")
    return ActionResult(node).settled(ActionOutcome(ctx.resources["messages"].send(message.strip()), 0))


def no_channel(ctx: AgentContext, params: dict[str, Any]) -> ActionOutcome:
    raise ParamError("`send_message` is only available when another agent works beside you (coop)")


class Messages(Variant):
    name = "messages"
    state = MessagesState
    actions = {
        "send_message": Action(send_message, no_channel, schema=bundled_yaml("messages.yaml")["tools"]["send_message"])
    }

    def __init__(self, mailbox: Mailbox | None = None) -> None:
        self.mailbox = mailbox  # None: the graph as drawn, no channel yet

    def nodes(self) -> list[Hook]:
        return [Hook("receive_messages", receive_messages)]

    def open(self, ctx: AgentContext, opening: Opening) -> Any:
        return self.mailbox

    def prompt(self, ctx: AgentContext, state: State) -> PromptParts:
        received = state.get("received", [])
        if not received or self.mailbox is None:
            return PromptParts()
        mailbox = self.mailbox

        def news(after: Step) -> str:
            return mailbox.section([message for message in received if after(message["step"])])

        return PromptParts(news=news)

    def info(self, state: State) -> dict[str, Any]:
        return {"received": state["received"]} if state.get("received") else {}
