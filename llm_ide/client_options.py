"""A chat model's constructor arguments (llm_ide/models.py builds it): the room each reply is given, the timeout, the
temperature, `model.kwargs`, and our HTTP clients for an OpenAI model."""

from __future__ import annotations

from typing import Any

from llm_ide.endpoint import async_http_client, http_client
from llm_ide.endpoint_url import query_apart
from llm_ide.settings import ModelSettings

LOCAL_MAX_TOKENS = 4096  # the room a reply gets from an endpoint given by URL when model.max_tokens is null


def reply_room(settings: ModelSettings, by_url: bool) -> int | None:
    """The max_tokens each reply is given: `model.max_tokens`, else LOCAL_MAX_TOKENS for an OpenAI-compatible
    endpoint given by URL (a local server otherwise writes until its context is full), else none (the provider's own
    limit: a reasoning model's thinking counts against it)."""
    return settings.max_tokens or (LOCAL_MAX_TOKENS if by_url else None)


def client_kwargs(settings: ModelSettings, max_tokens: int | None = None, by_url: bool = False) -> dict[str, Any]:
    """The chat model's constructor arguments. An endpoint given by URL is sent `max_tokens` in the body (what
    llama.cpp, vLLM, Ollama and LiteLLM read), a provider's own API its client's field (OpenAI's
    max_completion_tokens); `model.kwargs` naming either wins."""
    kwargs: dict[str, Any] = {"max_retries": 0, "timeout": settings.timeout}
    if settings.temperature is not None:
        kwargs["temperature"] = settings.temperature
    if max_tokens is not None and not {"max_tokens", "max_completion_tokens"} & set(settings.kwargs):
        if by_url:
            kwargs["extra_body"] = {"max_tokens": max_tokens, **settings.kwargs.get("extra_body", {})}
        else:
            kwargs["max_tokens"] = max_tokens
    merged = {**kwargs, **settings.kwargs}
    return merged | ({"extra_body": kwargs["extra_body"]} if "extra_body" in kwargs else {})


def our_clients(kwargs: dict[str, Any], timeout: float) -> dict[str, Any]:
    """An OpenAI model's HTTP clients, sync and async, are ours (endpoint.py) unless `model.kwargs` gives its own; a
    query its URL carries is sent with each request."""
    made = {"http_client": http_client, "http_async_client": async_http_client}
    return {name: make(timeout) for name, make in made.items() if name not in kwargs} | query_apart(kwargs)
