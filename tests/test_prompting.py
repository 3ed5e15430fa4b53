"""Templates of text, values, attributes, `if` and simple tests are rendered from their parse without compiling them
(prompting.py's `_renderer`): every bundled template and any source made of tag-like pieces renders as Jinja renders
it, value for value, error for error; a missing value or attribute fails with Jinja's own error."""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import Template, nodes

import llm_ide
from llm_ide.prompting import _renderer, render_string
from llm_ide.templating import JINJA, OWN_NAMES, _text_and_values

PROMPTS = Path(llm_ide.__file__).parent / "prompts"
EXAMPLES = settings(
    max_examples=400, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True
)


def strings(node: Any) -> list[str]:
    if isinstance(node, str):
        return [node]
    if isinstance(node, dict):
        return [text for value in node.values() for text in strings(value)]
    return [text for value in node for text in strings(value)] if isinstance(node, list) else []


BUNDLED = sorted({text for path in PROMPTS.glob("*.yaml") for text in strings(yaml.safe_load(path.read_text()))})


def compiled(source: str) -> bool:
    return isinstance(getattr(_renderer(source), "__self__", None), Template)


PLAIN = [source for source in BUNDLED if not compiled(source)]


def outcome(render: Any, **values: Any) -> tuple[str, str]:
    try:
        return "text", render(**values)
    except Exception as error:  # noqa: BLE001 (the two renders must fail alike)
        return type(error).__name__, str(error)


def both(source: str, values: dict[str, Any]) -> tuple[tuple[str, str], tuple[str, str]]:
    """Jinja's render of `source` and `_renderer`'s (failures as their type and message, syntax errors too); a parse
    read off the text is Jinja's parse, node for node."""
    if (read := _text_and_values(source)) is not None:
        assert read == JINJA.parse(source)
    jinja = outcome(lambda **given: JINJA.from_string(source).render(**given), **values)
    return jinja, outcome(lambda **given: _renderer(source)(**given), **values)


def paths(source: str) -> list[list[str]]:
    """The dotted names `a.b.c` the template reads, each as its parts."""
    found = []
    for node in JINJA.parse(source).find_all(nodes.Getattr | nodes.Name):
        parts = []
        while isinstance(node, nodes.Getattr):
            parts.insert(0, node.attr)
            node = node.node
        if isinstance(node, nodes.Name):
            found.append([node.name, *parts])
    return found


def values_for(source: str, leaves: Any) -> dict[str, Any]:
    """A value for every dotted name of `source`: a drawn leaf at its end, objects and dicts on the way."""
    values: dict[str, Any] = {}
    for name, *attributes in sorted(paths(source), key=len):
        value: Any = leaves()
        for depth, attribute in enumerate(reversed(attributes)):
            value = {attribute: value} if depth % 2 else SimpleNamespace(**{attribute: value})
        values[name] = value
    return values


def test_most_bundled_templates_are_not_compiled() -> None:
    assert len(PLAIN) > 0.8 * len(BUNDLED)
    ifs = [source for source in PLAIN if "{% if" in source]
    assert len(ifs) >= 8 and any("{%- if" in source for source in PLAIN)
    assert any('if count != 1 else ""' in source for source in PLAIN)
    assert compiled("{% for x in y %}{{ x }}{% endfor %}") and compiled("{{ x | length }}") and compiled("{{ x() }}")
    assert not compiled("no tags at all\n") and not compiled("{{ a.b }}{% if not c %}d{% elif e < 2 %}f{% endif %}")


LEAVES = st.sampled_from([0, 1, 2, "", "text {{ with }} braces\n", None, True, ["a", 1], 2.5])


@EXAMPLES
@given(st.sampled_from(PLAIN), st.data())
def test_every_bundled_template_renders_as_jinja_renders_it(source: str, data: st.DataObject) -> None:
    values = values_for(source, lambda: data.draw(LEAVES))
    jinja, ours = both(source, values)
    assert ours == jinja


