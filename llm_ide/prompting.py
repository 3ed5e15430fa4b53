"""Every prompt and observation is a Jinja2 template of the settings (no prompt text in Python): rendered strictly
(an unknown name is an error), and text cut to a limit keeps its head and tail."""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Collection
from functools import lru_cache, partial
from itertools import groupby
from typing import Any

from jinja2 import Environment, StrictUndefined, Template

from llm_ide.settings import Templates

# The one Jinja environment of the project: prompts, observations, environment notes, tool scripts, eval scripts.
JINJA = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
JINJA.filters["shquote"] = shlex.quote
ROW = re.compile(r" *(\d+)\t")  # a numbered code row (the code context, the view actions, `nl -ba`)
# A `{{ name.attr }}` tag, the start of any Jinja tag, names Jinja reads as constants or operators or may give a meaning
SUBSTITUTION = re.compile(r"\{\{ *([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*) *\}\}")
TAG_START = re.compile(r"\{[{%#]")
SPECIAL = {"true", "false", "none", "True", "False", "None", "not", "self", "super", "loop", "caller", "varargs"}


@lru_cache(maxsize=512)
def compile_template(source: str) -> Template:
    return JINJA.from_string(source)


def template_source(templates: Templates, name: str) -> str:
    node: Any = templates
    for part in name.split("."):
        node = getattr(node, part)
    return node


def render(templates: Templates, name: str, **values: Any) -> str:
    return render_string(template_source(templates, name), **values)


def render_string(source: str, **values: Any) -> str:
    """`source` rendered, without leading and trailing newlines."""
    return _renderer(source)(**values).strip("\n")


@lru_cache(maxsize=512)
def _renderer(source: str) -> Callable[..., str]:
    """Jinja's render of `source`; one of text and `{{ name.attr }}` tags only is not compiled but rendered as Jinja's
    code renders it (with this environment: text as is, then each value's str(), attributes read by Jinja's getattr;
    a name not among the values: Jinja's own render)."""
    texts, names = (parts := SUBSTITUTION.split(source))[::2], [name.split(".") for name in parts[1::2]]
    special = any(name[0] in SPECIAL for name in names) or any(text.endswith("{") for text in texts[:-1])
    if special or "\r" in source or any(map(TAG_START.search, texts)):  # (Jinja's tags begin at any `{{`, `{%`, `{#`)
        return compile_template(source).render

    def render(**values: Any) -> str:
        out = [texts[0]]
        for (name, *attributes), text in zip(names, texts[1:], strict=True):
            if name not in values:
                return compile_template(source).render(**values)
            value = values[name]
            for attribute in attributes:
                value = JINJA.getattr(value, attribute)
            out += (str(value), text)
        return "".join(out)

    return render


def truncate(text: str, limit: int, templates: Templates) -> str:
    """Head + tail of `text` with an elision line when it is longer than `limit` characters."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return render(templates, "truncated", head=text[:half], tail=text[-half:], elided=len(text) - 2 * half)


def rows_elided(text: str, shown: Collection[str], templates: Templates, context: bool) -> str:
    """The text with each run of three or more numbered rows that `shown` holds as one line (`rows_in_context`)."""
    out: list[str] = []
    say = partial(render, templates, "rows_in_context", context=context)
    for inside, run in groupby(text.split("\n"), lambda line: line in shown and ROW.match(line) is not None):
        rows = list(run)
        first, last = (row.split("\t")[0].strip() for row in (rows[0], rows[-1]))
        out += [say(first=first, last=last)] if inside and len(rows) > 2 else rows
    return "\n".join(out)
