"""Every prompt and observation is a Jinja2 template of the settings (no prompt text in Python): rendered strictly
(an unknown name is an error), and text cut to a limit keeps its head and tail."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Collection
from functools import lru_cache, partial
from itertools import groupby
from typing import Any

from jinja2 import Template, nodes

from llm_ide.settings import Templates
from llm_ide.templating import JINJA, parse

ROW = re.compile(r" *(\d+)\t")  # a numbered code row (the code context, the view actions, `nl -ba`)
COMPARE = {op: getattr(operator, op.replace("teq", "e")) for op in ("eq", "ne", "lt", "gt", "lteq", "gteq")}  # Jinja's


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
    return render_source(source, **values).strip("\n")


def render_source(source: str, **values: Any) -> str:
    """`source` rendered as Jinja renders it (through `_renderer`: most templates need no compile)."""
    return _renderer(source)(**values)


@lru_cache(maxsize=512)
def _renderer(source: str) -> Callable[..., str]:
    """Jinja's render of `source`; one of text, values, attributes, `if` and simple tests is not compiled but its parse
    rendered as Jinja's code renders it (a name not among the values: Jinja's own render)."""
    tree = parse(source)  # (a syntax error: Jinja's own, as compiling raises it)
    try:
        body = _plan(tree.body)
    except NotImplementedError:
        return compile_template(source).render
    names = {node.name for node in tree.find_all(nodes.Name)}

    def render(**values: Any) -> str:
        return body(values) if names.issubset(values) else compile_template(source).render(**values)

    return render


def _plan(node: Any) -> Callable[[dict[str, Any]], Any]:
    """A function of the values computing `node` as Jinja's generated code does (a list of nodes: their text)."""
    if isinstance(node, list | nodes.Output):  # (an output node's values as str())
        parts = [_plan(child) for child in (node.nodes if isinstance(node, nodes.Output) else node)]
        return lambda values: "".join([str(part(values)) for part in parts])
    if isinstance(node, nodes.If):
        branches = [(_plan(branch.test), _plan(branch.body)) for branch in (node, *node.elif_)]
        otherwise = _plan(node.else_)
        return lambda values: next((body for test, body in branches if test(values)), otherwise)(values)
    if isinstance(node, nodes.TemplateData | nodes.Const):
        constant = node.data if isinstance(node, nodes.TemplateData) else node.value
        return lambda values: constant
    if isinstance(node, nodes.Name) and (name := node.name) != "self":  # (Jinja's `self`: the template)
        return lambda values: values[name]
    if isinstance(node, nodes.Getattr):
        inner, attribute = _plan(node.node), node.attr
        return lambda values: JINJA.getattr(inner(values), attribute)
    if isinstance(node, nodes.Not):
        inner = _plan(node.node)
        return lambda values: not inner(values)
    if isinstance(node, nodes.Compare) and len(node.ops) == 1 and node.ops[0].op in COMPARE:
        left, right, compare = _plan(node.expr), _plan(node.ops[0].expr), COMPARE[node.ops[0].op]
        return lambda values: compare(left(values), right(values))
    if isinstance(node, nodes.CondExpr):  # (without `else`: None, left to Jinja)
        test, then, otherwise = _plan(node.test), _plan(node.expr1), _plan(node.expr2)
        return lambda values: then(values) if test(values) else otherwise(values)
    raise NotImplementedError(node)  # left to Jinja


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
