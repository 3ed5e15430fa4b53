"""A chat model's provider, read: a reply's tool calls as data (`calls_of`), a streamed reply summed into one message
whose tool calls are read as strictly as a whole reply's, and a request's tokens estimated before the server counts
them, learnt from its counts (`TokenEstimates`)."""

from __future__ import annotations

import http.client
import json
import os
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from typing import Any, NoReturn

import httpcore
import httpx

from llm_ide.calls import Call, Message, ToolCall, estimate_tokens, message_text, prompt_chars
from llm_ide.endpoint import BadCompletion, EndpointClient, check_body, received
from llm_ide.plain_post import PlainPost, body_bytes, wire_json
from llm_ide.text import clean_text, shared_start

MESSAGE_TOKENS = 4  # a chat template's tokens around each message (its role, its start and end markers)
REQUEST_TOKENS = 3  # around the whole prompt (the assistant's turn opened)


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


def sent_text(message: Message) -> str:
    """A message's text as its server sees it: its content, and the tool calls it holds (their JSON)."""
    calls = message.get("tool_calls") or []
    return str(message.get("content") or "") + "".join(
        json.dumps(call.get("args", {})) + call["name"] for call in calls
    )


def estimate_prompt_tokens(
    messages: list[Message], tools: list[dict[str, Any]] | None = None, estimate: Callable[[str], int] = estimate_tokens
) -> int:
    """The prompt's tokens for a chat server: each message's with the template's markers around it, and the tools'
    definitions (which a server renders into the prompt as JSON); `estimate` weighs a text."""
    tokens = REQUEST_TOKENS + sum(MESSAGE_TOKENS + estimate(sent_text(message)) for message in messages)
    return tokens + (estimate(json.dumps(tools)) if tools else 0)


def written_chars(text: str, calls: tuple[ToolCall, ...]) -> int:
    """The characters a reply wrote: its text and its calls' names and arguments."""
    return len(text) + sum(len(call.name) + len(call.arguments) for call in calls)


