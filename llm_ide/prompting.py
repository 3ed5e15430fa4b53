from __future__ import annotations

from functools import lru_cache
from typing import Any

from jinja2 import Environment, StrictUndefined, Template

_JINJA = Environment(undefined=StrictUndefined, keep_trailing_newline=False, autoescape=False)


@lru_cache(maxsize=512)
def _compile(source: str) -> Template:
    return _JINJA.from_string(source)


def template_source(templates: dict[str, Any], name: str) -> str:
    node: Any = templates
    for part in name.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(f"prompt template `{name}` is missing from the config's `templates` section")
        node = node[part]
    return node


def render(templates: dict[str, Any], name: str, **values: Any) -> str:
    return render_string(template_source(templates, name), **values)


def render_string(source: str, **values: Any) -> str:
    return _compile(source).render(**values).strip("\n")


def truncate(text: str, limit: int, templates: dict[str, Any]) -> str:
    """Head + tail of `text` with an elision line when it is longer than `limit` characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return render(templates, "truncated", head=text[:half], tail=text[-half:], elided=len(text) - 2 * half)
