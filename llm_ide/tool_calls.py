"""A reply's tool calls as the run keeps them: in its text, after what the model wrote, each call as
`<tool_call name="view">{"path": "a.py"}</tool_call>` (its arguments as the model sent them). So a reply is one text
everywhere (masked, capped, recorded, parsed, compared by sampling) and reads as it was; `split` gives the calls back.
Messages with tool calls (`Message.tool_calls`, a `tool` message's `tool_call_id`) read the same way in records."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from llm_ide.calls import Message, ToolCallDict

_CALL = re.compile(r'\n?<tool_call name="([^"<>]*)">(.*?)</tool_call>', re.DOTALL)
_CLOSE = "</tool_call"


@dataclass(frozen=True)
class ToolCall:
    """One call as the model made it: the tool's name and its arguments' JSON text (as sent: maybe not JSON)."""

    name: str
    arguments: str

    def args(self) -> Any:
        """The arguments decoded (a ValueError when they are not JSON)."""
        return json.loads(self.arguments) if self.arguments.strip() else {}


def arguments_text(args: Any) -> str:
    """Arguments as a call's JSON text (`</tool_call` escaped inside strings: the recorded form stays readable)."""
    text = args if isinstance(args, str) else json.dumps(args, ensure_ascii=False)
    return text.replace(_CLOSE, "\\u003c/tool_call")


def recorded(text: str, calls: Iterable[ToolCall]) -> str:
    """A reply's text with its calls after it."""
    parts = [
        f'<tool_call name="{call.name.replace(chr(34), "")}">{arguments_text(call.arguments)}</tool_call>'
        for call in calls
    ]
    return "\n".join([text, *parts]) if text and parts else text or "\n".join(parts)


def split(reply: str) -> tuple[str, list[ToolCall]]:
    """A recorded reply's text and its calls, in order."""
    calls = [ToolCall(match.group(1), match.group(2)) for match in _CALL.finditer(reply)]
    return (_CALL.sub("", reply) if calls else reply), calls


def from_message(message: Any) -> list[ToolCall]:
    """The calls of a langchain AI message: those whose arguments parsed, then those whose arguments did not."""
    calls = [
        ToolCall(str(call.get("name") or ""), arguments_text(call.get("args") or {})) for call in message.tool_calls
    ]
    broken = getattr(message, "invalid_tool_calls", None) or []
    return calls + [ToolCall(str(call.get("name") or ""), str(call.get("args") or "")) for call in broken]


def message_text(message: Message) -> str:
    """A message as text: its content, then its tool calls in their recorded form."""
    calls = [ToolCall(call["name"], arguments_text(call["args"])) for call in message.get("tool_calls") or []]
    return recorded(message["content"], calls) if calls else message["content"]


def text_of(messages: Iterable[Message]) -> str:
    return "".join(message_text(message) for message in messages)


def call_dict(call_id: str, name: str, args: dict[str, Any]) -> ToolCallDict:
    return {"id": call_id, "name": name, "args": args}
