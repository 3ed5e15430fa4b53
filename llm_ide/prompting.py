"""Every prompt and observation is a Jinja2 template of the settings (no prompt text in Python): rendered strictly
(an unknown name is an error), and text cut to a limit keeps its head and tail."""

from __future__ import annotations

import re
import shlex
from collections.abc import Collection
from functools import lru_cache, partial
from itertools import groupby
from typing import Any

from jinja2 import Environment, StrictUndefined, Template

from llm_ide.settings import Templates

# The one Jinja environment of the project: prompts, observations, environment notes, tool scripts, eval scripts.
JINJA = Environment(undefined=StrictUndefined, keep_trailing_newline=True, autoescape=False)
JINJA.filters["shquote"] = shlex.quote
ROW = re.compile(r" *(\d+)\t")  # a numbered code row (the code context, the view actions, `nl -ba`)


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
    return compile_template(source).render(**values).strip("\n")


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
