from __future__ import annotations

from pathlib import Path

import pytest
from agent_script import FIX_SCRIPT, cart_run, single_call, tool_script
from openai_server import OpenAIServer, Reply

from llm_ide.run.trajectory import load_trajectory


def run_against(
    tmp_path: Path, model: str, base_url: str, cache_hints: bool = True, action_format: str = "auto"
) -> dict:
    client = {"timeout": 10, "cache_hints": cache_hints, "action_format": action_format}
    result = cart_run(tmp_path, model, base_url, model=client)
    assert result.exit_status == "submitted", result.error
    return load_trajectory(result.trajectory_path)


@pytest.mark.parametrize(("cache_hints", "keys"), [(True, 1), (False, 0)])
def test_openai_requests_of_a_run_share_one_prompt_cache_key(tmp_path: Path, cache_hints: bool, keys: int) -> None:
    with OpenAIServer(replies=single_call(FIX_SCRIPT)) as server:
        run_against(tmp_path, "gpt-4o", server.url, cache_hints)
    bodies = [request.body for request in server.requests]
    assert len(bodies) == len(single_call(FIX_SCRIPT)) == 5  # one call per step
    found = {body.get("prompt_cache_key") for body in bodies} - {None}
    assert len(found) == keys and all(key.startswith("llm-ide-") for key in found)


TOOL_REPLIES = [Reply(text, tool_calls=((name, args),)) for text, name, args in tool_script(FIX_SCRIPT)]


@pytest.mark.parametrize(("action_format", "replies"), [("text", single_call(FIX_SCRIPT)), ("tools", TOOL_REPLIES)])
def test_anthropic_requests_carry_cache_breakpoints(
    action_format: str, replies: list, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In either action format (tools: the actions' results are `tool_result` blocks of the user turns)."""
    pytest.importorskip("langchain_anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "test-key-not-secret")
    with OpenAIServer(replies=replies) as server:
        run_against(tmp_path, "anthropic:claude-haiku-4-5", server.url.removesuffix("/v1"), action_format=action_format)
    assert len(server.requests) == 5
    for request in server.requests:
        body = request.body
        assert request.path.endswith("/v1/messages")
        system = body["system"]
        assert isinstance(system, list) and system[-1]["cache_control"] == {"type": "ephemeral"}
        blocks = [
            block
            for message in body["messages"]
            if isinstance(message["content"], list)
            for block in message["content"]
        ]
        marked = [block for block in blocks if block.get("cache_control")]
        assert 1 <= len(marked) <= 2  # the snapshot message and the last one (one message when they are the same)
        last = body["messages"][-1]["content"]
        assert isinstance(last, list) and last[-1]["cache_control"] == {"type": "ephemeral"}
        assert "## Code Context (as of operation" in body["messages"][0]["content"][0]["text"]
        assert ("tools" in body) == (action_format == "tools")
