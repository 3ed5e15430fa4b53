"""The project's one Jinja environment (prompts, observations, environment notes, tool scripts, eval scripts) and a
template's parse, made once per text: by the settings' check when they load (a template Jinja cannot parse is refused
then, not when a run first renders it) and reused by every render (llm_ide/prompting.py)."""

from __future__ import annotations

import re
import shlex
from functools import lru_cache
from typing import Any

from jinja2 import Environment, StrictUndefined, TemplateSyntaxError, nodes
from pydantic_core import PydanticCustomError

JINJA = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
JINJA.filters["shquote"] = shlex.quote
SUBSTITUTION = re.compile(r"\{\{ *([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*) *\}\}")  # `{{ name.attr }}`
TAG_START = re.compile(r"\{[{%#]")  # (and a text ending in `{` before a tag: Jinja's tags begin at the first `{{`)
OWN_NAMES = {"true", "false", "none", "True", "False", "None", "self"}  # names Jinja parses as constants, or its own


@lru_cache(maxsize=1024)
def parse(source: str) -> nodes.Template:
    """Jinja's parse of `source` (shared: read it, never change it); raises Jinja's TemplateSyntaxError."""
    return _text_and_values(source) or JINJA.parse(source)


@lru_cache(maxsize=1024)
def syntax_error(source: str) -> str | None:
    """Why Jinja cannot parse `source`, or would refuse to compile it (a filter or test it does not have), on one line
    (None: neither). Kept: every validation of the settings asks again about the same texts."""
    try:
        tree = parse(source)
    except TemplateSyntaxError as error:
        return f"{' '.join(error.message.split()) if error.message else 'syntax error'} (line {error.lineno})"
    for kind, node_type, known in (("filter", nodes.Filter, JINJA.filters), ("test", nodes.Test, JINJA.tests)):
        for node in tree.find_all(node_type):
            if node.name not in known:
                return f"no {kind} named {node.name!r} (line {node.lineno})"
    return None


def parsed(value: Any) -> Any:
    """`value` (a template setting, or a mapping or list holding templates) if Jinja can parse and compile each: a
    broken template is refused with the settings (one line naming the file and the key), not when a run renders it."""
    if found := _broken(value):
        where, why = found
        raise PydanticCustomError(
            "template", "{where}not a template Jinja can parse: {why}", {"where": where, "why": why}
        )
    return value


def _broken(value: Any, where: str = "") -> tuple[str, str] | None:
    """The first template of `value` Jinja cannot take: where it is within `value` (`bash.description: `), and why."""
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else None
    if items is None:
        why = syntax_error(value) if isinstance(value, str) else None
        return (f"{where}: " if where else "", why) if why else None
    for key, item in items:
        if found := _broken(item, f"{where}.{key}" if where else str(key)):
            return found
    return None


def _text_and_values(source: str) -> nodes.Template | None:
    """Jinja's parse of a template of text and `{{ name.attr }}` tags only, read off the text (None: any other)."""
    texts, tags = (parts := SUBSTITUTION.split(source))[::2], [tag.split(".") for tag in parts[1::2]]
    if "\r" in source or any(map(TAG_START.search, texts)) or any(text.endswith("{") for text in texts[:-1]):
        return None
    if any(name in OWN_NAMES for name, *_ in tags):
        return None
    body: list[nodes.Node] = [nodes.TemplateData(texts[0])] if texts[0] else []
    for (name, *attributes), text in zip(tags, texts[1:], strict=True):
        value: nodes.Expr = nodes.Name(name, "load")
        for attribute in attributes:
            value = nodes.Getattr(value, attribute, "load")
        body += [value, nodes.TemplateData(text)] if text else [value]
    return nodes.Template([nodes.Output(body)] if body else [])
