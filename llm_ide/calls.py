"""A model call: what a model is asked (messages) and answers (a reply, its usage and why it ended), and the call as
it happens, for whoever shows it live: its start (the prompt's size), the reply's text as it streams in (when the
model streams), its end (the tokens it used)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
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


# A BPE tokenizer's pieces, roughly: a run of letters, a digit, a line break, a run of spaces (an indentation), a mark.
# Each costs its weight in tokens (a mark often merges with its neighbour: less than one; a long or camel-case word
# splits: more), fitted on the prompts of real agent runs against a real server's tokenizer (docs/local-models.md).
TOKEN_PIECES = re.compile(r"[^\W\d_]+|\d|\n| +|\s|[^\w\s]|_")
WORD, LONG_WORD_LETTER, CAMEL_CASE, LINE, INDENT, DIGIT, MARK = 1.26, 0.04, 1.84, 1.6, 0.67, 1.46, 0.37
MESSAGE_TOKENS = 4  # a chat template's tokens around each message (its role, its start and end markers)
REQUEST_TOKENS = 3  # around the whole prompt (the assistant's turn opened)


def estimate_tokens(text: str) -> int:
    """The tokens of `text` for a BPE tokenizer, without the tokenizer: within ±10% of a server's count on the
    prompts of an agent (code, command output, prose)."""
    total = 0.0
    for piece in TOKEN_PIECES.findall(text):
        first = piece[0]
        if first.isalpha():
            total += WORD + LONG_WORD_LETTER * max(0, len(piece) - 4)
            total += CAMEL_CASE if not piece.isupper() and any(char.isupper() for char in piece[1:]) else 0.0
        elif first == "\n":
            total += LINE
        elif first == " ":
            total += INDENT if len(piece) > 1 else 0.0
        elif first.isdigit():
            total += DIGIT
        elif not first.isspace():
            total += MARK
    return round(total)


@dataclass
class RunningEstimate:
    """The tokens of a text that grows piece by piece (a streaming reply), estimated in time linear in its length:
    what lies before its last space is counted once."""

    text: str = ""
    settled: int = 0  # the tokens of text[:at]
    at: int = 0

    def add(self, piece: str) -> int:
        self.text += piece
        cut = max(self.text.rfind(" "), self.text.rfind("\n")) + 1
        if cut > self.at:
            self.settled += estimate_tokens(self.text[self.at : cut])
            self.at = cut
        return self.settled + estimate_tokens(self.text[self.at :])


def message_text(message: Message) -> str:
    """A message's text as its server sees it: its content, and the tool calls it holds (their JSON)."""
    calls = message.get("tool_calls") or []
    return str(message.get("content") or "") + "".join(
        json.dumps(call.get("args", {})) + call["name"] for call in calls
    )


