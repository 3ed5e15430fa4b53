"""Prompt-cache hints for the providers that take them. Every prompt of a run extends a stable prefix (the system
part, then the epoch's snapshot and turns): Anthropic caches only up to explicit `cache_control` breakpoints, OpenAI
routes requests with one `prompt_cache_key` to the same cache."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Any

from llm_ide.calls import Message

EPHEMERAL = {"type": "ephemeral"}
ANTHROPIC = {"ChatAnthropic", "ChatAnthropicVertex", "ChatAnthropicBedrock"}
OPENAI = {"ChatOpenAI", "AzureChatOpenAI"}


def cache_key(messages: list[Message]) -> str:
    """One key per system part (formats, actions, task, tool usage): the same for every call of a run and its resume."""
    return key_of(next((m["content"] for m in messages if m["role"] == "system"), ""))


@lru_cache(maxsize=4)  # exact: a function of the text alone, which a run sends with every call
def key_of(system: str) -> str:
    return "llm-ide-" + hashlib.sha256(system.encode()).hexdigest()[:24]


def anthropic_breakpoints(messages: list[Message]) -> list[dict[str, Any]]:
    """Breakpoints after the system part, after the epoch's snapshot (the first user message) and after the last
    message: the next call, which extends this one, reads all of it from the cache (at most 4 are allowed)."""
    marked = {0, next((i for i, m in enumerate(messages) if m["role"] == "user"), 0), len(messages) - 1}
    return [
        {**m, "content": [{"type": "text", "text": m["content"], "cache_control": EPHEMERAL}]} if i in marked else m
        for i, m in enumerate(messages)
    ]


def with_cache_hints(chat: Any, messages: list[Message]) -> tuple[list[Any], dict[str, Any]]:
    """The messages and the invoke keyword arguments carrying the hints `chat`'s provider understands."""
    name = type(chat).__name__
    if name in ANTHROPIC:
        return anthropic_breakpoints(messages), {}
    if name in OPENAI:
        return messages, {"prompt_cache_key": cache_key(messages)}
    return messages, {}