def shared_prefix(previous: Sequence[Any], current: Sequence[Any], text: Callable[[Any], str] = message_text) -> int:
    """Characters of `current`'s messages (each `text`) that repeat, as a prefix, the previous request's messages:
    what a provider's prompt cache holds of a request, re-read at its cache read price."""
    shared = 0
    for old, new in zip(previous, current, strict=False):
        a, b = text(old), text(new)
        if old.get("role") != new.get("role"):
            break
        if a != b:
            return shared + shared_start(a, b)
        shared += len(a)
    return shared


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
        self.known: dict[str, int] = {}  # the previous prompt's texts and their estimates
        self.previous: list[Message] = []  # the request before the latest one
        self.latest: list[Message] = []

    def parts(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> tuple[int, int]:
        """The heuristic's tokens of the messages (with the template's markers) and of the tools' definitions, as
        `estimate_prompt_tokens` gives them; a text the previous prompt held is not weighed again (a prompt repeats
        most of the previous one: ~0.5 ms a step)."""
        known, fresh = self.known, dict[str, int]()

        def estimate(text: str) -> int:
            tokens = known.get(text)
            fresh[text] = tokens = estimate_tokens(text) if tokens is None else tokens
            return tokens

        prompt = estimate_prompt_tokens(messages, None, estimate)
        tools_tokens = estimate(json.dumps(tools)) if tools else 0
        self.known = fresh  # replaced, not changed: requests made at the same time each read a whole one
        self.previous, self.latest = self.latest, messages
        return prompt, tools_tokens

    def cached(self, messages: list[Message], parts: tuple[int, int], again: bool = False) -> int:
        """Of the prompt `parts` of the latest request (`messages`), the tokens a provider's prompt cache holds: the
        prefix it shares with the request before it (`again`: with itself, an attempt asked again), its share of the
        messages' tokens, and the tools' definitions (rendered before them, the same at every request) once any is."""
        shared, total = shared_prefix(messages if again else self.previous, messages), prompt_chars(messages)
        if not shared or not total:
            return 0
        cached = parts[0] * self.prompt_ratio * shared / total + parts[1] * self.tools_factor
        return min(self.scaled(parts), round(cached))

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


ANTHROPIC_REASONS = {"max_tokens": "length", "end_turn": "stop", "stop_sequence": "stop", "tool_use": "tool_calls"}


def finish_reason(response: Any) -> str | None:
    """Why the reply ended, in OpenAI's words: "length" for a reply cut at the limit (Anthropic's `max_tokens`),
    "tool_calls" for one that called tools (`tool_use`)."""
    metadata = getattr(response, "response_metadata", None) or {}
    reason = metadata.get("finish_reason") or metadata.get("stop_reason")
    return ANTHROPIC_REASONS.get(reason, reason) if isinstance(reason, str) else None


def streamed(
    chat: Any, payload: Any, hints: dict[str, Any], call: Call, alive: Callable[[], None] | None = None
) -> Any:
    """`chat`'s reply requested as a stream, each piece of text told to `call` as it arrives (`alive` called for each
    piece of the reply, text or tool call), the pieces summed into one message (its text and usage; an OpenAI-style
    endpoint is asked to send the usage at the end)."""
    from langchain_openai.chat_models.base import ChatOpenAI

    options = {"stream_usage": True} if isinstance(chat, ChatOpenAI) else {}
    if call.streamed:  # a retry after a stream that broke off (paid for)
        call.broken.append(call.streamed)
        call.start()
    message = None
    ours = isinstance(getattr(getattr(chat, "root_client", None), "_client", None), EndpointClient)
    for chunk in chunks_of(chat.stream(payload, **hints, **options), ours):
        message = chunk if message is None else message + chunk
        arguments = "".join(str(part.get("args") or "") for part in getattr(chunk, "tool_call_chunks", None) or [])
        if chunk.text or arguments:
            call.text(chunk.text, arguments)
            if alive is not None:
                alive()
    if message is None:
        raise BadCompletion("the streamed reply held nothing")
    return strict_calls(message)


calls_out: ContextVar[list[Call] | None] = ContextVar("calls_out", default=None)  # told of each call as it starts


def told_out(call: Call) -> None:
    """`call` is out: whoever waits for it in another thread (many_calls.py) can pay it if it stops waiting."""
    if (out := calls_out.get()) is not None:
        out.append(call)


def waits() -> None:
    """The call out in this thread now waits to ask again (`pause`): whoever waits for it pays no request of it out."""
    if out := calls_out.get():
        out[-1].waiting = True


def pause(seconds: float) -> None:
    """The wait before a request is asked again: an interrupt in it stopped no request (`between`: none to pay for)."""
    try:
        time.sleep(seconds)
    except KeyboardInterrupt as interrupt:
        interrupt.between = True  # type: ignore[attr-defined]
        raise
    finally:
        if out := calls_out.get():
            out[-1].waiting = False


class NotStreamed(Exception):
    """The endpoint answered a request for a stream with no stream (a server that does not stream): ask it whole."""


def chunks_of(stream: Iterator[Any], ours: bool = False) -> Iterator[Any]:
    """A reply's chunks as they come; an endpoint that sent none as a stream (it answered with one body) raises
    NotStreamed. Through our own client (`ours`), which reads a body that is not a stream, a reply that was no whole
    completion either is one bad reply (retried), not an endpoint that does not stream."""
    try:
        yield from stream
    except ValueError as error:
        if "No generation chunks" not in str(error):
            raise
        if ours and received() is None:
            raise BadCompletion("the streamed reply held nothing (no chunk, no whole completion)") from None
        raise NotStreamed(str(error)) from None


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


SDK_FIRST = {"model": 0, "stream": 1, "service_tier": 2, "messages": 3}  # the SDK's body: these, the rest by name
TRACING = ("LANGSMITH_TRACING", "LANGSMITH_TRACING_V2", "LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING")


class Completions:
    """A `ChatOpenAI`'s chat completions asked whole, straight over the wire: the request LangChain and the
    OpenAI SDK would make (LangChain's payload; the SDK's URL, headers and body, `extra_body` merged in), the reply
    read into the message LangChain would return, its errors raised as they would raise them. What it skips, the
    callback stack and the SDK's request building, cost more CPU per step than the rest of a step's machinery."""

    def __init__(self, chat: Any) -> None:
        """`plain`: the run's own httpx client's requests sent over http.client (plain_post.py), at half the CPU."""
        root, mine = chat.root_client, isinstance(chat.root_client._client, EndpointClient)
        self.chat, self.client = chat, root._client
        self.url = str(root.base_url).rstrip("/") + "/chat/completions"
        self.query = dict(root.default_query)
        auth = {"Authorization": f"Bearer {root.api_key}"} if isinstance(root.api_key, str) and root.api_key else {}
        self.headers = {k: v for k, v in root.default_headers.items() if isinstance(v, str)} | auth
        timeout = chat.request_timeout
        self.timeout = timeout if isinstance(timeout, int | float) else self.client.timeout
        self.plain = PlainPost(self.client, self.url, self.headers, self.query, self.timeout) if mine else None
        self.sent: dict[Any, list[Any]] = {}  # by a message's value: its wire form (LangChain's) and that form's JSON

    @staticmethod
    def of(chat: Any) -> Completions | None:
        """The direct way for a plain `ChatOpenAI` over an httpx client; None for any other model, or one that needs
        LangChain's own path (a rate limiter, a cache, the Responses API, a traced run)."""
        from langchain_openai.chat_models.base import ChatOpenAI

        plain = type(chat) is ChatOpenAI and chat.rate_limiter is None and not chat.cache and not chat.callbacks
        traced = any(os.environ.get(name, "").lower() in ("1", "true") for name in TRACING)
        if not plain or traced or chat.use_responses_api or not isinstance(chat.root_client._client, httpx.Client):
            return None
        return Completions(chat)

    def invoke(self, messages: list[Any], hints: dict[str, Any]) -> Any:
        """The reply to `messages` (with the request arguments `hints`), None when the request needs the SDK
        (structured output, the Responses API, arguments only the SDK places). Only the messages not sent before
        are made LangChain's messages and back (most of a prompt is the previous request's)."""
        from langchain_core.messages import convert_to_messages

        keys = [message_key(message) for message in messages]
        kept = {key: entry for key in keys if (entry := self.sent.get(key)) is not None}
        new = {key: message for key, message in zip(keys, messages, strict=True) if key not in kept}
        payload = self.chat._get_request_payload(convert_to_messages(list(new.values())), **hints)
        if {"response_format", "extra_headers", "extra_query", "timeout"} & payload.keys() or payload.get("stream"):
            return None
        if self.chat._use_responses_api(payload):
            return None
        kept |= {key: [wire, None] for key, wire in zip(new, payload["messages"], strict=True)}
        if len(self.sent) > 4 * len(messages) + 16:
            self.sent = {}  # replaced, not cleared: requests made at the same time (`n` of them) hold what they read
        self.sent.update(kept)
        sent = [kept[key] for key in keys]
        payload["messages"] = [wire for wire, _ in sent]
        fields = sorted(payload.keys() - {"extra_body"}, key=lambda key: (SDK_FIRST.get(key, len(SDK_FIRST)), key))
        body = {key: payload[key] for key in fields} | payload.get("extra_body", {})
        own = body.get("messages") is payload["messages"]  # not an `extra_body` of its own
        result = self.chat._create_chat_result(self._post(body, sent if own else []))
        generation = result.generations[0]
        message = generation.message
        message.response_metadata = {**result.llm_output, **generation.generation_info, **message.response_metadata}
        return message

    def _post(self, body: dict[str, Any], sent: list[list[Any]]) -> Any:
        """The completion (checked as `check_completion` checks it), or the error LangChain would raise. `sent`: the
        body's messages and their JSON (made once for each) as `invoke` keeps them; none when it holds other ones."""
        if self.plain is not None:
            for entry in sent:
                entry[1] = wire_json(entry[0]).encode("utf-8") if entry[1] is None else entry[1]
            parts = {"messages": b"[" + b",".join(data for _, data in sent) + b"]"} if sent else {}
            return self._post_plain(self.plain, body_bytes(body, parts))
        import openai

        try:
            response = self.client.post(
                self.url, json=body, headers=self.headers, params=self.query, timeout=self.timeout
            )
        except httpx.TimeoutException as error:
            raise_as_langchain(openai.APITimeoutError(request=error.request), error)
        except httpx.RequestError as error:
            raise_as_langchain(openai.APIConnectionError(request=error.request), error)
        if response.status_code >= 400:
            response.read()
            raise_as_langchain(self.chat.root_client._make_status_error_from_response(response), None)
        completion = received()
        return completion if completion is not None else response.json()

    def _post_plain(self, plain: PlainPost, content: bytes) -> Any:
        import openai

        try:
            status, headers, data = plain.post(content)
        except (TimeoutError, httpcore.TimeoutException) as error:  # a socket's timeout, or the deadline passed
            raise_as_langchain(openai.APITimeoutError(request=plain.request()), error)
        except (OSError, http.client.HTTPException) as error:
            raise_as_langchain(openai.APIConnectionError(request=plain.request()), error)
        if status >= 400:
            response = httpx.Response(status, headers=headers, content=data, request=plain.request())
            raise_as_langchain(self.chat.root_client._make_status_error_from_response(response), None)
        kind = next((value for name, value in headers if name.lower() == "content-type"), "")
        if status == 200 and not kind.startswith("text/event-stream"):  # as the hook (`check_completion`) checks
            check_body(data)
        completion = received()
        return completion if completion is not None else json.loads(data)


def message_key(message: Any) -> Any:
    """A message by its value (what its wire form is made of): its fields in order, each text as it is, any other
    value as its JSON (a value that has none: a key of its own, never found again)."""
    try:
        return tuple((k, True, v) if type(v) is str else (k, False, json.dumps(v)) for k, v in message.items())
    except (TypeError, ValueError, AttributeError):
        return object()


def raise_as_langchain(error: Any, cause: BaseException | None) -> NoReturn:
    """`error` (the OpenAI SDK's) raised as `ChatOpenAI` raises it: LangChain's error of its kind."""
    import openai
    from langchain_openai.chat_models.base import _handle_openai_api_error, _handle_openai_bad_request

    try:
        raise error from cause
    except openai.BadRequestError as raised:
        _handle_openai_bad_request(raised)
    except openai.APIError as raised:
        _handle_openai_api_error(raised)
    raise error
