"""No reply ends a run in `error`: any tool-call arguments (nested, huge, of the wrong types, numbers of any size,
invalid patterns, no JSON at all) are read into an action or refused as a format error the model is told about, and
an action read from them runs into an observation; only a real tool call is an action. A property test (hypothesis)
feeds every action's schema, the core's and the bundled variants', with generated arguments; whole runs over
OpenAI's wire take the worst cases and go on to their patch."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import FIX_SCRIPT, cart_run, tool_script
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from openai_server import OpenAIServer, Reply

from llm_ide.actions import ACTIONS, CORE_GRAMMAR, execute_action
from llm_ide.calls import ModelReply, ToolCall
from llm_ide.codebase import Codebase
from llm_ide.composition import BUNDLED, compose
from llm_ide.config import load_config
from llm_ide.environments import LocalEnvironment
from llm_ide.errors import FormatError
from llm_ide.exchange import TEXT, TOOLS, Exchange, Offer
from llm_ide.prompting import render
from llm_ide.run.trajectory import load_trajectory

SETTINGS = load_config("default", environment={"tools": [], "sandbox": "none"})
SCHEMAS = {**SETTINGS.templates.tools, **{n: a.schema for kind in BUNDLED for n, a in kind.actions.items()}}  # all
VARIANT_ACTIONS = {name: action for kind in BUNDLED for name, action in kind.actions.items()}
GRAMMAR = CORE_GRAMMAR.with_actions(VARIANT_ACTIONS, [name for name, a in VARIANT_ACTIONS.items() if a.bare])
FIXED_PATCH = "+            total += price * quantity"
TOOL_LIST = TOOLS.tools(SCHEMAS, {"view_max_lines": 200, "search_max_results": 100, "command_timeout": 5})
OFFER = Offer(GRAMMAR, TOOL_LIST, "<file> <command> <exact text>")
EXCHANGE = Exchange(one_call=False, form=TOOLS)

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**200), max_value=2**200),
    st.floats(allow_nan=False),
    st.text(max_size=40),
    st.sampled_from(["x/[z-a]*.py", "**/[!", "1" * 5000, "(", "../../etc/passwd", "<file>", "a.py", "\x00\udcff"]),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=12,
)


def deep(depth: int) -> str:
    return '{"path": ' + "[" * depth + "]" * depth + "}"


@st.composite
def arguments(draw: st.DrawFn, name: str) -> str:
    """A tool call's arguments as a model might write them for `name`: its schema's keys (some left out, some of
    other types) and others, as JSON, or text that is no JSON object at all."""
    keys = list((SCHEMAS[name].get("properties") or {}).keys())
    chosen = draw(st.lists(st.sampled_from(keys), unique=True)) if keys else []
    params = {key: draw(VALUES) for key in chosen} | draw(st.dictionaries(st.text(max_size=6), VALUES, max_size=2))
    shape = draw(st.sampled_from(["json", "json", "json", "deep", "text", "array"]))
    if shape == "deep":
        return deep(draw(st.integers(min_value=40, max_value=3000)))
    if shape == "text":
        return draw(st.text(max_size=60))
    if shape == "array":
        return json.dumps([params], default=str)
    return json.dumps(params, default=str, ensure_ascii=draw(st.booleans()))


@pytest.fixture(scope="session")
def codebase(tmp_path_factory: pytest.TempPathFactory) -> Any:
    repo = tmp_path_factory.mktemp("repo")
    (repo / "pkg").mkdir()
    (repo / "pkg" / "a.py").write_text("def f():\n    return 1\n")
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    env = LocalEnvironment(repo, sandbox="none")
    yield Codebase.for_settings(env, SETTINGS)
    env.close()


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_any_arguments_of_any_action_are_an_action_or_a_format_error(name: str, codebase: Any) -> None:
    """Whatever the arguments, reading them gives an action or a FormatError; a core action read from them (but
    `bash`: the commands are arbitrary) runs to an observation, never an exception."""

    @settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None, derandomize=True)
    @given(arguments(name))
    def check(raw: str) -> None:
        reply = ModelReply("Thinking.", 1, 1, 0.0, tool_calls=(ToolCall(name, raw, "c1"),))
        try:
            action = EXCHANGE.read_action(reply, OFFER).action
        except FormatError as error:
            assert str(error)
            return
        assert action is not None and action.action_type == name
        json.dumps(action.action_params)  # every store can hold it
        if name in ACTIONS and name != "bash":
            outcome = execute_action(codebase, name, action.action_params)
            assert isinstance(outcome.observation, str) and isinstance(outcome.returncode, int)

    check()


@pytest.mark.parametrize("path", ["1" * 5000, "pkg/" + "x" * 300 + ".py", "loop/a.py"])
@pytest.mark.parametrize(
    ("name", "extra"),
    [
        ("view", {}),
        ("view_symbol", {"symbol": "f"}),
        ("search", {"pattern": "f"}),
        ("edit", {"old_str": "a", "new_str": "b"}),
        ("create", {"content": "x = 1\n"}),
        ("bash", {}),
    ],
)
def test_a_path_no_file_can_have_is_an_observation(name: str, extra: dict[str, Any], path: str, codebase: Any) -> None:
    """A name too long for the file system, or a loop of links: the action says so (or finds nothing), the run goes
    on; a command whose output names such a path is observed as any other."""
    loop = Path(codebase.env.repo) / "loop"
    if not loop.is_symlink():
        loop.symlink_to("loop")
    params = {"command": f"echo {path}:1: def f"} if name == "bash" else {"path": path, **extra}
    outcome = execute_action(codebase, name, params)
    assert isinstance(outcome.observation, str) and outcome.observation
    assert (outcome.returncode == 0) == (name == "bash"), outcome.observation  # the file actions find no such file
    assert execute_action(codebase, "view", {"path": "pkg/a.py"}).returncode == 0  # and the next action works


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        (deep(900), "`view`: the action's parameters"),  # too deep to read back, or more than 50 levels
        (deep(5000), "nested more than 50 levels deep"),
        (json.dumps({"path": "shop/cart.py", "start_line": "1" * 5000}), "`start_line` must be an integer, got str"),
        (json.dumps({"path": "shop/cart.py", "start_line": 10**400}), "an integer out of range"),
        (json.dumps({"path": ["shop"]}), "`path` must be a string, got list"),
        (json.dumps({"start_line": 1}), "missing `path`"),
        ("[1, 2]", "must be a JSON object, got list"),
    ],
)
def test_a_tool_call_that_cannot_be_used_is_said_to_the_model_and_the_run_goes_on(
    arguments: str, said: str, tmp_path: Path
) -> None:
    """Over OpenAI's wire: the first reply's call cannot be used; the model is told why, and the run goes on to
    the fix."""
    bad = Reply("Read it.", tool_calls=(("view", arguments),))
    replies = [bad, *[Reply(text, tool_calls=((n, a),)) for text, n, a in tool_script(FIX_SCRIPT)]]
    with OpenAIServer(replies=replies) as server:
        result = cart_run(tmp_path, "gpt-4o", server.url, model={"action_format": "tools"})
    assert result.exit_status == "submitted", result.error
    told = server.requests[1].body["messages"][-1]
    assert told["role"] == "tool" and said in told["content"], told["content"][:300]
    assert FIXED_PATCH in result.submission


def test_an_invalid_glob_is_the_actions_to_say_and_the_run_goes_on(tmp_path: Path) -> None:
    """A search path the glob reader cannot compile (`x/[z-a]*.py`): the observation says so (a bad verdict to come)."""
    search = Reply("Find it.", tool_calls=(("search", {"pattern": "total", "path": "x/[z-a]*.py"}),))
    replies = [search, *[Reply(text, tool_calls=((n, a),)) for text, n, a in tool_script(FIX_SCRIPT)]]
    replies[1] = Reply("bad: the glob is invalid\n" + replies[1].text, tool_calls=replies[1].tool_calls)
    with OpenAIServer(replies=replies) as server:
        result = cart_run(tmp_path, "gpt-4o", server.url, model={"action_format": "tools"})
    assert result.exit_status == "submitted", result.error
    first = load_trajectory(result.trajectory_path)["operations"][0]
    assert first["returncode"] == 2 and "`path` is no valid glob (bad character range z-a" in first["observation"]


def test_a_format_error_lists_the_runs_own_actions_and_a_copied_placeholder_is_said() -> None:
    """Issue 40.7: the message names the actions of this run (not those of the variants it has not), whole; a reply
    that copies a placeholder of the action list is a format error saying so; the list has no placeholder a model
    could run as it is."""
    settings = load_config("default")
    prompt = render(settings.templates, "actions", view_max_lines=200, search_max_results=100, command_timeout=9,
                    more_actions="")  # fmt: skip
    assert "- `<bash><command></bash>`: run in the repository" in prompt and "shell command" not in prompt
    grammar = compose(settings).grammar  # no variant: theirs answer that they are absent
    assert "reproduce" in grammar.types and grammar.offered == tuple(ACTIONS)
    text = Exchange(one_call=False, form=TEXT)
    offer = Offer(grammar, None, prompt)
    cases = {
        "I think the loop is wrong.": "missing the action: a tag named after its type (view, view_symbol, search, "
        "edit, create, bash, submit) holding its JSON parameters",
        "Run it.\n<bash><command></bash>": "`command` is <command>, a placeholder of the action list: write the real "
        "value",
        'Read.\n<view>{"path": "a.py", "start_line": <int>}</view>': "it holds <int>, a placeholder of the action "
        "list: write the real value",
        'Read.\n<view>{"path": "<file>"}</view>': "`path` is <file>, a placeholder of the action list",
    }
    for reply, said in cases.items():
        with pytest.raises(FormatError) as raised:
            text.read_action(ModelReply(reply, 0, 0, 0.0), offer)
        assert said in str(raised.value), str(raised.value)
    assert text.read_action(ModelReply("Run it.\n<bash>ls <dir></bash>", 0, 0, 0.0), offer).action is not None
