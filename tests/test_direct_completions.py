"""A plain ChatOpenAI's whole replies asked straight over its httpx client (llm_ide.chat_wire.Completions) against
the same request through LangChain and the OpenAI SDK, on the loopback server (tests/openai_server.py): the same
request on the wire (path, body and its key order, the SDK's headers), the same reply read, the same errors raised."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest
from openai_server import OpenAIServer, Reply

from llm_ide.chat_wire import Completions, calls_of
from llm_ide.config import load_config
from llm_ide.endpoint import classify, last_completion, retry_after
from llm_ide.models import ChatModel, get_model

MESSAGES = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Fix the bug in ünïcode."}]
TOOLS = [{"type": "function", "function": {"name": "view", "parameters": {"type": "object", "properties": {}}}}]
SDK_HEADERS = ("authorization", "content-type", "accept", "user-agent", "x-stainless-lang", "x-stainless-os")


@pytest.fixture(autouse=True)
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE", "LANGSMITH_TRACING"):
        monkeypatch.delenv(name, raising=False)


def model_of(url: str, **values: Any) -> ChatModel:
    model = get_model("gpt-test", load_config(model={"max_retries": 0, **values}).model, base_url=url)
    assert isinstance(model, ChatModel)
    return model


def both_ways(model: ChatModel, hints: dict[str, Any]) -> list[Any]:
    """The reply asked directly, then through LangChain (each after the thread's last completion is forgotten)."""
    assert model.direct is not None
    last_completion()
    direct = model.direct.invoke(MESSAGES, hints)
    last_completion()
    return [direct, model.chat.invoke(MESSAGES, **hints)]


@pytest.mark.parametrize(
    ("values", "tools", "reply"),
    [
        ({}, False, Reply("I will read the file.", input_tokens=21, output_tokens=5)),
        ({"temperature": 0.2, "max_tokens": 77}, False, Reply("Cut here", finish_reason="length")),
        ({"kwargs": {"extra_body": {"top_k": 3}}}, True, Reply("Looking.", tool_calls=(("view", {"path": "a.py"}),))),
        ({}, True, Reply("Broken call.", tool_calls=(("view", "{not json"),))),
        ({}, False, Reply("Cached.", input_tokens=30, output_tokens=2, cached_tokens=20)),
    ],
)
def test_the_direct_request_and_reply_are_langchains(values: dict[str, Any], tools: bool, reply: Reply) -> None:
    with OpenAIServer(replies=[reply]) as server:
        model = model_of(server.url, **values)
        _, hints = model._payload(MESSAGES, TOOLS if tools else None)
        replies = direct, through_langchain = both_ways(model, hints)
        first, second = server.requests
    assert (first.path, json.dumps(first.body)) == (second.path, json.dumps(second.body))
    assert {k: first.headers.get(k) for k in SDK_HEADERS} == {k: second.headers.get(k) for k in SDK_HEADERS}
    assert first.body["messages"][1]["content"] == "Fix the bug in ünïcode."
    assert direct.text == through_langchain.text
    calls = [[(c.name, c.arguments, c.id.replace(f"_{n}_", "_")) for c in calls_of(m)] for n, m in enumerate(replies)]
    assert calls[0] == calls[1]
    assert direct.usage_metadata == through_langchain.usage_metadata
    metadata = ("finish_reason", "model_name", "model_provider")  # what is read (the SDK adds fields set to None)
    assert {k: direct.response_metadata.get(k) for k in metadata} == {
        k: through_langchain.response_metadata.get(k) for k in metadata
    }


@pytest.mark.parametrize(
    "reply",
    [
        401,
        404,
        Reply(status=429, headers=(("Retry-After", "7"),)),
        500,
        400,
        "invalid_json",
        Reply(body={"error": {"message": "overloaded"}}),
        Reply(body={"choices": []}),
    ],
)
def test_the_direct_errors_are_langchains(reply: int | str | Reply) -> None:
    with OpenAIServer(replies=[reply]) as server:
        model = model_of(server.url)
        errors = []
        for ask in (lambda: model.direct and model.direct.invoke(MESSAGES, {}), lambda: model.chat.invoke(MESSAGES)):
            last_completion()
            with pytest.raises(Exception) as raised:
                ask()
            errors.append(raised.value)
    direct, through_langchain = errors
    assert type(direct) is type(through_langchain)
    assert classify(direct) == classify(through_langchain) is not None
    assert retry_after(direct) == retry_after(through_langchain)
    assert getattr(direct, "status_code", None) == getattr(through_langchain, "status_code", None)


def test_streams_traced_runs_and_other_models_keep_langchain(monkeypatch: pytest.MonkeyPatch) -> None:
    with OpenAIServer(replies=["Fine."]) as server:
        assert model_of(server.url).direct is not None
        assert model_of(server.url, kwargs={"use_responses_api": True}).direct is None
        monkeypatch.setenv("LANGSMITH_TRACING", "true")
        assert model_of(server.url).direct is None
        monkeypatch.delenv("LANGSMITH_TRACING")
        streamed = model_of(server.url, stream=True)
        assert streamed.complete(MESSAGES).text == "Fine."
        assert server.requests[-1].body["stream"] is True
        whole = model_of(server.url, stream=False)
        assert whole.complete(MESSAGES).text == "Fine."
        assert server.requests[-1].body["stream"] is False
    assert Completions.of(object()) is None


CALL = {"id": "call_1", "name": "view", "args": {"path": "a.py", "lines": [1, 2.5], "ünï": None}}
TURNS = [
    {"role": "assistant", "content": "", "tool_calls": [CALL]},
    {"role": "tool", "content": "1 import os\n2 \u2028 </tag>", "tool_call_id": "call_1"},
    {"role": "user", "content": "Fix the bug in ünïcode."},  # the same value as an earlier message: sent again
    {"role": "assistant", "content": "Reading.", "tool_calls": [{**CALL, "args": {"lines": [1, 2.5], "path": "a.py"}}]},
    {"role": "tool", "content": "done", "tool_call_id": "call_1"},
]


@pytest.mark.parametrize("name", ["gpt-test", "o3-test"])  # an o-series model: its system message is the developer's
def test_prompts_sharing_messages_are_sent_as_langchain_sends_each(name: str) -> None:
    """Each message's wire form is made once and kept (`Completions.sent`): prompts growing by turns, some messages
    repeated or changed (the same call's arguments in another order), are each the request LangChain makes."""
    prompts = [MESSAGES, MESSAGES + TURNS[:2], MESSAGES + TURNS, [MESSAGES[0], TURNS[1], MESSAGES[1]], MESSAGES]
    with OpenAIServer(replies=["Fine."] * 2 * len(prompts)) as server:
        model = get_model(name, load_config(model={"max_retries": 0}).model, base_url=server.url)
        assert isinstance(model, ChatModel) and model.direct is not None
        for prompt in prompts:
            payload, hints = model._payload(prompt, None)
            model.direct.invoke(payload, hints)
            model.chat.invoke(payload, **hints)
        bodies = [json.dumps(request.body) for request in server.requests]
    assert bodies[0::2] == bodies[1::2]
    assert [len(json.loads(body)["messages"]) for body in bodies[0::2]] == [2, 4, 7, 3, 2]
    assert json.loads(bodies[0])["messages"][0]["role"] == ("developer" if name.startswith("o") else "system")
    assert len(model.direct.sent) == 6  # the distinct messages: the two calls' arguments in two orders are two


def test_requests_made_at_the_same_time_each_send_their_own_prompt() -> None:
    """Threads asking at once (`n` requests of a step) through one `Completions`, its kept messages replaced as they
    grow: each request's messages are LangChain's for its own prompt."""
    from langchain_core.messages import convert_to_messages

    prompts = [MESSAGES + TURNS[: n % 6] + [{"role": "user", "content": f"prompt {n}"}] for n in range(48)]
    with OpenAIServer(replies=["Fine."] * len(prompts)) as server:
        model = model_of(server.url)
        assert model.direct is not None
        threads = [
            threading.Thread(target=lambda part=part: [model.direct.invoke(p, {}) for p in part])  # type: ignore[union-attr]
            for part in (prompts[0::3], prompts[1::3], prompts[2::3])
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        sent = {request.body["messages"][-1]["content"]: request.body["messages"] for request in server.requests}
        expected = {
            prompt[-1]["content"]: model.chat._get_request_payload(convert_to_messages(prompt))["messages"]
            for prompt in prompts
        }
    assert {key: json.dumps(value) for key, value in sent.items()} == {
        key: json.dumps(value) for key, value in expected.items()
    }
