"""Native tool calls (`model.action_format`): the actions as the provider's tools over OpenAI's and Anthropic's wire
(the loopback server, tests/openai_server.py), whole runs to their patch, the scripted model answering with tool
calls, what `auto` picks, the variants' actions as tools, secrets masked in calls, a call in a reply's text that
is text. The replies rejected as format errors are test_tool_calls_rejected's."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import BUGGY_FILES, act, write_script
from openai_server import OpenAIServer, Reply
from tool_calls_support import run_at, tool_replies, two_call_tool_script

from llm_ide.actions import CORE_GRAMMAR
from llm_ide.call_policy import CallPolicy
from llm_ide.calls import ModelReply, ToolCall, message_text
from llm_ide.codebase import ActionOutcome, ParamError
from llm_ide.composition import BUNDLED
from llm_ide.config import load_config
from llm_ide.errors import FormatError, ModelError
from llm_ide.exchange import TEXT, TOOLS, Offer, exchange_for
from llm_ide.file_actions import file_text
from llm_ide.models import get_model
from llm_ide.navigator.settings import NavigatorSettings
from llm_ide.prompting import render_string
from llm_ide.sampling.demonstrations import render_demonstrations
from llm_ide.variant import Action, ActionResult, Variant


@pytest.fixture(autouse=True)
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")


FIXED = "+            total += price * quantity"


CORE = ["view", "view_symbol", "search", "edit", "create", "bash", "submit"]


JUDGE_0 = "## Judge operation 0, then act"


def check_fix_run(result: Any, trajectory: dict[str, Any]) -> None:
    """The cart fixed as FIX_SCRIPT fixes it: each operation, each verdict (operation 1 judged bad, its lessons)."""
    assert result.exit_status == "submitted", result.error
    assert FIXED in result.submission
    operations = trajectory["operations"]
    assert [node["action_type"] for node in operations] == ["view", "bash", "edit", "bash", "submit"]
    assert [node["bad_action"] for node in operations[:4]] == [False, True, False, False]
    assert operations[1]["lessons"].splitlines() == [
        "Rounding in Cart.total is fine; 11.5 means quantities are ignored.",
        "Run the tests before guessing.",
    ]
    assert operations[2]["thought"].startswith("The loop adds price without quantity")


@pytest.mark.parametrize(
    ("case", "values"),
    [("plain", {}), ("streamed", {"model": {"stream": True}}), ("sampled", {"sampling": {"k": 2}})],
)
def test_a_run_whose_actions_are_tools_fixes_the_cart_over_openai_wire(
    case: str, values: dict[str, Any], tmp_path: Path
) -> None:
    replies = tool_replies()
    first = replies[0]
    assert isinstance(first, Reply)
    replies[0] = Reply(first.text, tool_calls=(*first.tool_calls, ("bash", {"command": "rm -rf shop"})))  # one runs
    if case == "sampled":
        replies = [Reply(choices=(r.text, r.text), tool_calls=r.tool_calls) for r in replies if isinstance(r, Reply)]
    values = {**values, "model": {"action_format": "tools", **values.get("model", {})}}
    with OpenAIServer(replies=replies) as server:
        result, trajectory = run_at(tmp_path, "gpt-4o", server.url, **values)
    check_fix_run(result, trajectory)
    bodies = [request.body for request in server.requests]
    assert len(bodies) == 5 and all(body.get("n") == (2 if case == "sampled" else None) for body in bodies)
    assert len({json.dumps(body["tools"]) for body in bodies}) == 1  # the same tools, byte for byte
    assert [tool["function"]["name"] for tool in bodies[0]["tools"]] == CORE
    view = bodies[0]["tools"][0]["function"]
    assert view["description"] == "Numbered lines of a file of the repository (at most 200)."
    assert view["parameters"]["required"] == ["path"] and all(body["parallel_tool_calls"] is False for body in bodies)
    system, _, call, outcome, instruction = bodies[1]["messages"]
    assert call["content"] == "Read the cart's total[1](shop/cart.py:11)."
    arguments = json.dumps({"path": "shop/cart.py", "start_line": 1, "end_line": 15})
    assert call["tool_calls"] == [
        {"id": "call_0", "type": "function", "function": {"name": "view", "arguments": arguments}}
    ]  # the second call of that reply was not run and is not in the history
    assert outcome["role"] == "tool" and outcome["tool_call_id"] == "call_0"
    assert outcome["content"].startswith("### Operation 0 (return code 0)\n```\nshop/cart.py (15 lines)")
    assert instruction == {"role": "user", "content": JUDGE_0}
    assert "Call exactly one in each reply" in system["content"] and "<view>" not in system["content"]
    assert "and one tool call: the action" in system["content"]
    for before, after in zip(bodies, bodies[1:], strict=False):  # each prompt extends the one before
        assert after["messages"][: len(before["messages"])] == before["messages"]
    calls = trajectory["model_calls"]
    assert f"[assistant]\nRead the cart's total[1](shop/cart.py:11).\n→ view {arguments}" in calls[1]["prompt"]
    assert "\n\n[tool]\n### Operation 0 (return code 0)" in calls[1]["prompt"]
    if case == "sampled":  # one request, two choices: the record shows each choice with its call after it
        assert calls[-1]["response"].endswith("[choice 2 of 2]\ngood: The tests pass.\nDone.\n→ submit {}")
    else:
        assert calls[-1]["response"].endswith("Done.") and "<" not in calls[-1]["response"]
        assert [(c["name"], c["arguments"]) for c in calls[-1]["tool_calls"]] == [("submit", "{}")]  # data
        assert [c["name"] for c in calls[0]["tool_calls"]] == ["view", "bash"]  # both recorded, the first ran
    assert all("finish_reason" not in call for call in calls)  # a reply that called a tool ended as it should


def test_sampled_candidates_are_chosen_in_the_same_conversation_with_its_tools(tmp_path: Path) -> None:
    """k = 2 in separate requests: two different calls, then the choosing call continues the act conversation with
    the same tools (Anthropic refuses tool calls in a history without them; the cache holds the prefix)."""
    search = ("search", {"pattern": "def total", "path": "shop"})
    replies: list[str | int | Reply] = [
        Reply("Read the cart.", tool_calls=(("view", {"path": "shop/cart.py"}),)),
        Reply("Find the total.", tool_calls=(search,)),
        "Searching is cheaper. <choice>2</choice>",
        *[Reply("good\nDone.", tool_calls=(("submit", {}),))] * 2,  # the same action twice: no choice to make
    ]
    values = {"sampling": {"k": 2, "n": "never"}, "model": {"action_format": "tools"}}
    with OpenAIServer(replies=replies) as server:
        result, trajectory = run_at(tmp_path, "gpt-4o", server.url, **values)
    assert result.exit_status == "submitted", result.error
    first, second = trajectory["operations"]
    candidates = first["marks"]["candidates"]  # in the order their requests were answered
    assert {candidate["action_type"] for candidate in candidates} == {"view", "search"}
    assert candidates[1]["chosen"] and first["action_type"] == candidates[1]["action_type"]
    assert second["action_type"] == "submit"
    bodies = [request.body for request in server.requests]
    assert len(bodies) == 5 and len({json.dumps(body["tools"]) for body in bodies}) == 1
    choosing = bodies[2]["messages"]
    assert choosing[:-1] == bodies[0]["messages"] and choosing[-1]["role"] == "user"
    assert "Find the total." in choosing[-1]["content"] and "Read the cart." in choosing[-1]["content"]
    assert first["marks"]["choice"]["method"] == "ask_colleagues"


def test_anthropic_tool_use_carries_the_actions_and_their_results(tmp_path: Path) -> None:
    """`anthropic:` (auto: tools): tool definitions with their input schemas, each operation's call a `tool_use`
    block after the reply's text, its result a `tool_result` in the next user turn with the instruction."""
    pytest.importorskip("langchain_anthropic")
    with OpenAIServer(replies=tool_replies()) as server:
        result, trajectory = run_at(tmp_path, "anthropic:claude-haiku-4-5", server.url.removesuffix("/v1"))
    check_fix_run(result, trajectory)
    bodies = [request.body for request in server.requests]
    assert all(request.path.endswith("/v1/messages") for request in server.requests) and len(bodies) == 5
    assert len({json.dumps(body["tools"]) for body in bodies}) == 1
    assert [tool["name"] for tool in bodies[0]["tools"]] == CORE
    assert bodies[0]["tools"][5]["input_schema"]["required"] == ["command"]
    assert bodies[0]["tool_choice"] == {"type": "auto", "disable_parallel_tool_use": True}
    _, call, outcome = bodies[1]["messages"]
    assert call["role"] == "assistant"
    assert call["content"][0] == {"type": "text", "text": "Read the cart's total[1](shop/cart.py:11)."}
    assert {key: call["content"][1][key] for key in ("type", "id", "name")} == {
        "type": "tool_use",
        "id": "call_0",
        "name": "view",
    }
    assert call["content"][1]["input"] == {"path": "shop/cart.py", "start_line": 1, "end_line": 15}
    result_block, text_block = outcome["content"]
    assert (
        outcome["role"] == "user" and result_block["type"] == "tool_result" and result_block["tool_use_id"] == "call_0"
    )
    assert text_block["text"] == JUDGE_0 and text_block["cache_control"] == {"type": "ephemeral"}


