from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from llm_ide.scripted import ScriptItem
from llm_ide.state.operations import Reflection
from llm_ide.text import clean_text

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}
MAX_DEPTH = 50
_BAD_ACTION_TAG = re.compile(r"<\s*bad[-_ ]?action\s*>", re.IGNORECASE)
_VERDICT = re.compile(r"^[*_`\s]*(good|bad)\b[*_`\s]*[:—–-]?\s*(.*)$", re.IGNORECASE)
_LESSON = re.compile(r"^[-*•\s]*lessons?\s*:\s*(.*)$", re.IGNORECASE)
_ACTION_TYPE_TAG = re.compile(r"<\s*action[-_ ]?type\s*>", re.IGNORECASE)
_REFLECTION_END = re.compile(r"<\s*/\s*(bad[-_ ]?action|lessons|summary)\s*>", re.IGNORECASE)
_ACTION_START = re.compile(r"<\s*(thought|action[-_ ]?type)\s*>", re.IGNORECASE)
_FENCE = re.compile(r"^\s*```[\w-]*\s*\n?(.*?)\n?\s*```\s*$", re.DOTALL)
_JSON_OBJECT = re.compile(r'^\{\s*"')
_TAG = re.compile(r"<\s*/?\s*([a-z][\w-]*)\s*/?\s*>", re.IGNORECASE)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s")
RAW_BODY = {"bash": "command"}  # actions whose tag may hold their one parameter as it is (`<bash>ls -la</bash>`)


class FormatError(ValueError):
    pass


@dataclass(frozen=True)
class Grammar:
    """The action types a run knows (the core's and its variants'), and those whose parameters may be left out."""

    types: tuple[str, ...]
    bare: frozenset[str]
    tag: re.Pattern[str]

    @staticmethod
    @cache
    def of(types: tuple[str, ...], bare: frozenset[str]) -> Grammar:
        names = "|".join(sorted(types, key=len, reverse=True))
        return Grammar(types, bare, re.compile(rf"<\s*({names})\s*(/)?\s*>", re.IGNORECASE))

    def with_actions(self, types: Iterable[str], bare: Iterable[str]) -> Grammar:
        more = tuple(name for name in types if name not in self.types)
        return Grammar.of((*self.types, *more), self.bare | frozenset(bare))


@dataclass
class ParsedAction:
    thought: str
    action_type: str
    action_params: dict[str, Any]


def extract_tag(text: str, name: str, required: bool = True) -> str | None:
    """Content of <name>...</name>, lenient about whitespace, case, `-`/`_` and a missing or misspelt closing tag."""
    stem = "[-_ ]?".join(re.escape(part) for part in re.split(r"[-_]", name))
    opening = re.compile(rf"<\s*{stem}\s*>", re.IGNORECASE)
    match = opening.search(text)
    if match is None:
        if required:
            raise FormatError(f"missing <{name}> tag")
        return None
    rest = text[match.end() :]
    closing = re.compile(rf"<\s*/?\s*{stem}\s*>", re.IGNORECASE).search(rest)
    if closing is None:
        following = re.search(r"<\s*[a-z][\w-]*\s*>", rest, re.IGNORECASE)
        closing_at = following.start() if following else len(rest)
    else:
        closing_at = closing.start()
    return rest[:closing_at].strip()


def parse_bool(value: str, name: str) -> bool:
    word = value.strip().strip("`'\"*").lower()
    if word in _TRUE:
        return True
    if word in _FALSE:
        return False
    raise FormatError(f"<{name}> must be true or false, got {value.strip()[:40]!r}")


def parse_reflection(text: str) -> Reflection:
    """The terse format (`good: <summary>` or `bad: <summary>`, then `lesson: ...` lines), or the tagged one
    (`<bad_action>`, `<summary>`, `<lessons>`)."""
    if _BAD_ACTION_TAG.search(text):
        return Reflection(
            bad_action=parse_bool(extract_tag(text, "bad_action") or "", "bad_action"),
            summary=extract_tag(text, "summary") or "",
            lessons=extract_tag(text, "lessons", required=False) or "",
        )
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    verdict = _VERDICT.match(lines[0]) if lines else None
    if verdict is None:
        raise FormatError("the reflection's first line must be `good: <summary>` or `bad: <summary>`")
    summary, lessons = [verdict.group(2).strip()], []
    for line in lines[1:]:
        if lesson := _LESSON.match(line):
            lessons.append(lesson.group(1).strip())
        elif lessons:
            lessons[-1] += " " + line
        else:
            summary.append(line)
    return Reflection(
        bad_action=verdict.group(1).lower() == "bad",
        summary=" ".join(part for part in summary if part),
        lessons="\n".join(lesson for lesson in lessons if lesson),
    )


