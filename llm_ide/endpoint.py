"""Guards between the agent and a model endpoint: a deadline per request (not per read: a server dripping one byte every
two seconds cannot hold a call past it; a streamed reply's moves on as it produces), 200 responses that are not
completions treated like a 5xx, Retry-After, implausible usage replaced by an estimate, the models an endpoint lists."""

from __future__ import annotations

import json
import os
import re
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from email.utils import parsedate_to_datetime
from functools import lru_cache
from typing import Any, Literal, TypeVar

import httpcore
import httpx

from llm_ide.endpoint_url import below

Failure = Literal["auth", "transient", "fatal"]
MAX_CALL_TOKENS = 10_000_000  # no model reads or writes more in one call
POLL = 0.25  # seconds between two looks at a cancel event, and at signals, while a read waits
_local = threading.local()
CONTEXT_FULL = re.compile(r"context.{0,12}(length|size|window)|exceed_context|prompt is too long|too many tokens", re.I)
T = TypeVar("T")


class Cancelled(Exception):
    """A request given up by whoever waited for it (the event of `request_cancel` set)."""


class BadCompletion(Exception):
    """A 200 response that is not a completion (an error body, no choices, unparsable): retried like a 5xx."""


@contextmanager
def _held(name: str, value: object) -> Iterator[None]:
    """`value` as this thread's `name` for the requests made inside, the previous one back after."""
    previous = getattr(_local, name, None)
    setattr(_local, name, value)
    try:
        yield
    finally:
        setattr(_local, name, previous)


def request_deadline(at: float) -> AbstractContextManager[None]:
    """Every socket operation of the requests made inside ends by `at` (time.monotonic())."""
    return _held("deadline", at)


def request_cancel(event: threading.Event) -> AbstractContextManager[None]:
    """Every read of the requests made inside ends (`Cancelled`) soon after `event` is set, even one that waits for
    the first byte of a reply: the connection is dropped, so the server stops working on it."""
    return _held("cancel", event)


def polled(read: Callable[[float | None], T], timeout: float | None, timed_out: type[Exception]) -> T:
    """`read(seconds)` within `timeout` and the request's deadline, in slices of `POLL`: a signal the kernel gave
    another thread (Ctrl-C, SIGTERM) runs its handler only once this thread leaves the read, and a read under
    `request_cancel` ends once the event is set."""
    cancel = getattr(_local, "cancel", None)
    until = None if timeout is None else time.monotonic() + timeout
    while cancel is None or not cancel.is_set():
        left = None if until is None else until - time.monotonic()
        if left is not None and left <= 0:
            raise timed_out("no data within the read timeout")
        wait = remaining(left)
        try:
            return read(POLL if wait is None else min(wait, POLL))
        except timed_out:
            if wait is not None and wait <= POLL:
                raise
    raise Cancelled("the request was given up")


def extend_deadline(at: float) -> None:
    """The deadline of the requests under way in this thread moved to `at` (a streamed reply that produced: it has
    until `at` to produce more)."""
    if getattr(_local, "deadline", None) is not None:
        _local.deadline = at


def waited(error: BaseException, timeout: float, idle: bool) -> str | None:
    """What a request that timed out waited for, naming the setting (None: it failed otherwise); `idle`: a stream."""
    if not timed_out(error):
        return None
    what = "nothing came for" if idle else "no whole reply within"
    return f"{what} {timeout:g} s (model.timeout; raise it for a slow model)"


def unreachable(error: BaseException) -> str | None:
    """What a request that found no server, or lost it (refused, reset, closed mid-reply), met: the endpoint and why."""
    chain = [error]
    while (inner := chain[-1].__cause__ or chain[-1].__context__) is not None and len(chain) < 20:
        chain.append(inner)
    lost = (OSError, httpx.TransportError, httpcore.NetworkError, httpcore.RemoteProtocolError)
    if timed_out(error) or isinstance(chain[-1], BadCompletion | Cancelled):
        return None
    if not any(isinstance(seen, lost) or type(seen).__name__ == "APIConnectionError" for seen in chain):
        return None
    why = re.sub(r"^\[Errno -?\d+\] ", "", " ".join(str(chain[-1]).split())) or type(chain[-1]).__name__
    url = getattr(getattr(error, "request", None), "url", None)  # the SDK's error holds the request
    where = f" {url.scheme}://{url.netloc.decode()}" if isinstance(url, httpx.URL) else ""
    return f"the endpoint{where} did not answer ({why[:200]}; is its server still running?)"


def context_full(error: BaseException) -> str:
    """A hint for a request refused because the prompt is longer than the model's context (empty for any other)."""
    if getattr(error, "status_code", None) not in (400, 413) or not CONTEXT_FULL.search(str(error)):
        return ""
    return (
        "; the prompt is longer than the model's context: lower memory.prompt_budget_chars (about 3 characters per "
        "token of the context) or serve the model with a longer context"
    )