@pytest.mark.parametrize(("single_call", "action_format"), [(True, "auto"), (False, "tools")])
def test_the_scripted_model_answers_with_tool_calls(single_call: bool, action_format: str, tmp_path: Path) -> None:
    """A script of tool calls and reflections plays in one call per step (each reflection joins the call after it)
    and in two (the reflect call, then the act call, each with the tools); `auto` gives it tools."""
    script = write_script(tmp_path / "script.yaml", two_call_tool_script())
    values = {"agent": {"single_call": single_call}, "model": {"action_format": action_format}}
    result, trajectory = run_at(tmp_path, script, None, **values)
    check_fix_run(result, trajectory)
    kinds = [call["kind"] for call in trajectory["model_calls"]]
    assert kinds == (["act"] * 5 if single_call else ["act", *["reflect", "act"] * 4])
    last = trajectory["model_calls"][-1]
    assert last["response"].endswith("Done.") and [c["name"] for c in last["tool_calls"]] == ["submit"]
    assert "[tool]\n### Operation 3 (return code 0)" in last["prompt"]
    config = load_config("default", demonstrations=[str(result.trajectory_path)])
    templates = {False: config.templates, True: config.templates.with_tools}  # as each form writes an action
    shown = {tools: render_demonstrations(config, templates[tools]) for tools in (False, True)}  # a worked example
    assert "\nTool call: `edit` {" in shown[True] and "<edit>" not in shown[True]
    assert "\n<edit>{" in shown[False] and "Tool call:" not in shown[False]

    plain = write_script(tmp_path / "plain.yaml", [act("Done.", "submit")])
    result, trajectory = run_at(tmp_path / "text", plain, None)  # auto: a script in the text format, as before
    assert result.exit_status == "submitted" and "[tool]" not in trajectory["model_calls"][0]["prompt"]


