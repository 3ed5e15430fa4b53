"""A model call: what a model is asked (messages) and answers (a reply, its usage and why it ended), and the call as
it happens, for whoever shows it live: its start (the prompt's size), the reply's text as it streams in (when the
model streams), its end (the tokens it used)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, NotRequired, Protocol, TypedDict

from llm_ide.endpoint import BadCompletion


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
class ModelReply:
    """A reply and its usage; `input_tokens` counts all prompt tokens, of which `cache_read_tokens` were read from
    the provider's prompt cache and `cache_write_tokens` written to it. `estimated`: the counts are estimates from
    the text (the response carried no usage, or an impossible one: `reported_usage`). `finish_reason` "length": the
    reply was cut at the length limit (the request's max_tokens, or the model's own)."""

    text: str
    input_tokens: int
    output_tokens: int
    cost: float
    cache_read_tokens: int = 0
    cache_write_tokens: int = 0
    reported_usage: dict[str, Any] | None = None  # the provider's counts when they were impossible (then estimated)
    estimated: bool = False
    finish_reason: str | None = None  # "stop", "length", … as the endpoint said (None: it did not say)


class Model(Protocol):
    name: str

    action_format: str  # "tools": it is given the actions as tools (requests with `tools`); "text": in its text

    def complete(
        self, messages: list[Message], deadline: float | None = None, tools: list[dict[str, Any]] | None = None
    ) -> ModelReply: ...


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
