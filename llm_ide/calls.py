"""A model call: what a model is asked (messages) and answers (a reply: its text and its tool calls, as data; its usage
and why it ended), and the call as it happens, for whoever shows it live: its start (the prompt's size), the reply's
text as it streams in (when the model streams), its end (the tokens it used)."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any, Literal, NotRequired, Protocol, TypedDict


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
    if not (calls := message.get("tool_calls")):
        return message["content"]
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
    cut: tuple[ModelReply, ...] = ()  # the requests before it whose streams broke off (finish_reason "cut"), paid

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


# A BPE tokenizer's pieces, roughly (letters, a digit, a line break, spaces, a mark), each weighing hundredths of a
# token, fitted on real agent runs' prompts against a real server's tokenizer (docs/local-models.md).
TOKEN_PIECES = re.compile(r"[^\W\d_]+| +|.", re.DOTALL)  # (any other character is a piece alone)
WORD, LONG_WORD_LETTER, CAMEL_CASE, LINE, INDENT, DIGIT, MARK = 126, 4, 184, 160, 67, 146, 37


def estimate_tokens(text: str) -> int:
    """The tokens of `text` for a BPE tokenizer, without the tokenizer: within ±10% of a server's count on an agent's
    prompts. Weighed a line at a time, each distinct line once (cached): a prompt repeats most of the previous one."""
    return (sum(map(line_hundredths, text.split("\n"))) + LINE * text.count("\n") + 50) // 100


@lru_cache(maxsize=16384)
def line_hundredths(line: str) -> int:
    return sum(map(piece_hundredths, TOKEN_PIECES.findall(line)))


@lru_cache(maxsize=65536)
def piece_hundredths(piece: str) -> int:
    """The hundredths of a token one piece (a word, a digit, a newline, a run of spaces, a mark) stands for."""
    first = piece[0]
    if first.isalpha():
        camel = not piece.isupper() and any(char.isupper() for char in piece[1:])
        return WORD + LONG_WORD_LETTER * max(0, len(piece) - 4) + (CAMEL_CASE if camel else 0)
    if first == "\n":
        return LINE
    if first == " ":
        return INDENT if len(piece) > 1 else 0
    if first.isdigit():
        return DIGIT
    return 0 if first.isspace() else MARK


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


@dataclass(frozen=True)
class CallProgress:
    kind: Literal["start", "text", "end"]
    model: str
    prompt_tokens: int = 0  # start: estimated from the prompt; end: as the provider counted them
    output_tokens: int = 0  # text: estimated from what streamed so far; end: as counted
    text: str = ""  # text: the piece that just arrived
    seconds: float = 0.0  # since the request went out
    rate: float | None = None  # output tokens per second since the first one came (None: under a second of them)


CallListener = Callable[[CallProgress], None]


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
    broken: list[str] = field(default_factory=list)  # what streamed of each request that broke off (paid for)
    waiting: bool = False  # in the wait before a retry: none of its requests is out

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
