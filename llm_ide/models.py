"""Chat models (SPEC §7): `scripted:PATH`, `provider:name` via `init_chat_model`, any other name via `ChatOpenAI`."""

from __future__ import annotations

import difflib
import json
import logging
import os
import random
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import SecretStr, ValidationError

from llm_ide import chat_wire, endpoint, errors
from llm_ide.cache_hints import with_cache_hints
from llm_ide.calls import Call, CallListener, Message, Model, ModelReply, observed, prompt_chars
from llm_ide.chat_wire import Completions, NotStreamed, TokenEstimates, calls_of, finish_reason, streamed, written_chars
from llm_ide.client_options import client_kwargs, our_clients, reply_room
from llm_ide.endpoint import (
    cause,
    clamp_usage,
    classify,
    completion_message,
    last_completion,
    request_deadline,
    retry_after,
)
from llm_ide.errors import ModelAuthError, ModelError, ModelTimeLimit
from llm_ide.keep import Keep
from llm_ide.priced import find_price, langchain_providers
from llm_ide.scripted import ScriptedModel
from llm_ide.secrets import known_secrets, redact
from llm_ide.settings import ModelSettings
from llm_ide.terminal import plural
from llm_ide.text import clean_text

log = logging.getLogger(__name__)

Paid = tuple[ModelReply, ...]
KEYLESS_PLACEHOLDER = "not-needed"
MAX_RETRY_AFTER = 300.0  # seconds: a server asking for longer is given up on
ONE_CALL_OPTION = {"ChatOpenAI", "AzureChatOpenAI", "ChatAnthropic"}  # take `parallel_tool_calls=False`


def warn_once(topic: str, name: str, message: str) -> None:
    errors.warn_once(log, (topic, name), message)


def describe(error: BaseException, secrets: list[str], limit: int = 400) -> str:
    text = " ".join(str(error).split()) or "(no message)"
    text = redact(text, secrets)
    return f"{type(error).__name__}: {text[:limit]}{'…' if len(text) > limit else ''}"


def backoff_delay(attempt: int, base: float, maximum: float, rng: random.Random) -> float:
    """Exponential backoff with full jitter: uniform in [0, min(maximum, base * 2**attempt)]."""
    return rng.uniform(0.0, min(maximum, base * 2**attempt))