def reflection_only(text: str) -> bool:
    """A reply that is a reflection and nothing else: no tag in it but the reflection's own."""
    try:
        parse_reflection(text)
    except FormatError:
        return False
    return {tag.lower().replace("-", "_") for tag in _TAG.findall(text)} <= {"bad_action", "lessons", "summary"}


def joined_script(items: list[ScriptItem]) -> list[ScriptItem]:
    """A scripted model's responses for a single-call run: a response that is only a reflection joins the one after it
    (so a script written for two calls per step plays in one)."""
    out: list[ScriptItem] = []
    waiting: str | None = None
    for item in items:
        if waiting is None and isinstance(item, str) and reflection_only(item):
            waiting = item
        elif waiting is None:
            out.append(item)
        else:
            out.append(prefixed(waiting, item))
            waiting = None
    return out if waiting is None else [*out, waiting]


def prefixed(text: str, item: ScriptItem) -> ScriptItem:
    """A script item whose reply (each of a choice's) opens with `text`; a tool call's text does."""
    if isinstance(item, str):
        return f"{text}\n{item}"
    if "tool_call" in item:
        return {**item, "text": f"{text}\n{item.get('text', '')}".rstrip("\n")}
    return {**item, "then": prefixed(text, item["then"]), "else": prefixed(text, item["else"])}


def first_sentence(text: str) -> str:
    """The first sentence of the first paragraph, on one line."""
    paragraph = text.strip().split("\n\n")[0]
    return " ".join(_SENTENCE_END.split(paragraph, maxsplit=1)[0].split())


def parse_single_reply(
    text: str, grammar: Grammar, action: Callable[[str, Grammar], ParsedAction] | None = None
) -> tuple[Reflection, ParsedAction]:
    """A single-call reply: the verdict (`good` or `bad`) and its `lesson:` lines, then the action whose reasoning
    begins with what the operation found: that first sentence is the reflection's summary, unless the verdict line
    holds one (`good: <summary>`). `action` reads the rest (default: the action in the text)."""
    reflection_text, rest = split_reflection(text)
    reflection = parse_reflection(reflection_text)
    parsed = (action or parse_action)(rest, grammar)
    if not reflection.summary:
        reflection = replace(reflection, summary=first_sentence(parsed.thought))
    return reflection, parsed


def split_reflection(text: str) -> tuple[str, str]:
    """A single-call reply: the reflection (its verdict line and `lesson:` lines, or its tags), then the action."""
    if _BAD_ACTION_TAG.search(text):
        match = _ACTION_START.search(text)
        closings = list(_REFLECTION_END.finditer(text))
        at = match.start() if match else closings[-1].end() if closings else None
        if at is None or not text[at:].strip():
            raise FormatError("missing the action after the reflection")
        return text[:at], text[at:]
    lines = text.strip().splitlines(keepends=True)
    taken = 1 + next((i for i, line in enumerate(lines[1:]) if not _LESSON.match(line.strip())), len(lines) - 1)
    return "".join(lines[:taken]), "".join(lines[taken:])


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
        raise FormatError(f"the action's parameters are not valid JSON ({error.msg} at line {error.lineno})") from None
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
        f"missing the action: a tag named after its type ({', '.join(grammar.types)}) holding its JSON parameters"
    )


def parse_tagged_action(text: str, grammar: Grammar) -> ParsedAction:
    action_type = (extract_tag(text, "action_type") or "").strip().strip("`'\"").lower()
    if action_type not in grammar.types:
        raise FormatError(f"unknown action_type {action_type[:40]!r}; expected one of {', '.join(grammar.types)}")
    params = parse_params(extract_tag(text, "action_params", required=action_type not in grammar.bare))
    return ParsedAction(extract_tag(text, "thought") or "", action_type, params)
