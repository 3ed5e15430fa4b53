from __future__ import annotations

import pytest

from llm_ide.actions import CORE_GRAMMAR
from llm_ide.parsing import FormatError, parse_action, parse_reflection, split_reflection


@pytest.mark.parametrize(
    ("text", "thought", "action_type", "params"),
    [
        (
            'Read it[1](a.py:3).\n<view>{"path": "a.py", "start_line": 1, "end_line": 9}</view>',
            "Read it[1](a.py:3).",
            "view",
            {"path": "a.py", "start_line": 1, "end_line": 9},
        ),
        ("Done.\n<submit></submit>", "Done.", "submit", {}),
        ("Done.\n<Submit/>", "Done.", "submit", {}),
        (
            '<thought>Fenced.</thought>\n<bash>\n```json\n{"command": "ls"}\n```\n</bash>',
            "Fenced.",
            "bash",
            {"command": "ls"},
        ),
        (
            'Put a tag in.\n<edit>{"path": "t.html", "old": "<view>", "new": "<search></search>"}</edit>',
            "Put a tag in.",
            "edit",
            {"path": "t.html", "old": "<view>", "new": "<search></search>"},
        ),
        (
            'I could <view> it, but search first.\n<search>{"pattern": "x"}</search>',
            "I could <view> it, but search first.",
            "search",
            {"pattern": "x"},
        ),
        (
            "<thought>Old format.</thought>\n<action_type>view_symbol</action_type>\n"
            '<action_params>{"path": "a.py", "symbol": "f"}</action_params>',
            "Old format.",
            "view_symbol",
            {"path": "a.py", "symbol": "f"},
        ),
    ],
)
def test_actions_parse_in_the_terse_and_the_tagged_format(
    text: str, thought: str, action_type: str, params: dict
) -> None:
    action = parse_action(text, CORE_GRAMMAR)
    assert (action.thought, action.action_type, action.action_params) == (thought, action_type, params)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("I think I should look at the code.", "missing the action"),
        ('Look.\n<view>{"path": "a.py",</view>', "not valid JSON"),
        ("<thought>x</thought><action_type>dance</action_type>", "unknown action_type 'dance'"),
    ],
)
def test_unusable_actions_say_why(text: str, message: str) -> None:
    with pytest.raises(FormatError, match=message):
        parse_action(text, CORE_GRAMMAR)


@pytest.mark.parametrize(
    ("text", "bad", "summary", "lessons"),
    [
        ("good: it compiles.", False, "it compiles.", ""),
        (
            "**Bad** — the view missed the body\nlesson: use view_symbol\nLesson: check the path",
            True,
            "the view missed the body",
            "use view_symbol\ncheck the path",
        ),
        ("<bad_action>true</bad_action><summary>s</summary><lessons>l</lessons>", True, "s", "l"),
    ],
)
def test_reflections_parse_in_the_terse_and_the_tagged_format(text: str, bad: bool, summary: str, lessons: str) -> None:
    reflection = parse_reflection(text)
    assert (reflection.bad_action, reflection.summary, reflection.lessons) == (bad, summary, lessons)


def test_a_single_call_reply_splits_into_its_reflection_and_its_action() -> None:
    reflection, action = split_reflection(
        'bad: wrong file\nlesson: check paths\nLook at b.py.\n<view>{"path": "b.py"}</view>'
    )
    assert parse_reflection(reflection).lessons == "check paths"
    assert parse_action(action, CORE_GRAMMAR).thought == "Look at b.py."