def estimate_prompt_tokens(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
    """The prompt's tokens for a chat server: each message's with the template's markers around it, and the tools'
    definitions (which a server renders into the prompt as JSON)."""
    tokens = REQUEST_TOKENS + sum(MESSAGE_TOKENS + estimate_tokens(message_text(message)) for message in messages)
    return tokens + (estimate_tokens(json.dumps(tools)) if tools else 0)


@dataclass(frozen=True)
class CallProgress:
    kind: Literal["start", "text", "end"]
    model: str
    prompt_tokens: int = 0  # start: estimated from the prompt; end: as the provider counted them
    output_tokens: int = 0  # text: estimated from what streamed so far; end: as counted
    text: str = ""  # text: the piece that just arrived
    seconds: float = 0.0  # since the request went out
    rate: float | None = None  # output tokens per second since the first one came (None: under a second of them)

    def as_event(self) -> dict[str, Any]:
        """The progress as a stream event (JSON) for Studio clients."""
        rate = None if self.rate is None else round(self.rate, 2)
        return {
            "event": "model",
            "kind": self.kind,
            "model": self.model,
            "seconds": round(self.seconds, 2),
            "prompt_tokens": self.prompt_tokens,
            "output_tokens": self.output_tokens,
            "tokens_per_second": rate,
            "text": self.text,
        }


CallListener = Callable[[CallProgress], None]


class TokenEstimates:
    """One model's token estimates before its server counts them (the live line's, a reply without usage): the
    heuristic's, scaled by how the server's counts compared with it so far (a running mean). The tools' definitions
    have their own factor: a server may render them into the prompt (OpenAI's, Anthropic's, most chat templates) or
    not show them at all (a template without tools)."""

    WEIGHT = 0.5  # of the latest call's ratio in the running one
    MAX_TOOLS_FACTOR = 3.0

    def __init__(self) -> None:
        self.prompt_ratio = self.output_ratio = self.tools_factor = 1.0
        self.learnt = self.learnt_tools = False

    @staticmethod
    def parts(messages: list[Message], tools: list[dict[str, Any]] | None = None) -> tuple[int, int]:
        """The heuristic's tokens of the messages (with the template's markers) and of the tools' definitions."""
        return estimate_prompt_tokens(messages), estimate_tokens(json.dumps(tools)) if tools else 0

    def scaled(self, parts: tuple[int, int]) -> int:
        return round(parts[0] * self.prompt_ratio + parts[1] * self.tools_factor)

    def prompt(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> int:
        return self.scaled(self.parts(messages, tools))

    def output(self, text: str) -> int:
        return round(estimate_tokens(text) * self.output_ratio)

    def learn(self, parts: tuple[int, int], text: str, input_tokens: int, output_tokens: int) -> None:
        """A call's counts as its server gave them, beside the heuristic's `parts` of its prompt and its reply. With
        tools, what the messages do not explain is the tools' (their factor learnt); without, the messages' ratio."""
        messages, tools = parts
        if messages <= 0 or input_tokens <= 0:
            return
        if tools:
            weight = self.WEIGHT if self.learnt_tools else 1.0
            factor = min(self.MAX_TOOLS_FACTOR, max(0.0, (input_tokens - messages * self.prompt_ratio) / tools))
            self.tools_factor += weight * (factor - self.tools_factor)
            self.learnt_tools = True
        else:
            weight = self.WEIGHT if self.learnt else 1.0
            self.prompt_ratio += weight * (input_tokens / messages - self.prompt_ratio)
            self.learnt = True
        written = estimate_tokens(text)
        if written >= 20 and output_tokens > 0:  # a reply long enough to say something
            self.output_ratio += self.WEIGHT * (output_tokens / written - self.output_ratio)


@dataclass
class Call:
    listener: CallListener
    model: str
    prompt_tokens: int
    streamed: str = ""
    output_tokens: int = 0
    started: float = 0.0
    first: float | None = None  # when the first piece of the reply came
    output_scale: float = 1.0
    counted: RunningEstimate = field(default_factory=RunningEstimate)  # the streamed text's tokens
    arguments: RunningEstimate = field(default_factory=RunningEstimate)  # of the tool calls streamed so far

    def start(self) -> None:
        """The request goes out (again, after a retry: what streamed before is dropped)."""
        self.streamed, self.started, self.first = "", time.monotonic(), None
        self.counted, self.arguments = RunningEstimate(), RunningEstimate()
        self.listener(CallProgress("start", self.model, prompt_tokens=self.prompt_tokens))

    def text(self, piece: str, arguments: str = "") -> None:
        """A piece of the reply: text (shown), the arguments of a tool call (counted)."""
        now = time.monotonic()
        self.first = self.first or now
        self.streamed += piece
        out = round((self.counted.add(piece) + self.arguments.add(arguments)) * self.output_scale)
        rate = out / (now - self.first) if now - self.first >= 1 else None
        self.listener(CallProgress("text", self.model, 0, out, piece, now - self.started, rate))

    def replied(self, input_tokens: int, output_tokens: int) -> None:
        self.prompt_tokens, self.output_tokens = input_tokens, output_tokens

    def ended(self) -> None:
        now = time.monotonic()
        rate = self.output_tokens / (now - self.first) if self.first and now - self.first >= 1 else None
        self.listener(
            CallProgress("end", self.model, self.prompt_tokens, self.output_tokens, "", now - self.started, rate)
        )


@contextmanager
def observed(
    listener: CallListener | None, model: str, prompt_tokens: int, output_scale: float = 1.0
) -> Iterator[Call]:
    """One model call told to `listener` (nothing when None): start now (`prompt_tokens`: estimated), end however the
    call ends; the reply's tokens as it streams are estimated from its text (times `output_scale`)."""
    call = Call(listener or (lambda progress: None), model, prompt_tokens, output_scale=output_scale)
    call.start()
    try:
        yield call
    finally:
        call.ended()


def streamed(
    chat: Any, payload: Any, hints: dict[str, Any], call: Call, alive: Callable[[], None] | None = None
) -> Any:
    """`chat`'s reply requested as a stream, each piece of text told to `call` as it arrives (`alive` called for each
    piece of the reply, text or tool call), the pieces summed into one message (its text and usage; an OpenAI-style
    endpoint is asked to send the usage at the end)."""
    from langchain_openai import ChatOpenAI

    options = {"stream_usage": True} if isinstance(chat, ChatOpenAI) else {}
    if call.streamed:  # a retry after a stream that broke off
        call.start()
    message = None
    for chunk in chunks_of(chat.stream(payload, **hints, **options)):
        message = chunk if message is None else message + chunk
        arguments = "".join(str(part.get("args") or "") for part in getattr(chunk, "tool_call_chunks", None) or [])
        if chunk.text or arguments:
            call.text(chunk.text, arguments)
            if alive is not None:
                alive()
    if message is None:
        raise BadCompletion("the streamed reply held nothing")
    return strict_calls(message)


class NotStreamed(Exception):
    """The endpoint answered a request for a stream with no stream (a server that does not stream): ask it whole."""


def chunks_of(stream: Iterator[Any]) -> Iterator[Any]:
    """A reply's chunks as they come; an endpoint that sent none as a stream (it answered with one body) raises
    NotStreamed."""
    try:
        yield from stream
    except ValueError as error:
        if "No generation chunks" in str(error):
            raise NotStreamed(str(error)) from None
        raise


def strict_calls(message: Any) -> Any:
    """A streamed message whose tool calls are read as a whole reply's are: arguments that are not JSON make an
    invalid call (a stream's chunks are parsed leniently, as partial JSON: `{not json` would be a call without
    arguments)."""
    from langchain_core.messages import AIMessage
    from langchain_core.messages.tool import invalid_tool_call, tool_call

    chunks = getattr(message, "tool_call_chunks", None) or []
    if not chunks:
        return message
    good, broken = [], []
    for chunk in chunks:
        name, raw, call_id = chunk.get("name") or "", chunk.get("args") or "", chunk.get("id")
        try:
            args = json.loads(raw) if raw.strip() else {}
        except ValueError as error:
            broken.append(invalid_tool_call(name=name, args=raw, id=call_id, error=str(error)))
            continue
        if isinstance(args, dict):
            good.append(tool_call(name=name, args=args, id=call_id))
        else:
            broken.append(invalid_tool_call(name=name, args=raw, id=call_id, error="the arguments are not an object"))
    return AIMessage(
        content=message.content,
        tool_calls=good,
        invalid_tool_calls=broken,
        usage_metadata=message.usage_metadata,
        response_metadata=message.response_metadata,
        id=message.id,
    )
