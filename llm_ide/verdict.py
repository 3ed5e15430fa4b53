"""An operation's verdict, its whole life in one place: what an operation carries of it (`Judged`, the part of an
operation it is), read from a reply (`good: <summary>` or `bad: <summary>` and its `lesson:` lines, or the seed's tags
`<bad_action>`, `<summary>`, `<lessons>`), applied to the operation it judges, given by a variant as an action runs (a
denial), and shown again in later prompts (the verdict as the model gave it, the instruction it chose). The graph's
`reflect` node gets it and commits it to the operation it judges, `branch` places the next operation by it (the child
of a good one, the sibling of a bad one: an alternative); nothing else reads it."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from llm_ide.errors import FormatError
from llm_ide.prompting import render
from llm_ide.settings import Templates
from llm_ide.text import extract_tag, first_sentence

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}
_TAGGED = re.compile(r"<\s*bad[-_ ]?action\s*>", re.IGNORECASE)
_VERDICT = re.compile(r"^[*_`\s]*(good|bad)\b[*_`\s]*[:—–-]?\s*(.*)$", re.IGNORECASE)
_LESSON = re.compile(r"^[-*•\s]*lessons?\s*:\s*(.*)$", re.IGNORECASE)
_TAG_END = re.compile(r"<\s*/\s*(bad[-_ ]?action|lessons|summary)\s*>", re.IGNORECASE)
_ACTION_START = re.compile(r"<\s*(thought|action[-_ ]?type)\s*>", re.IGNORECASE)
_TAG = re.compile(r"<\s*/?\s*([a-z][\w-]*)\s*/?\s*>", re.IGNORECASE)


@dataclass(kw_only=True)
class Judged:
    """The verdict as the operation it judges carries it (llm_ide/state/operations.py's nodes are `Judged`)."""

    bad_action: bool | None = None  # None until given
    summary: str = ""
    lessons: str = ""
    judged_when_run: bool = False  # its verdict came with it (a variant judged it as it ran): no model reflects on it


Node = TypeVar("Node", bound=Judged)


@dataclass(frozen=True)
class Verdict:
    """Whether the operation was bad (its next operation replaces it), what it found, what to remember."""

    bad: bool
    summary: str
    lessons: str = ""

    def summarised(self, thought: str) -> Verdict:
        """A verdict without its summary takes the first sentence of the reasoning after it (one call per step)."""
        return self if self.summary else replace(self, summary=first_sentence(thought))


def flag(value: str) -> bool:
    word = value.strip().strip("`'\"*").lower()
    if word not in _TRUE | _FALSE:
        raise FormatError(f"<bad_action> must be true or false, got {value.strip()[:40]!r}")
    return word in _TRUE


def parse(text: str) -> Verdict:
    """A verdict in the terse format (`good: <summary>` or `bad: <summary>`, then `lesson: …` lines) or the tagged
    one (`<bad_action>`, `<summary>`, `<lessons>`)."""
    if _TAGGED.search(text):
        found = extract_tag(text, "bad_action") or ""
        return Verdict(
            flag(found), extract_tag(text, "summary") or "", extract_tag(text, "lessons", required=False) or ""
        )
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    opening = _VERDICT.match(lines[0]) if lines else None
    if opening is None:
        raise FormatError("the reply's first line must be the verdict, `good` or `bad`")
    summary, lessons = [opening.group(2).strip()], []
    for line in lines[1:]:
        if lesson := _LESSON.match(line):
            lessons.append(lesson.group(1).strip())
        elif lessons:
            lessons[-1] += " " + line
        else:
            summary.append(line)
    return Verdict(
        opening.group(1).lower() == "bad",
        " ".join(part for part in summary if part),
        "\n".join(lesson for lesson in lessons if lesson),
    )


def split(text: str) -> tuple[str, str]:
    """A reply of one call per step: its verdict (the verdict line and its `lesson:` lines, or the tags), then the
    rest (the reasoning and the action)."""
    if _TAGGED.search(text):
        match = _ACTION_START.search(text)
        closings = list(_TAG_END.finditer(text))
        at = match.start() if match else closings[-1].end() if closings else None
        if at is None or not text[at:].strip():
            raise FormatError("missing the action after the reflection")
        return text[:at], text[at:]
    lines = text.strip().splitlines(keepends=True)
    taken = 1 + next((i for i, line in enumerate(lines[1:]) if not _LESSON.match(line.strip())), len(lines) - 1)
    return "".join(lines[:taken]), "".join(lines[taken:])


def alone(text: str) -> bool:
    """A reply that is a verdict and nothing else (no tag in it but the verdict's own)."""
    try:
        parse(text)
    except FormatError:
        return False
    return {found.lower().replace("-", "_") for found in _TAG.findall(text)} <= {"bad_action", "lessons", "summary"}


def due(nodes: Sequence[Judged]) -> bool:
    """Whether the latest operation waits for its verdict (one judged as it ran, e.g. a denial, does not)."""
    return bool(nodes) and nodes[-1].bad_action is None


def judged(node: Node, verdict: Verdict) -> Node:
    """The operation with the model's verdict on it."""
    return replace(node, bad_action=verdict.bad, summary=verdict.summary, lessons=verdict.lessons)


def given(node: Node, verdict: Verdict) -> Node:
    """The operation with a verdict given as it ran (a variant's: a denial, a review): no model judges it."""
    return replace(judged(node, verdict), judged_when_run=True)


def kept_apart(channels: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint of an earlier version stopped mid-step kept the step's verdict apart (a `judged` channel, committed
    at the step's end): the update that commits it."""
    apart = channels.get("judged")
    return {"operations": [apart]} if apart is not None else {}


def bad(node: Judged | None) -> bool:
    """Whether the operation was judged bad (its next operation takes its place)."""
    return node is not None and bool(node.bad_action)


def by_model(node: Judged) -> bool:
    """Whether a model gave the operation's verdict (in a later reply), so that the conversation shows it."""
    return node.bad_action is not None and not node.judged_when_run


def instruction(templates: Templates, node: Judged | None) -> str:
    """What the model is asked after an operation's verdict: the next step after a good one (or none), an
    alternative in its place after a bad one."""
    return render(templates, "alternative_action" if bad(node) else "next_step", node=node)


def asked(templates: Templates, node: Judged, instruction_after_verdict: str) -> str:
    """What follows an operation's outcome: its verdict asked for, or, judged as it ran, the next action at once."""
    return (
        instruction(templates, node)
        if node.judged_when_run
        else render(templates, instruction_after_verdict, node=node)
    )


def said(templates: Templates, node: Judged, following: str | None = None) -> str:
    """The verdict on `node` as the model gave it; opening the reply of the following operation (`following`: its
    reasoning) that begins with the summary, without it (as that reply had it)."""
    brief = following is not None and node.summary == first_sentence(following)
    return render(templates, "reflection", reflection=node, brief=brief)