def timed_out(error: BaseException) -> bool:
    """Whether a failed request is one that waited too long (its deadline or a socket timeout), however wrapped."""
    seen: BaseException | None = error
    while seen is not None:
        if isinstance(seen, TimeoutError | httpx.TimeoutException | httpcore.TimeoutException):
            return True
        if type(seen).__name__ == "APITimeoutError":  # openai's and anthropic's
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def remaining(timeout: float | None) -> float | None:
    deadline = getattr(_local, "deadline", None)
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise httpcore.ReadTimeout("the model call's total deadline passed")
    return left if timeout is None else min(timeout, left)


class DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self.inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return polled(lambda seconds: self.inner.read(max_bytes, seconds), timeout, httpcore.ReadTimeout)

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self.inner.write(buffer, remaining(timeout))

    def close(self) -> None:
        self.inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None) -> Any:
        return DeadlineStream(self.inner.start_tls(ssl_context, server_hostname, remaining(timeout)))

    def get_extra_info(self, info: str) -> Any:
        return self.inner.get_extra_info(info)


class DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self.inner = inner

    def connect_tcp(self, host: str, port: int, timeout: float | None = None, **kwargs: Any) -> httpcore.NetworkStream:
        return DeadlineStream(self.inner.connect_tcp(host, port, remaining(timeout), **kwargs))

    def connect_unix_socket(self, path: str, timeout: float | None = None, **kwargs: Any) -> httpcore.NetworkStream:
        return DeadlineStream(self.inner.connect_unix_socket(path, remaining(timeout), **kwargs))

    def sleep(self, seconds: float) -> None:
        self.inner.sleep(seconds)


def check_completion(response: httpx.Response) -> None:
    """Response hook: a 200 chat completion must hold choices and no error."""
    if response.status_code != 200 or not response.request.url.path.endswith("/chat/completions"):
        return
    if response.headers.get("content-type", "").startswith("text/event-stream"):
        return  # a streamed reply is read as it comes, by the SDK
    response.read()
    check_body(response.content)


def check_body(content: bytes) -> None:
    """A 200 chat completion's body must hold choices and no error (then it is kept: `received`)."""
    try:
        body = json.loads(content)
    except RecursionError:
        raise BadCompletion("the response's JSON is nested too deeply") from None
    except ValueError:
        return  # the SDK reports it (a JSONDecodeError, retried)
    if not isinstance(body, dict):
        raise BadCompletion(f"the response is a JSON {type(body).__name__}, not a completion")
    if body.get("error"):
        raise BadCompletion(f"status 200 with an error: {json.dumps(body['error'])[:300]}")
    if not body.get("choices"):
        raise BadCompletion("status 200 with no choices")
    _local.completion = body  # what the SDK could not hold, read again (`completion_message`)


def completion_message(body: Any) -> Any:
    """The last chat completion this thread received, as a langchain message whose tool calls are all as sent (their
    arguments the text the model wrote): for a reply the SDK could not hold (arguments that are JSON but no object).
    None when there is none."""
    from langchain_core.messages import AIMessage

    try:
        message = body["choices"][0]["message"]
        calls = [invalid_call(call) for call in message.get("tool_calls") or []]
        usage = body.get("usage") or {}
        counts = {"input_tokens": usage.get("prompt_tokens") or 0, "output_tokens": usage.get("completion_tokens") or 0}
        reason = {"finish_reason": body["choices"][0].get("finish_reason")}
        return AIMessage(
            content=str(message.get("content") or ""),
            invalid_tool_calls=calls,
            usage_metadata={**counts, "total_tokens": counts["input_tokens"] + counts["output_tokens"]},
            response_metadata=reason,
        )
    except (KeyError, IndexError, TypeError, AttributeError, ValueError):
        return None


def invalid_call(call: dict[str, Any]) -> dict[str, Any]:
    """A tool call of the wire as langchain keeps one it could not parse: its arguments the text as sent."""
    function = call["function"]
    name, args = str(function.get("name") or ""), str(function.get("arguments") or "")
    return {
        "name": name,
        "args": args,
        "id": str(call.get("id") or ""),
        "error": "no JSON object",
        "type": "invalid_tool_call",
    }


def last_completion() -> Any:
    """The last chat completion this thread received since it was last asked (then forgotten)."""
    body, _local.completion = getattr(_local, "completion", None), None
    return body


def received() -> Any:
    """The last chat completion this thread received (`check_completion` read it), kept for `last_completion`."""
    return getattr(_local, "completion", None)


class EndpointClient(httpx.Client):
    """The run's httpx client (`http_client`), with the TLS settings of its transport (plain_post.py uses them)."""

    ssl_context: ssl.SSLContext