@pytest.mark.parametrize(
    "source, values, result",
    [
        ("{{ path }} and {{ total }}", {"path": "a.py"}, "UndefinedError"),  # a value missing
        ("{% if path %}{{ total }}{% endif %}", {"path": ""}, "text"),  # one missing in a branch not taken
        ("{{ node.thought }}", {"node": SimpleNamespace(id=1)}, "UndefinedError"),  # an attribute missing
        ("{{ node.thought }}", {"node": {"id": 1}}, "UndefinedError"),  # nor an item of that name
        ("{% if node.id.real %}x{% endif %}", {"node": {"id": 7}}, "text"),  # an item where no attribute is
        ("{{ a if a < b else b }}", {"a": 1, "b": "2"}, "TypeError"),  # values that do not compare
    ],
)
def test_missing_values_fail_as_jinja_fails(source: str, values: dict[str, Any], result: str) -> None:
    assert not compiled(source)
    assert outcome(_renderer(source), **values) == outcome(JINJA.from_string(source).render, **values)
    assert outcome(render_string, source=source, **values)[0] == result


NEAR_PLAIN = ["{{{ a }}", "{{ a }}}", "{{{a.b}}", "{# {{ a }} #}", "{{ a }}\r\n", "{% raw %}{{ a }}{% endraw %}"]
NEAR_PLAIN += [re.sub(r"\ba\b", name, source) for source in NEAR_PLAIN for name in sorted(OWN_NAMES)]


@pytest.mark.parametrize("source", NEAR_PLAIN)
@pytest.mark.parametrize("values", [{"a": 1, "true": 2, "True": 3}, {"a": {"b": "c"}, "none": 0, "None": 4}])
def test_sources_near_plain_ones_render_as_jinja_renders_them(source: str, values: dict[str, Any]) -> None:
    jinja, ours = both(source, values)
    assert ours == jinja


PIECES = ["{{ a }}", "{{a.b}}", "{{ b.c }}", "{{ true }}", "{{ none }}", "{{ self }}", "{{ a -}}", "{{", "}}", "{%"]
PIECES += ["%}", "{#", "#}", "{", "}", " ", "\n", "\r\n", "a", ".", "x", "-", "{% raw %}", "{% endraw %}"]
PIECES += ["{{ a.__class__.__name__ }}", "{% if a %}", "{%- if not b.c %}", "{% elif a != 1 %}", "{% else %}"]
PIECES += ["{% endif %}", "{% endif -%}", '{{ "s" if a < 2 else b.c }}', "{{ a if a }}", "{{ a >= 1 }}"]
PIECES += ["{% for x in a %}", "{{ x }}", "{% endfor %}", "{{ a | length }}", "{{ a == b.c == 1 }}"]


@EXAMPLES
@given(st.lists(st.sampled_from(PIECES), max_size=12), st.sampled_from([1, "v{x}", None, 0, "", [3]]))
def test_any_source_renders_as_jinja_renders_it(pieces: list[str], leaf: Any) -> None:
    source = "".join(pieces)
    values = {"a": leaf, "b": SimpleNamespace(c=leaf), "true": leaf, "none": leaf}  # (Jinja's render takes no `self`)
    jinja, ours = both(source, values)
    assert ours == jinja


NAMES = st.sampled_from(["a", "b.c", "b.d", "1", '"s"', "none", "true", "missing"])
EXPRESSIONS = st.recursive(
    NAMES,
    lambda inner: st.one_of(
        inner.map("not {}".format),
        st.tuples(inner, st.sampled_from(["==", "!=", "<", "<=", ">", ">="]), inner).map(" ".join),
        st.tuples(inner, inner, inner).map(lambda three: "({} if {} else {})".format(*three)),
    ),
    max_leaves=4,
)
TEXT = st.sampled_from(["", "x", " ", "\n", "{", "}", "a.b", "%}"])
TEMPLATES = st.recursive(
    st.one_of(TEXT, EXPRESSIONS.map("{{{{ {} }}}}".format)),
    lambda inner: st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.tuples(EXPRESSIONS, inner, st.lists(st.tuples(EXPRESSIONS, inner), max_size=2), inner).map(
            lambda parts: (
                "{{% if {} %}}{}".format(*parts[:2])
                + "".join("{{%- elif {} -%}}{}".format(*branch) for branch in parts[2])
                + f"{{% else %}}{parts[3]}{{% endif %}}"
            )
        ),
    ),
    max_leaves=8,
)


@EXAMPLES
@given(TEMPLATES, st.sampled_from([0, 1, 2, "", "s", None]), st.sampled_from([0, 1, "s", None]))
def test_templates_of_tests_and_branches_render_as_jinja_renders_them(source: str, a: Any, c: Any) -> None:
    values = {"a": a, "b": SimpleNamespace(c=c, d={"e": a})}
    jinja, ours = both(source, values)
    assert ours == jinja
