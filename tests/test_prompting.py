"""Templates of text and `{{ name.attr }}` tags only are rendered without compiling them (prompting.py's `_renderer`):
every bundled template and any source made of tag-like pieces renders as Jinja renders it, value for value, error for
error; a missing value or attribute fails with Jinja's own error."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import Template, UndefinedError

import llm_ide
from llm_ide.prompting import JINJA, SUBSTITUTION, _renderer, render_string

PROMPTS = Path(llm_ide.__file__).parent / "prompts"


def strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [text for value in node.values() for text in strings(value)]
    return [text for value in node for text in strings(value)] if isinstance(node, list) else []


BUNDLED = sorted({text for path in PROMPTS.glob("*.yaml") for text in strings(yaml.safe_load(path.read_text()))})


def compiled(source: str) -> bool:
    return isinstance(getattr(_renderer(source), "__self__", None), Template)


def outcome(render: Any, **values: Any) -> tuple[str, str]:
    try:
        return "text", render(**values)
    except Exception as error:  # noqa: BLE001 (the two renders must fail alike)
        return type(error).__name__, str(error)


def values_for(source: str, leaf: Any) -> dict[str, Any]:
    """A value for every tag of `source`: `leaf` at the end of each dotted path, objects and dicts on the way."""
    values: dict[str, Any] = {}
    for number, path in enumerate(SUBSTITUTION.findall(source)):
        name, *attributes = path.split(".")
        value: Any = leaf if not isinstance(leaf, str) else f"{leaf}{number}"
        for depth, attribute in enumerate(reversed(attributes)):
            value = {attribute: value} if depth % 2 else SimpleNamespace(**{attribute: value})
        values[name] = value
    return values


def test_the_plain_bundled_templates_are_not_compiled() -> None:
    plain = [source for source in BUNDLED if not compiled(source)]
    assert not any(re.search(r"\{%|\{#", source) for source in plain)
    names = {name for source in plain for name in SUBSTITUTION.findall(source)}
    assert {"path", "node.thought", "node.action_type", "output", "head", "elided"} <= names
    assert len(plain) > 0.6 * len(BUNDLED)
    assert compiled("{% if x %}a{% endif %}") and compiled("{{ x | length }}") and not compiled("no tags at all\n")


@pytest.mark.parametrize("leaf", ["text {{ with }} braces\n", 0, 12, None, 2.5, ["a", 1]])
def test_every_bundled_template_renders_as_jinja_renders_it(leaf: Any) -> None:
    for source in BUNDLED:
        if not compiled(source):
            values = values_for(source, leaf)
            assert outcome(_renderer(source), **values) == outcome(JINJA.from_string(source).render, **values), source


@pytest.mark.parametrize(
    "source, values",
    [
        ("{{ path }} and {{ total }}", {"path": "a.py"}),  # a value missing
        ("{{ node.thought }}", {"node": SimpleNamespace(id=1)}),  # an attribute missing
        ("{{ node.thought }}", {"node": {"id": 1}}),  # nor an item of that name
        ("{{ node.id.real }}", {"node": {"id": 7}}),  # an item where no attribute is
    ],
)
def test_missing_values_fail_as_jinja_fails(source: str, values: dict[str, Any]) -> None:
    assert not compiled(source)
    assert outcome(_renderer(source), **values) == outcome(JINJA.from_string(source).render, **values)
    if source != "{{ node.id.real }}":
        with pytest.raises(UndefinedError):
            render_string(source, **values)


PIECES = ["{{ a }}", "{{a.b}}", "{{ b.c }}", "{{ true }}", "{{ none }}", "{{ self }}", "{{ a -}}", "{{", "}}", "{%"]
PIECES += ["%}", "{#", "#}", "{", "}", " ", "\n", "\r\n", "a", ".", "x", "-", "{% raw %}", "{% endraw %}"]
PIECES += ["{{ a.__class__.__name__ }}"]


@settings(max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.sampled_from([1, "v{x}", None]))
def test_any_source_renders_as_jinja_renders_it(pieces: list[str], leaf: Any) -> None:
    source = "".join(pieces)
    values = {"a": leaf, "b": SimpleNamespace(c=leaf), "true": leaf, "none": leaf}  # (Jinja's render takes no `self`)
    jinja = outcome(lambda **given: JINJA.from_string(source).render(**given), **values)
    assert outcome(lambda **given: _renderer(source)(**given), **values) == jinja
