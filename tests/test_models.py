"""The model client: a provider's spec, the endpoint and key it sends to, retries and the failures that end them (a
key never in an error), the backoff, the scripted model; a reply's usage and cost are test_models_pricing's."""

from __future__ import annotations

import importlib.util
import logging
import random
import re
from pathlib import Path

import pytest
from models_support import MESSAGES, SECRET, fast_settings
from openai_server import OpenAIServer, Reply

from llm_ide.calls import estimate_tokens
from llm_ide.endpoint import listed_models
from llm_ide.keep import FolderKeep
from llm_ide.models import ModelAuthError, ModelError, ModelReply, ScriptedModel, backoff_delay, get_model
from llm_ide.settings import ModelSettings


@pytest.fixture
def config() -> ModelSettings:
    """The bundled `model:` section with delays and timeouts small enough for fast tests."""
    return fast_settings()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


def test_provider_spec_goes_through_init_chat_model(config: ModelSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    config = config.model_copy(update={"temperature": 0.25, "kwargs": {"seed": 7}})
    with OpenAIServer(replies=[Reply("done", input_tokens=2_000_000, output_tokens=1_000_000)]) as server:
        model = get_model("openai:gpt-4o-mini-2024-07-18", config, base_url=server.url)
        reply = model.complete(MESSAGES[:2])
    assert (reply.text, reply.input_tokens, reply.output_tokens) == ("done", 2_000_000, 1_000_000)
    assert reply.cost == pytest.approx(2 * 0.15 + 1 * 0.6)
    body = server.requests[0].body
    assert (body["model"], body["temperature"], body["seed"]) == ("gpt-4o-mini-2024-07-18", 0.25, 7)


def test_rate_limit_then_success_is_retried(config: ModelSettings, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="llm_ide.models")
    with OpenAIServer(replies=[429, Reply("after the wait", input_tokens=5, output_tokens=3)]) as server:
        reply = get_model("gpt-5-nano", config, base_url=server.url).complete(MESSAGES)
    assert reply == ModelReply("after the wait", 5, 3, pytest.approx(5 * 0.05e-6 + 3 * 0.4e-6), finish_reason="stop")
    assert server.hits == 2
    [retry] = [r.getMessage() for r in caplog.records if "retry" in r.getMessage()]
    assert "RateLimitError" in retry and "retry 1/2" in retry


@pytest.mark.parametrize(
    ("reply", "timeout", "expected"),
    [
        (500, 0.3, "OpenAIAPIError: Error code: 500 - test server error 500"),
        (503, 0.3, "OpenAIAPIError: Error code: 503 - test server error 503"),
        ("invalid_json", 0.3, "JSONDecodeError"),
        ("hang", 0.1, "no whole reply within 0.1 s (model.timeout; raise it for a slow model)"),  # nothing comes
    ],
)
@pytest.mark.timeout(30)
def test_transient_failures_beyond_the_retry_budget_end_in_model_error(
    config: ModelSettings, reply: str | int, timeout: float, expected: str
) -> None:
    config = config.model_copy(update={"timeout": timeout})
    with OpenAIServer(replies=[reply]) as server, pytest.raises(ModelError) as raised:
        get_model("gpt-5-mini", config, base_url=server.url).complete(MESSAGES)
    message = str(raised.value)
    assert not isinstance(raised.value, ModelAuthError)
    assert message.startswith("model gpt-5-mini failed after 3 attempts: ")
    assert expected in message and "\n" not in message
    assert server.hits == 3


def test_transient_failure_then_success_within_budget(config: ModelSettings) -> None:
    config = config.model_copy(update={"timeout": 0.3, "max_retries": 3})
    with OpenAIServer(replies=["hang", "invalid_json", 502, "finally"]) as server:
        reply = get_model("gpt-5", config, base_url=server.url).complete(MESSAGES)
    assert reply.text == "finally"
    assert server.hits == 4


def test_connection_refused_is_retried_then_model_error(config: ModelSettings) -> None:
    with OpenAIServer(replies=["unused"]) as server:
        dead_url = server.url
    with pytest.raises(ModelError, match=r"failed after 3 attempts: .*Connection"):
        get_model("gpt-5", config, base_url=dead_url).complete(MESSAGES)


@pytest.mark.parametrize(
    ("status", "error_type"),
    [(401, "OpenAIAuthenticationError"), (403, "OpenAIPermissionDeniedError"), (404, "OpenAIModelNotFoundError")],
)
def test_auth_and_not_found_fail_at_once_without_leaking_the_key(
    config: ModelSettings,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
    status: int,
    error_type: str,
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    caplog.set_level(logging.DEBUG)
    echo = Reply(status=status, error_message=f"Incorrect API key provided: {SECRET}") if status == 401 else status
    with OpenAIServer(replies=[echo, "never reached"]) as server, pytest.raises(ModelAuthError) as raised:
        get_model("gpt-5-mini", config, base_url=server.url).complete(MESSAGES)
    message = str(raised.value)
    assert server.hits == 1
    assert server.requests[0].headers["authorization"] == f"Bearer {SECRET}"
    assert message.startswith(f"model gpt-5-mini: {error_type}: Error code: {status} - ")
    assert ("Incorrect API key provided: ***" in message) == (status == 401)
    assert ("`gpt-5-mini` does not exist" in message) == (status == 404)
    assert SECRET not in message and SECRET not in repr(raised.value.args)
    assert raised.value.__cause__ is None and raised.value.__suppress_context__
    assert caplog.records and SECRET not in caplog.text


def test_base_url_from_environment_and_keyless_placeholder(
    config: ModelSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    with OpenAIServer(replies=["from env"]) as env_server, OpenAIServer(replies=["from argument"]) as arg_server:
        monkeypatch.setenv("OPENAI_BASE_URL", env_server.url)
        from_env = get_model("gpt-5-mini", config).complete(MESSAGES)
        from_argument = get_model("gpt-5-mini", config, base_url=arg_server.url).complete(MESSAGES)
    assert (from_env.text, from_argument.text) == ("from env", "from argument")
    assert (env_server.hits, arg_server.hits) == (1, 1)
    assert env_server.requests[0].headers["authorization"] == "Bearer not-needed"


@pytest.mark.parametrize("spec", ["gpt-5-mini", "openai:gpt-5-mini"])
@pytest.mark.parametrize("given", ["argument", "environment"])
def test_a_query_in_the_endpoint_url_is_sent_with_each_request(
    config: ModelSettings, monkeypatch: pytest.MonkeyPatch, spec: str, given: str
) -> None:
    """`?api-key=…` (or Azure's `?api-version=…`) in the endpoint's URL: the SDK put `/chat/completions` after the
    query, and every call was a 404. The query is now sent with each request, the path where it belongs."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used-here")
    with OpenAIServer(replies=["answered"], models=["gpt-5-mini"]) as server:
        url = server.url + "?api-key=q-secret-1&api-version=2"
        if given == "environment":
            monkeypatch.setenv("OPENAI_BASE_URL", url)
        model = get_model(spec, config, base_url=url if given == "argument" else None)
        assert model.complete(MESSAGES).text == "answered"
        assert listed_models(url, None, 5) == ["gpt-5-mini"]
    assert [request.path for request in server.requests] == ["/v1/chat/completions?api-key=q-secret-1&api-version=2"]


@pytest.mark.parametrize("spec", ["gpt-5-mini", "openai:gpt-5-mini"])
@pytest.mark.parametrize("given", [("argument", "kwargs", "environment"), ("kwargs", "environment"), ("kwargs",)])
def test_the_endpoint_is_the_argument_s_then_model_kwargs_then_the_environment_s(
    config: ModelSettings, monkeypatch: pytest.MonkeyPatch, spec: str, given: tuple[str, ...]
) -> None:
    """`--base-url` first, then `model.kwargs.base_url`, then $OPENAI_BASE_URL; a bare `?` ends no URL's path."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-not-used-here")
    with OpenAIServer(replies=["a"]) as a, OpenAIServer(replies=["k"]) as k, OpenAIServer(replies=["e"]) as e:
        urls = {"argument": a.url + "?", "kwargs": k.url, "environment": e.url}
        if "environment" in given:
            monkeypatch.setenv("OPENAI_BASE_URL", urls["environment"])
        settings = config.model_copy(update={"kwargs": {"base_url": urls["kwargs"]}})
        model = get_model(spec, settings, base_url=urls["argument"] if "argument" in given else None)
        assert model.complete(MESSAGES).text == given[0][0]
    assert [len(server.requests) for server in (a, k, e)] == [int(name == given[0]) for name in urls]


@pytest.mark.parametrize("name", ["api_key", "openai_api_key"])
@pytest.mark.parametrize("environment_key", [None, "sk-from-the-environment"])
def test_a_key_in_model_kwargs_is_the_one_an_endpoint_given_by_url_is_sent(
    config: ModelSettings, monkeypatch: pytest.MonkeyPatch, name: str, environment_key: str | None
) -> None:
    if environment_key:
        monkeypatch.setenv("OPENAI_API_KEY", environment_key)
    given = config.model_copy(update={"kwargs": {name: SECRET}})
    with OpenAIServer(replies=["answered", Reply(status=401, error_message=f"bad key {SECRET}")]) as server:
        model = get_model("gpt-5-mini", given, base_url=server.url)
        assert model.complete(MESSAGES).text == "answered"
        with pytest.raises(ModelAuthError) as raised:
            model.complete(MESSAGES)
    assert [request.headers["authorization"] for request in server.requests] == [f"Bearer {SECRET}"] * 2
    assert "bad key ***" in str(raised.value) and SECRET not in str(raised.value)


def test_default_endpoint_without_key_is_an_auth_error(config: ModelSettings) -> None:
    with pytest.raises(ModelAuthError, match="OPENAI_API_KEY is not set"):
        get_model("gpt-5-mini", config)


def test_missing_integration_package_is_named(config: ModelSettings) -> None:
    if importlib.util.find_spec("langchain_anthropic") is not None:
        pytest.skip("langchain-anthropic is installed here")
    with pytest.raises(ModelError, match=r"cannot create model anthropic:claude-haiku-4-5: .*langchain-anthropic"):
        get_model("anthropic:claude-haiku-4-5", config)


def test_backoff_is_exponential_with_full_jitter() -> None:
    rng = random.Random(3)
    delays = {attempt: [backoff_delay(attempt, 0.5, 6.0, rng) for _ in range(400)] for attempt in range(6)}
    caps = {attempt: min(6.0, 0.5 * 2**attempt) for attempt in range(6)}
    for attempt, values in delays.items():
        assert all(0.0 <= value <= caps[attempt] for value in values)
        assert min(values) < caps[attempt] * 0.1 and max(values) > caps[attempt] * 0.9
    assert caps == {0: 0.5, 1: 1.0, 2: 2.0, 3: 4.0, 4: 6.0, 5: 6.0}


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "script",
    [
        "- |\n  <thought>first</thought>\n- second reply\n- third\n",
        "responses:\n  - |\n    <thought>first</thought>\n  - second reply\n  - third\n",
    ],
)
def test_scripted_model_positions_resume_and_exhaustion(tmp_path: Path, config: ModelSettings, script: str) -> None:
    """It keeps its own place: one call after the other; beside a run (its folder), a model made again in another
    process goes on where the first was, and a call made again after a resume (the same prompt: the step a kill
    interrupted runs again) gets the reply it had."""
    path = write(tmp_path / "script.yaml", script)
    model = get_model(f"scripted:{path}", config)
    assert isinstance(model, ScriptedModel) and model.name == f"scripted:{path}"
    first = model.complete(MESSAGES)
    prompt_tokens = estimate_tokens("".join(m["content"] for m in MESSAGES))
    text = "<thought>first</thought>\n"
    assert first == ModelReply(text, prompt_tokens, estimate_tokens(text), 0.0, estimated=True)
    assert model.complete(MESSAGES[:1]).text == "second reply"  # its own position, one call after the other
    assert get_model(f"scripted:{path}", config).complete(MESSAGES).text == first.text  # no folder: from the start

    run = tmp_path / "run"
    run.mkdir()
    beside = get_model(f"scripted:{path}", config, keep=FolderKeep(run))
    assert [beside.complete([{"role": "user", "content": f"step {n}"}]).text for n in (1, 2)] == [
        first.text,
        "second reply",
    ]
    resumed = get_model(f"scripted:{path}", config, keep=FolderKeep(run))  # the run resumed in another process
    assert resumed.complete([{"role": "user", "content": "step 2"}]).text == "second reply"  # made again: the same
    assert resumed.complete([{"role": "user", "content": "step 3"}]).text == "third"
    again = get_model(f"scripted:{path}", config, keep=FolderKeep(run))
    with pytest.raises(ModelError, match=r"^scripted model ran out of responses after 3 calls"):
        again.complete([{"role": "user", "content": "step 4"}])
    (place,) = run.iterdir()  # one small file beside the run: a line per call answered
    assert place.name.startswith("scripted-script-") and len(place.read_text().splitlines()) == 3
    other = get_model(f"scripted:{path}", config, keep=FolderKeep(run, "t2."))  # another run in the same folder
    assert other.complete([{"role": "user", "content": "step 4"}]).text == first.text  # from the start
    assert sorted(p.name for p in run.iterdir()) == [place.name, f"t2.{place.name}"]


def test_a_scripted_model_resumed_under_another_spelling_of_its_path_goes_on(
    tmp_path: Path, config: ModelSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The command printed to resume a run names its script as it was given: pasted in another folder (the path
    adjusted), or given whole, the script goes on where it was, not from its start."""
    path = write(tmp_path / "script.yaml", "- first\n- second\n- third\n")
    run = tmp_path / "run"
    run.mkdir()
    monkeypatch.chdir(tmp_path)
    started = get_model("scripted:script.yaml", config, keep=FolderKeep(run))
    assert started.complete([{"role": "user", "content": "step 1"}]).text == "first"
    monkeypatch.chdir(run)
    for spec, step, reply in (("scripted:../script.yaml", 2, "second"), (f"scripted:{path}", 3, "third")):
        resumed = get_model(spec, config, keep=FolderKeep(run))
        assert resumed.complete([{"role": "user", "content": f"step {step}"}]).text == reply
    assert len(list(run.iterdir())) == 1, "one place for the one script"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "file not found"),
        ("- a\n- [b\n", "not valid YAML"),
        ("just a string\n", "must hold a list of strings"),
        ("- a\n- {b: c}\n", ": item 2 of 2: unknown key 'b' (a reply is a text, or {text, tool_call}"),
        ("steps: [a]\n", "must hold a list of strings"),
        ("- a\n- 5\n- c\n", ": item 2 of 3: 5 is neither a text nor a mapping"),
        ("- a\n-\n", ": item 2 of 2: null is neither a text nor a mapping"),
        ("- {text: x, tool_call: {name: view, args: {}}}\n", ": item 1 of 1: its tool_call has an unknown key 'args'"),
        ("- a\n- {text: x, tool_call: {arguments: {}}}\n", ": item 2 of 2: its tool_call has no name (a string)"),
        ("- a\n- {text: x}\n", ": item 2 of 2: its tool_call is missing or not a mapping {name, arguments}"),
        (
            "- {if_prompt_contains: x, then: a}\n",
            ": item 1 of 1: a choice has the keys if_prompt_contains, then, else,",
        ),
        ("- {if_prompt_contains: x, then: a, else: [b]}\n", ': item 1 of 1: its else: ["b"] is neither a text'),
    ],
)
def test_scripted_model_rejects_bad_scripts(tmp_path: Path, config: ModelSettings, content: str | None, message: str):
    """A bad item is named by its number and what is wrong with it (was: the whole format, no item named)."""
    path = tmp_path / "script.yaml"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ModelError, match=f"^scripted model: .*{re.escape(message)}"):
        get_model(f"scripted:{path}", config)