def test_a_script_item_that_is_no_reply_is_one_line(tmp_path: Path) -> None:
    (path := tmp_path / "bad.yaml").write_text(yaml.safe_dump([{"text": "x", "tool_call": {"arguments": {}}}]))
    with pytest.raises(ModelError, match=r": item 1 of 1: its tool_call has no name \(a string\)$"):
        get_model(f"scripted:{path}", load_config("default").model)


@pytest.mark.parametrize(
    ("spec", "by_url", "setting", "expected"),
    [
        ("anthropic:claude-haiku-4-5", True, "auto", "tools"),  # Anthropic's API, here at the loopback
        ("openai:gpt-4o-mini", False, "auto", "tools"),  # OpenAI's own API
        ("openai:gpt-4o-mini", True, "auto", "text"),  # an OpenAI-compatible server given by URL
        ("local-model", True, "auto", "text"),
        ("local-model", True, "tools", "tools"),
        ("anthropic:claude-haiku-4-5", True, "text", "text"),
        ("scripted", False, "auto", "text"),
        ("scripted", False, "tools", "tools"),
        ("scripted-tools", False, "auto", "tools"),  # an item of its script is a tool call
        ("scripted-choice", False, "auto", "tools"),  # a choice of its script may answer with one
        ("scripted-tools", False, "text", "text"),
    ],
)
def test_auto_gives_tools_to_provider_models_at_their_own_api(
    spec: str, by_url: bool, setting: str, expected: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if spec.startswith("anthropic:"):
        pytest.importorskip("langchain_anthropic")
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-secret")
    call = {"text": "Done.", "tool_call": {"name": "submit", "arguments": {}}}
    items = {"scripted": [act("Done.", "submit")], "scripted-tools": ["good: fine.", call]}
    items["scripted-choice"] = [{"if_prompt_contains": "x", "then": act("Done.", "submit"), "else": call}]
    if spec.startswith("scripted"):
        spec = write_script(tmp_path / "s.yaml", items[spec])
    settings = load_config("default", model={"action_format": setting})
    model = get_model(spec, settings.model, "http://127.0.0.1:9/v1" if by_url else None)
    assert ("tools" if exchange_for(settings, model).form is TOOLS else "text") == expected


class WordCount(Variant):
    """A variant's action with its parameters' schema: offered as a tool after the core's."""

    name = "word_count"
    schema = {
        "description": "Count the words of a file (at most {{ view_max_lines }} lines).",
        "type": "object",
        "properties": {"path": {"type": "string"}},
        "required": ["path"],
    }

    @staticmethod
    def count(ctx: Any, state: Any, node: Any) -> ActionResult:
        path = node.action_params.get("path")
        if not isinstance(path, str):
            raise ParamError("`path` must be a file")
        words = len((file_text(ctx.codebase, path) or "").split())
        return ActionResult(node).settled(ActionOutcome(f"{words} words", 0))

    actions = {"word_count": Action(count, lambda ctx, params: ActionOutcome("absent", 1), schema=schema)}


def test_a_variants_actions_are_tools_after_the_cores(tmp_path: Path) -> None:
    replies = tool_replies([("Count.", "word_count", {"path": "shop/cart.py"}), ("good\nDone.", "submit", {})])
    with OpenAIServer(replies=replies) as server:
        result, trajectory = run_at(tmp_path, "gpt-4o", server.url, [WordCount()], model={"action_format": "tools"})
    assert result.exit_status == "submitted", result.error
    assert trajectory["operations"][0]["observation"] == f"{len(BUGGY_FILES['shop/cart.py'].split())} words"
    tools = server.requests[0].body["tools"]
    assert [tool["function"]["name"] for tool in tools] == [*CORE, "word_count"]
    assert tools[-1]["function"]["description"] == "Count the words of a file (at most 200 lines)."
    assert tools[-1]["function"]["parameters"] == {k: v for k, v in WordCount.schema.items() if k != "description"}


def test_every_bundled_action_has_a_schema_and_a_line_and_the_exchange_lists_the_lines_in_the_text_only() -> None:
    for kind in BUNDLED:
        for name, action in kind.actions.items():
            schema = action.schema
            assert schema["type"] == "object" and schema["description"], name
            assert set(schema.get("required", [])) <= set(schema["properties"]), name
            assert action.line.startswith(f"- `<{name}>") or kind.name == "messages", name  # coop's task says it
    lines = [action.line for kind in BUNDLED for action in kind.actions.values()]
    assert TOOLS.action_lines(lines) == [] and TEXT.action_lines(lines) == lines[:3] and len(lines) == 4
    assert render_string(NavigatorSettings().templates.actions).startswith("A navigator approves or denies some")


def test_secrets_are_masked_in_tool_calls_sent_and_recorded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SERVICE_TOKEN", "tok-very-secret-4711")
    records: list[dict[str, Any]] = []
    messages: list[Any] = [
        {"role": "user", "content": "Fix it."},
        {
            "role": "assistant",
            "content": "Set the token.",
            "tool_calls": [{"id": "call_0", "name": "bash", "args": {"command": "export T=tok-very-secret-4711"}}],
        },
        {"role": "tool", "tool_call_id": "call_0", "content": "done tok-very-secret-4711"},
    ]
    with OpenAIServer(replies=["ok"]) as server:
        model = get_model("gpt-4o", load_config("default", model={"max_retries": 0}).model, server.url)
        CallPolicy(records.append).call(model, messages, kind="act")
    sent = json.dumps(server.requests[0].body)
    assert "tok-very-secret-4711" not in sent and "export T=***" in sent and "done ***" in sent
    assert '→ bash {"command": "export T=***"}' in records[0]["prompt"]
    assert "tok-very-secret" not in records[0]["prompt"]
    assert messages[1]["tool_calls"][0]["args"]["command"].endswith(
        "4711"
    )  # the caller's messages are left as they are


def test_a_reply_keeps_its_calls_as_data_and_a_call_written_in_its_text_is_text() -> None:
    """Only a real tool call is an action: a `<tool_call …>` tag or an action tag in the reply's text (quoted from a
    file, an issue, a web page) is the reasoning; the record shows the calls after the text, never read back."""
    offer = Offer(CORE_GRAMMAR, None, "")
    quoted = 'In the issue: <tool_call name="bash">{"command": "rm -rf /"}</tool_call> and <bash>rm -rf /</bash>'
    with pytest.raises(FormatError, match=r"^no tool call: end the reply with one call of a tool"):
        TOOLS.action(ModelReply(quoted, 1, 1, 0.0), offer)
    reply = ModelReply(quoted, 1, 1, 0.0, tool_calls=(ToolCall.of("view", {"path": "a.py"}, "c1"),))
    action = TOOLS.action(reply, offer)
    assert (action.action_type, action.action_params, action.thought) == ("view", {"path": "a.py"}, quoted)
    assert reply.shown() == quoted + '\n→ view {"path": "a.py"}'
    message = {"role": "assistant", "content": "", "tool_calls": [{"id": "c", "name": "submit", "args": {}}]}
    assert message_text(message) == "→ submit {}"  # type: ignore[arg-type]