class ChatModel:
    """A langchain chat model behind our own retry loop, usage accounting and secret redaction."""

    def __init__(
        self,
        name: str,
        chat: Any,
        settings: ModelSettings,
        api_key: str | None = None,
        max_tokens: int | None = None,
        tools_by_default: bool = False,
    ) -> None:
        self.name = name
        self.chat = chat
        self.takes_tools = takes_tools(chat)
        self.tools_by_default = tools_by_default and self.takes_tools
        self.bound: dict[str, dict[str, Any]] = {}  # the request arguments of a tool list, made once per list
        self.max_retries = settings.max_retries
        self.base_delay = settings.retry_base_delay
        self.max_delay = settings.retry_max_delay
        self.price = find_price(name, settings.prices)
        self.timeout = settings.timeout
        self.secrets = known_secrets(api_key)
        self.rng = random.Random()
        self.cache_hints = settings.cache_hints
        self.n_refused = False  # the endpoint refused a request with `n`: several requests from then on
        self.stream = settings.stream  # each reply requested as a stream, its text told to `listener` as it comes
        self.listener: CallListener | None = None
        self.usage_warned = False  # implausible usage is said once per run (a run builds its own model)
        self.max_tokens = max_tokens  # the room each reply is given (None: the model's own limit)
        self.tokens = TokenEstimates()  # the prompt's and the reply's tokens before the server counts them
        self.direct = Completions.of(chat)  # whole replies of a plain ChatOpenAI, asked without LangChain's stack
        if self.price is None:
            warn_once("price", name, unpriced(name))  # once, before the first call

    def complete(
        self, messages: list[Message], deadline: float | None = None, tools: list[dict[str, Any]] | None = None
    ) -> ModelReply:
        """The reply (its text and its tool calls) by `deadline`; a streamed request is cut when
        nothing came for `timeout` seconds (however long it has been producing), another when not whole by then."""
        payload, hints = self._payload(messages, tools)
        parts = self.tokens.parts(messages, tools)
        made: list[ModelReply] = []
        with (
            carried(made),
            observed(self.listener, self.name, self.tokens.scaled(parts), self.tokens.output_ratio) as call,
        ):
            chat_wire.told_out(call)
            with self.charged_if_stopped(call, messages, parts):
                response = self._response(payload, hints, deadline, call)
                reply = self._reply(response, messages, parts, again=bool(call.broken))
                made.append(replace(reply, cut=self.paid(call.broken, messages, parts)) if call.broken else reply)
            call.replied(reply.input_tokens, reply.output_tokens)
        return made[0]

    def _response(self, payload: Any, hints: dict[str, Any], deadline: float | None, call: Call) -> Any:
        response = None
        if self.streams:
            alive = lambda: endpoint.extend_deadline(self._deadline(deadline))  # noqa: E731
            try:
                response = self._request(lambda: streamed(self.chat, payload, hints, call, alive), deadline, True)
            except NotStreamed:  # a server that does not stream: asked whole from now on, said once
                warn_once("stream", self.name, f"model {self.name}: the endpoint sends no streams; asked whole")
                self.stream = False
        return response if response is not None else self._request(lambda: self._whole(payload, hints), deadline)

    @contextmanager
    def charged_if_stopped(self, call: Call, messages: list[Message], parts: tuple[int, int]) -> Iterator[None]:
        """A reply that streamed in part, or a request out when a Ctrl-C or SIGTERM came, is paid for all the same:
        what leaves the call (the interrupt, the error after broken streams) carries each one (`paid`, estimated)."""
        try:
            yield
        except BaseException as error:
            out = isinstance(error, KeyboardInterrupt) and not getattr(error, "between", False)  # a request out
            end = "interrupted" if isinstance(error, KeyboardInterrupt) else "cut"
            if texts := [*call.broken, call.streamed] if call.streamed or out else call.broken:
                error.paid = self.paid(texts, messages, parts, end)
            raise

    def stopped(self, call: Call, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> Paid:
        """What `call` (its requests, the last one still out) is paid when a Ctrl-C stops waiting for it in another
        thread: as `charged_if_stopped` pays it in its own (waiting to ask again, none of its requests was out)."""
        texts = [*call.broken, call.streamed] if call.streamed or not call.waiting else call.broken
        return self.paid(texts, messages, self.tokens.parts(messages, tools), "interrupted") if texts else ()

    def paid(self, texts: list[str], messages: list[Message], parts: tuple[int, int], last: str = "cut") -> Paid:
        """The requests that streamed `texts` and stopped (the last one for the reason `last`): their prompt and what
        they wrote, estimated; the prompt's prefix the provider's cache held (what the previous request, or the
        request before, sent) at the cache read price."""
        prompt, ends = self.tokens.scaled(parts), ["cut"] * (len(texts) - 1) + [last]
        replies = []
        for attempt, (text, end) in enumerate(zip(texts, ends, strict=True)):
            output, cached = self.tokens.output(text), self.tokens.cached(messages, parts, again=attempt > 0)
            cost = 0.0 if self.price is None else self.price.cost(prompt, output, cached)
            replies.append(ModelReply(text, prompt, output, cost, cached, estimated=True, finish_reason=end))
        return tuple(replies)

    def _whole(self, payload: Any, hints: dict[str, Any]) -> Any:
        """The reply asked whole: straight over the wire where it can be (`Completions`), else through LangChain."""
        if self.direct is not None and (message := self.direct.invoke(payload, hints)) is not None:
            return message
        return self.chat.invoke(payload, **hints)

    @property
    def streams(self) -> bool:  # `model.stream`; auto: when someone watches the call
        return self.listener is not None if self.stream == "auto" else bool(self.stream)

    @property
    def takes_n(self) -> bool:
        """Whether one request can return several choices (the chat-completions `n`)."""
        from langchain_openai.chat_models.base import ChatOpenAI

        responses_api = getattr(self.chat, "use_responses_api", None)
        return isinstance(self.chat, ChatOpenAI) and not responses_api and not self.n_refused

    def complete_n(
        self, messages: list[Message], n: int, deadline: float | None = None, tools: list[dict[str, Any]] | None = None
    ) -> list[ModelReply]:
        """`n` replies from one request (`takes_n`): the first carries the request's whole usage and cost (the
        prompt is paid once), the others none; a Ctrl-C while it was out carries its prompt's (`paid`)."""
        from langchain_core.messages import convert_to_messages

        payload, hints = self._payload(messages, tools)
        batch = [convert_to_messages(payload)]
        parts = self.tokens.parts(messages, tools)
        made: list[ModelReply] = []
        with (
            carried(made),
            observed(self.listener, self.name, self.tokens.scaled(parts), self.tokens.output_ratio) as call,
        ):
            with self.charged_if_stopped(call, messages, parts):
                result = self._request(lambda: self.chat.generate(batch, n=n, **hints), deadline)
                choices = [generation.message for generation in result.generations[0]]
                made.append(self._reply(choices[0], messages, parts))
            call.replied(made[0].input_tokens, made[0].output_tokens)
        return [*made, *(ModelReply(clean_text(c.text), 0, 0, 0.0, tool_calls=calls_of(c)) for c in choices[1:])]

    def _payload(self, messages: list[Message], tools: list[dict[str, Any]] | None) -> tuple[Any, dict[str, Any]]:
        """The messages and the request's other arguments: the cache hints, and the tools as the provider takes them
        (one call per reply), made once for a list: the same bytes in every request of the run."""
        payload, hints = with_cache_hints(self.chat, messages) if self.cache_hints else (messages, {})
        if not tools:
            return payload, hints
        key = json.dumps(tools, sort_keys=True)
        if key not in self.bound:
            one = {"parallel_tool_calls": False} if type(self.chat).__name__ in ONE_CALL_OPTION else {}
            self.bound[key] = dict(construct(self.name, lambda: self.chat.bind_tools(tools, **one)).kwargs)
        return payload, {**hints, **self.bound[key]}

    def _deadline(self, deadline: float | None) -> float:
        """When a request must have produced (more): `timeout` from now, or the run's wall-time limit if sooner."""
        at = time.monotonic() + self.timeout
        return at if deadline is None else min(at, deadline)

    def _request(self, send: Callable[[], Any], deadline: float | None, idle: bool = False) -> Any:
        attempt = 0
        while True:
            if deadline is not None and time.monotonic() >= deadline:
                raise ModelTimeLimit(f"model {self.name}: the run's wall-time limit passed during the call")
            last_completion()  # none yet for this request
            try:
                with request_deadline(self._deadline(deadline)):
                    return send()
            except ValidationError as error:  # the SDK cannot hold the reply (a tool call's arguments no object)
                if (message := completion_message(last_completion())) is not None:
                    return message
                self._give_up_or_wait(error, attempt, deadline, idle)
                attempt += 1
            except Exception as error:
                self._give_up_or_wait(error, attempt, deadline, idle)
                attempt += 1

    def _give_up_or_wait(self, error: Exception, attempt: int, deadline: float | None, idle: bool) -> None:
        kind = classify(error)
        if kind is None:
            raise error
        detail = endpoint.waited(error, self.timeout, idle) or endpoint.unreachable(error)
        detail = detail or describe(cause(error), self.secrets)
        if kind == "auth":
            raise ModelAuthError(f"model {self.name}: {detail} (check the model name, URL and API key)") from None
        if kind == "fatal":
            raise ModelError(f"model {self.name}: {detail}{endpoint.context_full(error)}") from None
        if attempt >= self.max_retries:
            raise ModelError(f"model {self.name} failed after {plural(attempt + 1, 'attempt')}: {detail}") from None
        delay = backoff_delay(attempt, self.base_delay, self.max_delay, self.rng)
        if (asked := retry_after(error)) is not None:
            if asked > MAX_RETRY_AFTER:
                raise ModelError(f"model {self.name}: {detail}; the server asks to retry after {asked:.0f} s") from None
            delay = asked
        if deadline is not None and time.monotonic() + delay >= deadline:
            raise ModelTimeLimit(f"model {self.name}: {detail}; no time left to retry before the wall-time limit")
        chat_wire.waits()
        log.warning("model %s: %s; retry %d/%d in %.2fs", self.name, detail, attempt + 1, self.max_retries, delay)
        chat_wire.pause(delay)

    def _reply(self, response: Any, messages: list[Message], parts: tuple[int, int], again: bool = False) -> ModelReply:
        text, calls, usage = clean_text(response.text), calls_of(response), response.usage_metadata
        wrote = text + "".join(call.name + call.arguments for call in calls)
        read = written = 0
        reported, estimated, sizes = None, not usage, (prompt_chars(messages), written_chars(text, calls))
        if usage:
            input_tokens, output_tokens, reported = clamp_usage(
                usage.get("input_tokens"), usage.get("output_tokens"), *sizes
            )
            if reported is not None:
                estimated = True
                self._warn_usage(reported, input_tokens, output_tokens)
            if reported is None:
                self.tokens.learn(parts, wrote, input_tokens, output_tokens)
            details = usage.get("input_token_details") or {}
            read, written = (
                min(max(0, int(details.get(key) or 0)), input_tokens) for key in ("cache_read", "cache_creation")
            )
        else:
            warn_once("usage", self.name, f"model {self.name}: the response carries no token usage; estimating it")
            input_tokens, output_tokens = self.tokens.scaled(parts), self.tokens.output(wrote)
            read = self.tokens.cached(messages, parts, again)  # as a cut stream's (`paid`)
        finish = finish_reason(response)
        if finish == "length":
            self._warn_cut(output_tokens)
        cost = 0.0 if self.price is None else self.price.cost(input_tokens, output_tokens, read, written)
        return ModelReply(text, input_tokens, output_tokens, cost, read, written, reported, estimated, finish, calls)

    def _warn_cut(self, output_tokens: int) -> None:
        limit = "the model's own limit" if self.max_tokens is None else f"model.max_tokens = {self.max_tokens}"
        log.warning(
            f"model {self.name}: the reply was cut at the length limit ({limit}) after {output_tokens} tokens; it is "
            "used as it is (an action it did not finish counts as a format error); raise model.max_tokens for "
            "longer replies"
        )

    def _warn_usage(self, reported: dict[str, Any], input_tokens: int, output_tokens: int) -> None:
        if not self.usage_warned:
            self.usage_warned = True
            log.warning(
                f"model {self.name}: implausible usage reported (input {reported['input_tokens']}, output "
                f"{reported['output_tokens']} tokens); counted as estimated from the text (input {input_tokens}, "
                f"output {output_tokens}): the cost and the cost limits use the estimate (said once per run; each call "
                "records both as reported_usage and its tokens)"
            )


@contextmanager
def carried(made: list[ModelReply]) -> Iterator[None]:
    """An interrupt that came once the reply was whole (`made`; its end told to the listener, the console's line)
    carries it (`paid`): recorded and charged as any reply, not lost."""
    try:
        yield
    except KeyboardInterrupt as interrupt:
        if made:
            interrupt.paid = tuple(made)  # type: ignore[attr-defined]
        raise


def unpriced(name: str) -> str:
    return (
        f"model {name} has no price in the config's model.prices: it is shown as unpriced, with its tokens; its cost "
        "counts as 0, so the cost limit cannot be enforced (agent.token_limit still applies)"
    )


def construct(spec: str, factory: Callable[[], Any]) -> Any:
    """Build a third-party chat model; any failure (missing integration package, credentials, bad kwargs) is ours."""
    try:
        return factory()
    except Exception as error:
        raise ModelError(f"cannot create model {spec}: {describe(error, known_secrets())}") from None


def provider_model(spec: str, config: ModelSettings, base_url: str | None) -> ChatModel:
    from langchain.chat_models import init_chat_model

    provider, name = spec.split(":", 1)
    by_url = provider == "openai" and bool(base_url or os.environ.get("OPENAI_BASE_URL"))
    url = base_url or (os.environ.get("OPENAI_BASE_URL") if by_url and "base_url" not in config.kwargs else None)
    room = reply_room(config, by_url)
    kwargs = client_kwargs(config, room, by_url) | ({"base_url": url} if url else {})
    if provider == "openai":
        kwargs = our_clients(kwargs, config.timeout)
    chat = construct(spec, lambda: init_chat_model(name, model_provider=provider, **kwargs))
    return ChatModel(spec, chat, config, max_tokens=room, tools_by_default=not by_url)


def openai_compatible_model(spec: str, config: ModelSettings, base_url: str | None) -> ChatModel:
    from langchain_openai.chat_models.base import ChatOpenAI

    url = base_url or config.kwargs.get("base_url") or os.environ.get("OPENAI_BASE_URL") or None
    room = reply_room(config, url is not None)
    kwargs = our_clients(client_kwargs(config, room, url is not None) | {"base_url": url}, config.timeout)
    given = [str(kwargs.pop(name)) for name in ("api_key", "openai_api_key") if name in kwargs]  # model.kwargs's key
    key = next(iter(given), None) or os.environ.get("OPENAI_API_KEY") or (KEYLESS_PLACEHOLDER if url else None)
    if key is None:
        raise ModelAuthError(
            f"model {spec}: OPENAI_API_KEY is not set (for a keyless local server give --base-url or OPENAI_BASE_URL)"
        )
    chat = construct(spec, lambda: ChatOpenAI(model=spec, api_key=SecretStr(key), **kwargs))
    return ChatModel(spec, chat, config, api_key=key, max_tokens=room)


def takes_tools(chat: Any) -> bool:
    """Whether a langchain chat model can be given tools. A model reached at its provider's own API that takes them
    is given them by default (`tools_by_default`); an OpenAI-compatible endpoint given by URL or a bare model name is
    not (whether it takes tools is not known)."""
    from langchain_core.language_models import BaseChatModel

    return type(chat).bind_tools is not BaseChatModel.bind_tools


def unknown_provider(spec: str, base_url: str | None, option: str = "--base-url") -> str | None:
    """`provider:name` whose provider langchain does not know, with no endpoint that could serve it as a model name
    (an OpenAI-compatible server's `qwen2.5-coder:7b`): what to say, naming the known providers (and `option`, the
    door's name of the endpoint)."""
    prefix, colon, _ = spec.partition(":")
    known = langchain_providers()
    if not colon or prefix in known or base_url or os.environ.get("OPENAI_BASE_URL"):
        return None
    close = difflib.get_close_matches(prefix, sorted(known), n=1)
    guess = f" (did you mean {close[0]}?)" if close else ""
    return (
        f"model {spec}: unknown provider {prefix!r}{guess}; known providers: {', '.join(sorted(known))} "
        f"(or give {option} for a model name of an OpenAI-compatible endpoint)"
    )


def get_model(spec: str, config: ModelSettings, base_url: str | None = None, keep: Keep | None = None) -> Model:
    """Resolve a `--model` value (SPEC §7); `config` is the `model:` section of the run's config; `keep`: where a
    model may keep what it needs across the run's processes (a scripted model: its place in its script)."""
    if spec.startswith("scripted:"):
        return ScriptedModel(Path(spec.removeprefix("scripted:")).expanduser(), keep)
    if ":" in spec and spec.split(":", 1)[0] in langchain_providers():
        return provider_model(spec, config, base_url)
    if problem := unknown_provider(spec, base_url):
        raise ModelAuthError(problem)
    return openai_compatible_model(spec, config, base_url)