def tls_context() -> ssl.SSLContext:
    """What httpx's transport makes when given no TLS settings, made once per CA bundle (loading one takes 50–80 ms,
    and a client is made for every run): keyed by `SSL_CERT_FILE` (its size and time of change too) and `SSL_CERT_DIR`
    (read at each handshake); the default bundle, certifi's, changes only with the package."""
    file, folder = os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")
    try:
        stat = os.stat(file) if file else None
    except OSError:
        stat = None  # httpx says why when it loads it
    return _tls_context(file, folder, (stat.st_size, stat.st_mtime_ns) if stat else None)


@lru_cache(maxsize=4)
def _tls_context(file: str | None, folder: str | None, stamp: tuple[int, int] | None) -> ssl.SSLContext:
    return httpx.create_ssl_context()


def http_client(timeout: float) -> httpx.Client:
    """An httpx client whose requests obey `request_deadline` and whose 200 responses are checked."""
    context = tls_context()
    transport = httpx.HTTPTransport(verify=context)
    pool = transport._pool  # httpx does not take a network backend; its connection pool does
    pool._network_backend = DeadlineBackend(pool._network_backend)
    client = EndpointClient(transport=transport, timeout=timeout, event_hooks={"response": [check_completion]})
    client.ssl_context = context
    return client


def async_http_client(timeout: float) -> httpx.AsyncClient:
    """What an async call of the model would use, with the run's TLS settings and timeout: llm-ide calls its model
    synchronously, but a langchain OpenAI model given no async client makes one, loading the CA bundle again."""
    return httpx.AsyncClient(verify=tls_context(), timeout=timeout)


def listed_models(url: str, api_key: str | None, timeout: float) -> list[str] | None:
    """The model names an OpenAI-compatible endpoint lists (GET `{url}/models`); None when it lists none, has no such
    route, or does not answer in time; [] when nothing answers at that path at all (404)."""
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    try:
        response = httpx.get(below(url, "/models"), headers=headers, timeout=timeout, verify=tls_context())
        if response.status_code == 404:
            return []
        data = response.json().get("data") if response.status_code == 200 else None
    except (httpx.HTTPError, ValueError, AttributeError):
        return None
    if not isinstance(data, list):
        return None
    names = [item["id"] for item in data if isinstance(item, dict) and isinstance(item.get("id"), str)]
    return names or None


def classify(error: BaseException) -> Failure | None:
    """What a failed call means: give up at once (auth), retry (transient), give up (fatal), or not ours (None)."""
    from langchain_core import exceptions as lc

    if isinstance(cause(error, Cancelled), Cancelled):
        return None
    if isinstance(error, lc.ModelAuthenticationError | lc.ModelPermissionDeniedError | lc.ModelNotFoundError):
        return "auth"
    status = getattr(error, "status_code", None)
    if isinstance(status, int):
        if status in (401, 403, 404):
            return "auth"
        return "transient" if status in (408, 409, 429) or status >= 500 else "fatal"
    if isinstance(cause(error), BadCompletion):
        return "transient"
    if isinstance(error, lc.ModelError):
        return "transient" if error.is_retryable else "fatal"
    if isinstance(error, _transient_errors()):
        return "transient"
    return None


def _transient_errors() -> tuple[type[BaseException], ...]:
    import httpx
    import openai

    return (
        TimeoutError,
        ConnectionError,
        json.JSONDecodeError,
        httpx.TransportError,
        openai.APIConnectionError,
        openai.APIResponseValidationError,
    )


def cause(error: BaseException, kind: type[BaseException] = BadCompletion) -> BaseException:
    """The `kind` (a BadCompletion) behind an SDK's connection error, else the error itself."""
    seen = error
    while seen is not None:
        if isinstance(seen, kind):
            return seen
        seen = seen.__cause__ or seen.__context__
    return error


def retry_after(error: BaseException) -> float | None:
    """Seconds a 429/503 asks to wait (Retry-After: seconds or an HTTP date; retry-after-ms)."""
    response = getattr(error, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    if (millis := headers.get("retry-after-ms")) is not None:
        try:
            return max(0.0, float(millis) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
    except (TypeError, ValueError):
        return None


def clamp_usage(
    input_tokens: Any, output_tokens: Any, prompt_chars: int, written_chars: int
) -> tuple[int, int, dict[str, Any] | None]:
    """Token counts a provider reported, kept possible: never negative, never above MAX_CALL_TOKENS (no model reads or
    writes more in one call); an impossible count is replaced by an estimate from the text. The third item is what
    was reported when a count was replaced (None when both were possible)."""
    counts, replaced = [], False
    reported = (input_tokens, output_tokens)
    for value, estimate in zip(reported, (prompt_chars // 4, written_chars // 4), strict=True):
        try:
            number = int(value)
        except (TypeError, ValueError, OverflowError):
            number = -1
        possible = 0 <= number <= MAX_CALL_TOKENS
        replaced |= not possible
        counts.append(number if possible else estimate)
    if not replaced:
        return counts[0], counts[1], None
    as_json = [value if isinstance(value, int | float) else str(value)[:40] for value in reported]
    return counts[0], counts[1], {"input_tokens": as_json[0], "output_tokens": as_json[1]}
