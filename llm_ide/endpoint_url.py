"""An OpenAI-compatible endpoint's URL as the SDK and our probes use it. The SDK appends its paths (`/chat/completions`)
to the URL as a string, after any query it carries (`?api-key=…`, Azure's `?api-version=…`): the query goes apart and
is sent with each request."""

from __future__ import annotations

from typing import Any
from urllib.parse import parse_qsl


def below(url: str, tail: str) -> str:
    """The URL of `tail` (`/models`) under the endpoint `url`, its query kept after it."""
    base, _, query = url.partition("?")
    return base.rstrip("/") + tail + (f"?{query}" if query else "")


def query_apart(kwargs: dict[str, Any]) -> dict[str, Any]:
    """An OpenAI client's arguments with its `base_url`'s query in `default_query` (which `model.kwargs` may extend)."""
    base, mark, query = str(kwargs.get("base_url") or "").partition("?")
    if not mark:
        return kwargs
    asked = dict(parse_qsl(query, keep_blank_values=True)) | dict(kwargs.get("default_query") or {})
    return kwargs | {"base_url": base, "default_query": asked}
