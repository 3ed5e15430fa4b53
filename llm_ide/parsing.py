"""The actions in a reply's text (`model.action_format: text`): a tag named after the action holding its JSON
parameters (`<view>{"path": "a.py"}</view>`, `<bash>ls</bash>`), or the seed's tagged form (`<thought>`,
`<action_type>`, `<action_params>`); the parameters every store can hold, read the same way from a tool call's
arguments (llm_ide/action_tools.py)."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from llm_ide.errors import FormatError
from llm_ide.text import clean_text, extract_tag

MAX_DEPTH = 50
MAX_CHARS = 1_000_000  # of an action's parameters (a reply is capped before: agent.max_reply_chars)
_ACTION_TYPE_TAG = re.compile(r"<\s*action[-_ ]?type\s*>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_JSON_OBJECT = re.compile(r'^\{\s*"')
RAW_BODY = {"bash": "command"}  # actions whose tag may hold their one parameter as it is (`<bash>ls -la</bash>`)


@dataclass(frozen=True)
class Grammar:
    """The action types a run reads (the core's and its variants', and those of the variants it has not: they answer
    that they are absent), those it offers (`offered`: what the prompt and a format error list), and those whose
    parameters may be left out."""

    types: tuple[str, ...]
    bare: frozenset[str]
    tag: re.Pattern[str]
    absent: frozenset[str] = frozenset()

    @staticmethod
    @cache
    def of(types: tuple[str, ...], bare: frozenset[str], absent: frozenset[str] = frozenset()) -> Grammar:
        names = "|".join(sorted(types, key=len, reverse=True))
        return Grammar(types, bare, re.compile(rf"<\s*({names})\s*(/)?\s*>", re.IGNORECASE), absent)

    @property
    def offered(self) -> tuple[str, ...]:
        return tuple(name for name in self.types if name not in self.absent)

    def with_actions(self, types: Iterable[str], bare: Iterable[str], absent: Iterable[str] = ()) -> Grammar:
        more = tuple(name for name in types if name not in self.types)
        return Grammar.of((*self.types, *more), self.bare | frozenset(bare), self.absent | frozenset(absent))


@dataclass
class ParsedAction:
    thought: str
    action_type: str
    action_params: dict[str, Any]


def parse_body(action_type: str, body: str) -> dict[str, Any]:
    """An action tag's parameters: a JSON object, or for `RAW_BODY` actions the parameter's value as it is (a fenced
    block's content; not when the body holds another such tag: that one is the action)."""
    key, value = RAW_BODY.get(action_type), body.strip()
    if fence := _FENCE.match(value):
        value = fence.group(1).strip()
    if key is None or _JSON_OBJECT.match(value):
        return parse_params(value)
    if re.search(rf"<\s*{action_type}\s*>", value, re.IGNORECASE):
        raise FormatError(f"more than one <{action_type}> tag")
    return {key: clean_text(value)} if value else {}


def body_text(action_type: str, params: dict[str, Any]) -> str:
    """What an action's tag holds, as `parse_body` reads it back: the bare value of a `RAW_BODY` action's parameter,
    else JSON (`<` escaped where the text would hold the tag itself)."""
    key = RAW_BODY.get(action_type)
    value = params.get(key) if key else None
    tag = re.compile(rf"<\s*/?\s*{action_type}\s*/?\s*>", re.IGNORECASE)
    bare = isinstance(value, str) and params.keys() == {key} and value and value == value.strip()
    if bare and isinstance(value, str) and not (tag.search(value) or _JSON_OBJECT.match(value) or _FENCE.match(value)):
        return value
    body = json.dumps(params, ensure_ascii=False)
    return body.replace("<", "\\u003c") if tag.search(body) else body


def parse_params(raw: str | None) -> dict[str, Any]:
    if raw is None or not raw.strip():
        return {}
    body = raw.strip()
    if fence := _FENCE.match(body):
        body = fence.group(1).strip()
    try:
        value = json.loads(body)
    except json.JSONDecodeError as error:
        raise FormatError(f"the action's parameters are not valid JSON ({error})") from None
    except RecursionError:
        raise FormatError(f"the action's parameters are nested more than {MAX_DEPTH} levels deep") from None
    if not isinstance(value, dict):
        raise FormatError(f"the action's parameters must be a JSON object, got {type(value).__name__}")
    return storable(value)


def storable(value: Any, depth: int = 0) -> Any:
    """Parameters every store can hold: nesting at most MAX_DEPTH and integers within 64 bits (else a format error),
    strings cleaned of NUL and lone surrogates (JSON escapes can carry them)."""
    if depth > MAX_DEPTH:
        raise FormatError(f"the action's parameters are nested more than {MAX_DEPTH} levels deep")
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2**63) <= value < 2**63:
        raise FormatError(f"the action's parameters hold an integer out of range ({str(value)[:20]}…)")
    if isinstance(value, dict):
        return {clean_text(str(key)): storable(child, depth + 1) for key, child in value.items()}
    if isinstance(value, list):
        return [storable(child, depth + 1) for child in value]
    return value


def parse_action(text: str, grammar: Grammar) -> ParsedAction:
    """The terse format (the thought, then the action as a tag named after its type holding the JSON parameters:
    `<view>{"path": ...}</view>`), or the tagged one (`<thought>`, `<action_type>`, `<action_params>`)."""
    if _ACTION_TYPE_TAG.search(text):
        return parse_tagged_action(text, grammar)
    error: FormatError | None = None
    for match in grammar.tag.finditer(text):  # the first tag whose body parses (a later one may sit in the params)
        action_type = match.group(1).lower()
        rest = text[match.end() :]
        closings = list(re.finditer(rf"<\s*/\s*{action_type}\s*>", rest, re.IGNORECASE))
        body = "" if match.group(2) else rest[: closings[-1].start()] if closings else rest
        try:
            params = parse_body(action_type, body)
        except FormatError as problem:
            error = error or problem
            continue
        before = text[: match.start()]
        thought = extract_tag(before, "thought", required=False) or before.strip()
        return ParsedAction(thought, action_type, params)
    raise error or FormatError(
        f"missing the action: a tag named after its type ({', '.join(grammar.offered)}) holding its JSON parameters"
    )


def parse_tagged_action(text: str, grammar: Grammar) -> ParsedAction:
    action_type = (extract_tag(text, "action_type") or "").strip().strip("`'\"").lower()
    if action_type not in grammar.types:
        raise FormatError(f"unknown action_type {action_type[:40]!r}; expected one of {', '.join(grammar.offered)}")
    params = parse_params(extract_tag(text, "action_params", required=action_type not in grammar.bare))
    return ParsedAction(extract_tag(text, "thought") or "", action_type, params)
