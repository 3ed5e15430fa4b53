from __future__ import annotations

import pytest

from llm_ide import verdict
from llm_ide.actions import CORE_GRAMMAR
from llm_ide.calls import ModelReply
from llm_ide.errors import FormatError
from llm_ide.exchange import TEXT, Exchange, Offer
from llm_ide.parsing import body_text, parse_action


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
            "Bare.\n<bash>\ngrep -n 'a < b' x.py 2>&1 | head\n</bash>",
            "Bare.",
            "bash",
            {"command": "grep -n 'a < b' x.py 2>&1 | head"},
        ),
        (
            "Heredoc.\n<bash>cat <<'EOF' > t.py\nprint(\"{}\")\nEOF</bash>",
            "Heredoc.",
            "bash",
            {"command": "cat <<'EOF' > t.py\nprint(\"{}\")\nEOF"},
        ),
        ("A group.\n<bash>{ ls; pwd; }</bash>", "A group.", "bash", {"command": "{ ls; pwd; }"}),
        ("I'd use <bash> for it.\n<bash>ls</bash>", "I'd use <bash> for it.", "bash", {"command": "ls"}),
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
        ('Cut.\n<view>{"path": "sh', r"\(Unterminated string starting at: line 1 column 10 \(char 9\)\)"),
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
    found = verdict.parse(text)
    assert (found.bad, found.summary, found.lessons) == (bad, summary, lessons)


def test_a_single_call_reply_splits_into_its_verdict_and_its_action() -> None:
    said, action = verdict.split('bad: wrong file\nlesson: check paths\nLook at b.py.\n<view>{"path": "b.py"}</view>')
    assert verdict.parse(said).lessons == "check paths"
    assert parse_action(action, CORE_GRAMMAR).thought == "Look at b.py."


@pytest.mark.parametrize(
    ("action_type", "params", "body"),
    [
        ("bash", {"command": "ls -la | head"}, "ls -la | head"),
        ("bash", {"command": "cat <<'EOF' > a.py\nx = 1\nEOF"}, "cat <<'EOF' > a.py\nx = 1\nEOF"),
        ("bash", {"command": "echo '</bash>'"}, '{"command": "echo \'\\u003c/bash>\'"}'),
        ("bash", {"command": '{"a": 1}'}, '{"command": "{\\"a\\": 1}"}'),
        ("bash", {"command": " ls "}, '{"command": " ls "}'),
        ("bash", {"command": "```\nls\n```"}, '{"command": "```\\nls\\n```"}'),
        ("view", {"path": "a.py"}, '{"path": "a.py"}'),
    ],
)
def test_a_bash_command_is_written_bare_unless_it_would_not_read_back(
    action_type: str, params: dict, body: str
) -> None:
    assert body_text(action_type, params) == body
    action = parse_action(f"Thought.\n<{action_type}>{body}</{action_type}>", CORE_GRAMMAR)
    assert (action.action_type, action.action_params) == (action_type, params)


@pytest.mark.parametrize(
    ("reply", "bad", "summary", "lessons", "thought"),
    [
        (
            "good\nThe test fails at line 3. So the loop is wrong.\n<bash>pytest -x</bash>",
            False,
            "The test fails at line 3.",
            "",
            "The test fails at line 3. So the loop is wrong.",
        ),
        (
            'bad\nlesson: run the tests first\nNothing matched.\n\nTry the class.\n<search>{"pattern": "A"}</search>',
            True,
            "Nothing matched.",
            "run the tests first",
            "Nothing matched.\n\nTry the class.",
        ),
        ("good: it compiles\nNow run it.\n<bash>python a.py</bash>", False, "it compiles", "", "Now run it."),
    ],
)
def test_a_single_call_verdict_takes_its_summary_from_the_reasoning(
    reply: str, bad: bool, summary: str, lessons: str, thought: str
) -> None:
    reading = Exchange(one_call=True, form=TEXT).read_verdict(
        ModelReply(reply, 0, 0, 0.0), Offer(CORE_GRAMMAR, None, "")
    )
    assert reading.verdict is not None and reading.action is not None
    assert (reading.verdict.bad, reading.verdict.summary, reading.verdict.lessons) == (bad, summary, lessons)
    assert reading.action.thought == thought
