"""The replies a run could not use (format errors) and why, read back from its calls: the next call of the same step
and kind answers a rejected reply with the format-error message (`templates.format_error`; where the actions are
tools, as the result of each call the reply made), whose first line says what was wrong. A run that ended on format
errors has its last reply rejected with no next call to say why: the run's error says it."""

from __future__ import annotations

import re
from typing import Any

from llm_ide.calls import with_calls
from llm_ide.errors import FormatErrors
from llm_ide.settings import bundled_yaml

ASSISTANT, ANSWERS = "[assistant]\n", ("\n\n[user]\n", "\n\n[tool]\n")
SEEN = 200  # characters of a reply looked for in the next prompt (a long reply may be capped there)
ENDED = "the run ended on it (agent.max_format_errors reached); its reason is not recorded"


def reply_text(call: dict[str, Any]) -> str:
    """A recorded call's reply as a person reads it: its text, then its tool calls (`→ view {...}`)."""
    calls = [(str(item.get("name")), str(item.get("arguments"))) for item in call.get("tool_calls") or []]
    return with_calls(str(call.get("response") or ""), calls)


def message_start(info: dict[str, Any]) -> str:
    """The fixed text the format-error message starts with (the run's template up to its first placeholder)."""
    template = ((info.get("config") or {}).get("templates") or {}).get("format_error")
    if not isinstance(template, str):
        template = bundled_yaml("default.yaml")["templates"]["format_error"]
    return re.split(r"\{[{%#]", template, maxsplit=1)[0]


def why_rejected(prompt: str, reply: str, start: str) -> str | None:
    """The first line of the message that answered `reply` in `prompt`, when that message is a format error, after its
    fixed start (`Your response could not be used:`): the error, as the run's error says the last one."""
    at = prompt.rfind(ASSISTANT + reply[:SEEN])  # the reply's text (its calls follow it)
    answers = [(found, len(answer)) for answer in ANSWERS if at >= 0 and (found := prompt.find(answer, at)) >= 0]
    if not answers:
        return None
    after, length = min(answers)
    message = prompt[after + length :]
    if not start.strip() or not message.startswith(start):
        return None
    return message.split("\n", 1)[0].removeprefix(start).strip()


def rejected_replies(calls: list[dict[str, Any]], info: dict[str, Any]) -> dict[int, str]:
    """Position in `calls` → why that call's reply was rejected."""
    start, found = message_start(info), {}
    for position, call in enumerate(calls):
        same = (call.get("attempt"), call.get("step"), call.get("kind"))
        later = (c for c in calls[position + 1 :] if (c.get("attempt"), c.get("step"), c.get("kind")) == same)
        following = next(later, None)
        if following is not None and (why := why_rejected(following.get("prompt", ""), call["response"], start)):
            found[position] = why
    if calls and info.get("exit_status") == "format_error" and len(calls) - 1 not in found:
        found[len(calls) - 1] = str(info.get("error") or "").partition(FormatErrors.LAST)[2] or ENDED
    return found
