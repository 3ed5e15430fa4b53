"""An operation's verdict, its whole life in one place: read from a reply (`good: <summary>` or `bad: <summary>` and its
`lesson:` lines, or the seed's tags `<bad_action>`, `<summary>`, `<lessons>`), applied to the operation it judges,
the next operation placed by it (the child of a good one, the sibling of a bad one: an alternative), given by a
variant as an action runs (a denial), and shown again in later prompts (the verdict as the model gave it, the
instruction it chose). The graph's `reflect` node gets it, `branch` applies it; nothing else reads it."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from llm_ide.errors import FormatError
from llm_ide.prompting import render
from llm_ide.settings import Templates
from llm_ide.state.operations import OperationNode
from llm_ide.text import extract_tag, first_sentence

_TRUE = {"true", "yes", "1"}
_FALSE = {"false", "no", "0"}
_TAGGED = re.compile(r"<\s*bad[-_ ]?action\s*>", re.IGNORECASE)
_VERDICT = re.compile(r"^[*_`\s]*(good|bad)\b[*_`\s]*[:—–-]?\s*(.*)$", re.IGNORECASE)
_LESSON = re.compile(r"^[-*•\s]*lessons?\s*:\s*(.*)$", re.IGNORECASE)
_TAG_END = re.compile(r"<\s*/\s*(bad[-_ ]?action|lessons|summary)\s*>", re.IGNORECASE)
_ACTION_START = re.compile(r"<\s*(thought|action[-_ ]?type)\s*>", re.IGNORECASE)
_TAG = re.compile(r"<\s*/?\s*([a-z][\w-]*)\s*/?\s*>", re.IGNORECASE)


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
        raise FormatError("the reflection's first line must be `good: <summary>` or `bad: <summary>`")
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


def due(nodes: list[OperationNode]) -> bool:
    """Whether the latest operation waits for its verdict (one judged as it ran, e.g. a denial, does not)."""
    return bool(nodes) and nodes[-1].bad_action is None


def judged(node: OperationNode, verdict: Verdict) -> OperationNode:
    """The operation with the model's verdict on it."""
    return replace(node, bad_action=verdict.bad, summary=verdict.summary, lessons=verdict.lessons)


def given(node: OperationNode, verdict: Verdict) -> OperationNode:
    """The operation with a verdict given as it ran (a variant's: a denial, a review): no model judges it."""
    return replace(judged(node, verdict), judged_when_run=True)


def parent(latest: OperationNode | None) -> int | None:
    """Where the next operation hangs: the child of the latest, or its sibling when the latest was bad (the first
    under the virtual root)."""
    if latest is None:
        return None
    return latest.parent_id if latest.bad_action else latest.id


def by_model(node: OperationNode) -> bool:
    """Whether a model gave the operation's verdict (in a later reply), so that the conversation shows it."""
    return node.bad_action is not None and not node.judged_when_run


def instruction(templates: Templates, node: OperationNode | None) -> str:
    """What the model is asked after an operation's verdict: the next step after a good one (or none), an
    alternative in its place after a bad one."""
    bad = node is not None and bool(node.bad_action)
    return render(templates, "alternative_action" if bad else "next_step", node=node)


def asked(templates: Templates, node: OperationNode, instruction_after_verdict: str) -> str:
    """What follows an operation's outcome: its verdict asked for, or, judged as it ran, the next action at once."""
    return (
        instruction(templates, node)
        if node.judged_when_run
        else render(templates, instruction_after_verdict, node=node)
    )


def said(templates: Templates, node: OperationNode, following: OperationNode | None = None) -> str:
    """The verdict on `node` as the model gave it; opening the reply of the `following` operation whose reasoning
    begins with the summary, without it (as that reply had it)."""
    brief = following is not None and node.summary == first_sentence(following.thought)
    return render(templates, "reflection", reflection=node, brief=brief)
