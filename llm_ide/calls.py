"""A model call: what a model is asked (messages) and answers (a reply: its text and its tool calls, as data; its usage
and why it ended), and the call as it happens, for whoever shows it live: its start (the prompt's size), the reply's
text as it streams in (when the model streams), its end (the tokens it used)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypedDict

from llm_ide.endpoint import BadCompletion
from llm_ide.text import clean_text


class ToolCallDict(TypedDict):
    id: str
    name: str
    args: dict[str, Any]


class Message(TypedDict):
    """A chat message as langchain takes it: an assistant's may hold tool calls, a `tool` message answers one."""

    role: str
    content: str
    tool_calls: NotRequired[list[ToolCallDict]]
    tool_call_id: NotRequired[str]


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model made it: the tool's name, its arguments as the JSON text the model wrote (which may
    be no JSON, or no object: the reader says so), and the provider's id of the call."""

    name: str
    arguments: str
    id: str = ""

    @staticmethod
    def of(name: str, args: Any, id: str = "") -> ToolCall:
        """A call whose arguments are a value (a mapping: their JSON) or already a text."""
        return ToolCall(name, args if isinstance(args, str) else json.dumps(args, ensure_ascii=False), id)

    def record(self) -> dict[str, str]:
        return {"name": self.name, "arguments": self.arguments, **({"id": self.id} if self.id else {})}


def with_calls(text: str, calls: Iterable[tuple[str, str]]) -> str:
    """A text and the tool calls (name, arguments) after it as a record shows them to a person, each call on a line
    of its own (`→ view {"path": "a.py"}`); never read back."""
    lines = [f"→ {name} {arguments}" for name, arguments in calls]
    return "\n".join([text, *lines]) if text and lines else text or "\n".join(lines)


def message_text(message: Message) -> str:
    """A message as a record shows it: its content, then its tool calls."""
    calls = message.get("tool_calls") or []
    return with_calls(message["content"], ((c["name"], json.dumps(c["args"], ensure_ascii=False)) for c in calls))


def prompt_chars(messages: Iterable[Message]) -> int:
    """What a request's messages hold, in characters: their texts and their calls' names and arguments."""
    return sum(len(message_text(message)) for message in messages)


@dataclass(frozen=True)
class ModelReply:
    """A reply and its usage: its text and its tool calls (data, in the order the model made them); `input_tokens`
    counts all prompt tokens, of which `cache_read_tokens` were read from the provider's prompt cache and
    `cache_write_tokens` written to it. `estimated`: the counts are estimates from the text (the response carried no
    usage, or an impossible one: `reported_usage`). `finish_reason` "length": the reply was cut at the length limit
    (the request's max_tokens, or the model's own)."""

    text: str
    input_tokens: int
    output_tokens: int
    cost: float
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reported_usage: dict[str, Any] | None = None  # the provider's counts when they were impossible (then estimated)
    estimated: bool = False
    finish_reason: str | None = None  # "stop", "length", … as the endpoint said (None: it did not say)
    tool_calls: tuple[ToolCall, ...] = ()

    def shown(self) -> str:
        """The reply as a record shows it: its text, then each call on a line of its own."""
        return with_calls(self.text, ((call.name, call.arguments) for call in self.tool_calls))


class Model(Protocol):
    """A chat model: `takes_tools`, whether a request may give it tools; `tools_by_default`, whether a run whose
    `model.action_format` is `auto` gives them (llm_ide/exchange.py decides)."""

    name: str
    takes_tools: bool
    tools_by_default: bool

    def complete(
        self, messages: list[Message], deadline: float | None = None, tools: list[dict[str, Any]] | None = None
    ) -> ModelReply: ...


def calls_of(message: Any) -> tuple[ToolCall, ...]:
    """The tool calls of a langchain AI message, as data: those whose arguments parsed (their JSON again), then
    those whose arguments did not (their text as sent)."""
    parsed = [(c, arguments_json(c.get("args"))) for c in message.tool_calls]
    broken = [(c, clean_text(str(c.get("args") or ""))) for c in getattr(message, "invalid_tool_calls", None) or []]
    return tuple(ToolCall(str(c.get("name") or ""), args, str(c.get("id") or "")) for c, args in parsed + broken)


def arguments_json(args: Any) -> str:
    """Parsed arguments as JSON text again; arguments too deep to write are said as such (the reader refuses them)."""
    try:
        return clean_text(json.dumps(args if args is not None else {}, ensure_ascii=False))
    except (RecursionError, ValueError, TypeError) as error:
        return f"<arguments that cannot be written as JSON: {type(error).__name__}>"


def written_chars(text: str, calls: tuple[ToolCall, ...]) -> int:
    """The characters a reply wrote: its text and its calls' names and arguments."""
    return len(text) + sum(len(call.name) + len(call.arguments) for call in calls)


def estimate_tokens(text: str) -> int:
    return len(text) // 4


@dataclass(frozen=True)
class CallProgress:
    kind: Literal["start", "text", "end"]
    model: str
    prompt_tokens: int = 0  # start: estimated from the prompt; end: as the provider counted them
    output_tokens: int = 0  # text: estimated from what streamed so far; end: as counted
    text: str = ""  # text: the piece that just arrived


CallListener = Callable[[CallProgress], None]


@dataclass
class Call:
    listener: CallListener
    model: str
    prompt_tokens: int
    streamed: str = ""
    output_tokens: int = 0

    def start(self) -> None:
        """The request goes out (again, after a retry: what streamed before is dropped)."""
        self.streamed = ""
        self.listener(CallProgress("start", self.model, prompt_tokens=self.prompt_tokens))

    def text(self, piece: str) -> None:
        self.streamed += piece
        self.listener(CallProgress("text", self.model, output_tokens=len(self.streamed) // 4, text=piece))

    def replied(self, input_tokens: int, output_tokens: int) -> None:
        self.prompt_tokens, self.output_tokens = input_tokens, output_tokens


@contextmanager
def observed(listener: CallListener | None, model: str, prompt_chars: int) -> Iterator[Call]:
    """One model call told to `listener` (nothing when None): start now, end however the call ends."""
    call = Call(listener or (lambda progress: None), model, prompt_chars // 4)
    call.start()
    try:
        yield call
    finally:
        call.listener(CallProgress("end", model, call.prompt_tokens, call.output_tokens))


def streamed(chat: Any, payload: Any, hints: dict[str, Any], call: Call) -> Any:
    """`chat`'s reply requested as a stream, each piece of text told to `call` as it arrives, the pieces summed into
    one message (its text and usage; an OpenAI-style endpoint is asked to send the usage at the end)."""
    from langchain_openai import ChatOpenAI

    options = {"stream_usage": True} if isinstance(chat, ChatOpenAI) else {}
    if call.streamed:  # a retry after a stream that broke off
        call.start()
    message = None
    for chunk in chat.stream(payload, **hints, **options):
        message = chunk if message is None else message + chunk
        if chunk.text:
            call.text(chunk.text)
    if message is None:
        raise BadCompletion("the streamed reply held nothing")
    return message
