"""The wire as real servers speak it, against the loopback OpenAI-compatible server (tests/openai_server.py) behaving
like a local one: a reply cut at the length limit, the room each reply is given, a slow first reply, a model list at
/v1/models, no usage in a stream. Real `llm-ide run` processes where the console or the trajectory is the point."""

from __future__ import annotations

import gzip
import json
import logging
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, act, single_call
from conftest import make_git_repo
from in_process import invoke
from openai_server import OpenAIServer, Reply

from llm_ide.client_options import LOCAL_MAX_TOKENS
from llm_ide.config import load_config
from llm_ide.models import get_model, warn_once

MESSAGES = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Fix the bug."}]
REPLIES = single_call(FIX_SCRIPT)
SUBMIT = act("Nothing to change.", "submit")
CUT = "<thought>Read the cart's total first, then think about the quantities, and then"


def model_settings(**values: Any) -> Any:
    return load_config(model={"max_retries": 2, "retry_base_delay": 0.01, "retry_max_delay": 0.02, **values}).model


@pytest.fixture(autouse=True)
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


def cli(folder: Path, url: str, *extra: str, model: str = "gpt-test", config: str = "") -> list[str]:
    """A run in `folder` (its own repository, config and output folder `out`, thread `t`)."""
    repo = make_git_repo(folder / "repo", BUGGY_FILES)
    (path := folder / "c.yaml").write_text("environment: {tools: []}\n" + config)
    run = ["run", "--repo", str(repo), "--task", "Cart.total ignores quantities.", "--config", str(path)]
    run += ["--model", model, "--base-url", url, "--thread-id", "t", "--output", str(folder / "out")]
    return [*run, *extra]


def environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    return {**env, "COLUMNS": "200", "LLM_IDE_CONFIG": "off"}


def run(args: list[str]) -> subprocess.CompletedProcess[str]:
    return invoke(*args, env=environment())


def calls_of(output: Path) -> list[dict[str, Any]]:
    return json.loads((output / "t.traj.json").read_text())["model_calls"]


@pytest.mark.parametrize("stream", [False, True])
def test_a_reply_cut_at_the_length_limit_is_said_recorded_and_used_as_it_is(
    stream: bool, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="llm_ide.models")
    with OpenAIServer(replies=[Reply(CUT, finish_reason="length"), "<submit></submit>"]) as server:
        model = get_model("qwen-local", model_settings(max_tokens=300, stream=stream), base_url=server.url)
        cut, whole = model.complete(MESSAGES), model.complete(MESSAGES)
    assert (cut.text, cut.finish_reason) == (CUT, "length")
    assert whole.finish_reason == "stop"
    assert [request.body["max_tokens"] for request in server.requests] == [300, 300]  # what local servers read
    assert all("max_completion_tokens" not in request.body for request in server.requests)
    [said] = [record.getMessage() for record in caplog.records if "cut at the length limit" in record.getMessage()]
    assert said.startswith("model qwen-local: the reply was cut at the length limit (model.max_tokens = 300)")
    assert "raise model.max_tokens" in said


def test_the_room_for_a_reply_defaults_by_endpoint_and_model_kwargs_win() -> None:
    with OpenAIServer(replies=["done"]) as server:
        get_model("local-model", model_settings(), base_url=server.url).complete(MESSAGES)
        get_model("local-model", model_settings(kwargs={"max_tokens": 77}), base_url=server.url).complete(MESSAGES)
        extra = {"extra_body": {"top_k": 20}}
        get_model("local-model", model_settings(max_tokens=512, kwargs=extra), base_url=server.url).complete(MESSAGES)
    default, named, merged = (request.body for request in server.requests)
    assert default["max_tokens"] == LOCAL_MAX_TOKENS == 4096
    assert named["max_completion_tokens"] == 77 and "max_tokens" not in named  # the kwargs' own field, as given
    assert (merged["max_tokens"], merged["top_k"]) == (512, 20)


def test_anthropic_is_given_its_room_and_its_max_tokens_stop_is_a_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("langchain_anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-loopback-test-key-0123456789")
    reply = Reply(CUT, input_tokens=200, output_tokens=300, finish_reason="length")
    with OpenAIServer(replies=[reply]) as server:
        model = get_model("anthropic:claude-haiku-4-5", model_settings(max_tokens=300), server.url.removesuffix("/v1"))
        answer = model.complete(MESSAGES)
    assert server.requests[0].path.endswith("/v1/messages") and server.requests[0].body["max_tokens"] == 300
    assert (answer.text, answer.finish_reason) == (CUT, "length")


def test_a_cut_reply_in_a_run_is_one_line_on_the_console_and_in_the_call_record(tmp_path: Path) -> None:
    replies: list[str | Reply] = [Reply(CUT, finish_reason="length"), *REPLIES]
    with OpenAIServer(replies=replies) as server:
        result = run(cli(tmp_path, server.url, config="model: {max_tokens: 64}\n"))
    assert result.returncode == 0, result.stdout + result.stderr
    cut = [line for line in result.stderr.splitlines() if "cut at the length limit" in line]
    assert len(cut) == 1 and cut[0].startswith("model gpt-test: the reply was cut at the length limit")
    assert "(model.max_tokens = 64)" in cut[0]
    calls = calls_of(tmp_path / "out")
    assert calls[0]["finish_reason"] == "length" and calls[0]["response"] == CUT
    assert all("finish_reason" not in call for call in calls[1:])  # a reply that ended by itself: nothing to say
    assert server.requests[0].body["max_tokens"] == 64


def test_a_slow_first_reply_is_waited_for_within_the_timeout_and_retried_past_it(tmp_path: Path) -> None:
    """A local model on CPU reads its first, longest prompt for minutes: the request timeout (model.timeout, 600 s
    by default) is how long a reply may produce nothing; past it the call is retried, and the console says why,
    naming the setting."""
    shown = invoke("config", "show", "model.timeout", "model.max_tokens", env=environment())
    assert shown.stdout.splitlines() == [
        "# user config: none (LLM_IDE_CONFIG=off)",
        "model.timeout: 600.0  # bundled default.yaml",
        "model.max_tokens: null  # bundled default.yaml",
    ]
    slow = [Reply(REPLIES[0], delay=1.0), *REPLIES[1:]]  # past the reads' 0.25 s slices
    with OpenAIServer(replies=slow) as server:
        waited = run(cli(tmp_path / "a", server.url, config="model: {timeout: 30}\n"))
    assert waited.returncode == 0, waited.stdout + waited.stderr
    assert server.hits == len(REPLIES) and "retry" not in waited.stderr
    # every call of the run has the timeout: the quick ones far within it on a loaded machine, the slow one far past
    impatient = "model: {timeout: 2, max_retries: 1, retry_base_delay: 0.01}\n"
    with OpenAIServer(replies=[Reply(REPLIES[0], delay=120), *REPLIES]) as server:
        retried = run(cli(tmp_path / "b", server.url, config=impatient))
    assert retried.returncode == 0, retried.stdout + retried.stderr
    [retry] = [line for line in retried.stderr.splitlines() if "retry 1/1" in line]
    assert retry.startswith("model gpt-test: nothing came for 2 s (model.timeout; raise it for a slow model)")
    assert server.hits == len(REPLIES) + 1  # the one given up, then each reply once


@pytest.mark.parametrize(
    ("listed", "model", "config", "runs"),
    [
        (["qwen2.5-coder-7b-instruct", "llama-3.2-3b"], "qwen2.5-coder-7b-instruct", "", True),
        (["qwen2.5-coder:latest"], "qwen2.5-coder", "", True),  # Ollama: a name without a tag is its :latest
        (None, "anything", "", True),  # no /v1/models route: nothing to check against
        ([], "anything", "", True),  # an empty list says nothing either
        (["qwen2.5-coder-7b-instruct"], "qwen-typo", "model: {check_name: false}\n", True),
        (["qwen2.5-coder-7b-instruct", "llama-3.2-3b"], "qwen-typo", "", False),
    ],
    ids=["listed", "ollama-latest", "no-route", "empty-list", "check-off", "not-listed"],
)
def test_a_model_name_the_endpoint_does_not_list_is_one_line_before_anything_starts(
    tmp_path: Path, listed: list[str] | None, model: str, config: str, runs: bool
) -> None:
    with OpenAIServer(replies=[SUBMIT], models=listed) as server:
        result = run(cli(tmp_path, server.url, model=model, config=config))
    if runs:
        assert result.returncode == 0, result.stdout + result.stderr
        assert server.requests[0].body["model"] == model
        return
    assert (result.returncode, result.stderr.count("\n"), result.stdout) == (2, 1, ""), result.stderr
    assert result.stderr == (
        f"error: model qwen-typo is not served at {server.url}, which lists: qwen2.5-coder-7b-instruct, "
        "llama-3.2-3b; pass one of them to --model (or set model.check_name: false)\n"
    )
    assert server.hits == 0 and not (tmp_path / "out").exists()  # nothing started: no call, no output folder


@pytest.mark.parametrize(
    ("path", "listed", "said"),
    [
        ("/v2", ["qwen-local"], "lists qwen-local; pass --base-url {origin}/v1"),  # a typo for /v1: said at once
        ("", ["qwen-local"], "lists qwen-local; pass --base-url {origin}/v1"),  # /v1 left out (Ollama's, vLLM's)
        ("/v2", None, None),  # the server lists nothing anywhere: the first call says it, naming the URL's 404
    ],
    ids=["typo", "no-v1", "nothing-listed"],
)
def test_a_base_url_whose_path_answers_nothing_is_one_line_naming_the_one_that_does(
    tmp_path: Path, path: str, listed: list[str] | None, said: str | None
) -> None:
    with OpenAIServer(replies=[SUBMIT], models=listed) as server:
        origin = server.url.removesuffix("/v1")
        result = run(cli(tmp_path, origin + path, model="qwen-local"))
    assert server.hits == 0  # no chat request reached the route
    if said is None:
        assert result.returncode == 1, result.stdout + result.stderr
        assert "404 - no route /v2/chat/completions (check the model name, URL and API key)\n" in result.stderr
        return
    assert (result.returncode, result.stdout, result.stderr) == (
        2,
        "",
        f"error: nothing answers at {origin + path} (GET {origin + path}/models: 404), but {origin}/v1 "
        + said.format(origin=origin)
        + "\n",
    )
    assert not (tmp_path / "out").exists()


def test_the_url_a_base_url_with_a_query_is_a_typo_for_keeps_its_query(tmp_path: Path) -> None:
    """The URL named for a path that answers nothing dropped the endpoint's query (Azure's `?api-version=`, a key):
    the one it said to pass lost what the endpoint needs; and the GET it named put `/models` after the query."""
    with OpenAIServer(replies=[SUBMIT], models=["qwen-local"]) as server:
        origin = server.url.removesuffix("/v1")
        result = run(cli(tmp_path, origin + "/v2?api-version=2024-06-01", model="qwen-local"))
    assert server.hits == 0 and result.returncode == 2
    assert result.stderr == (
        f"error: nothing answers at {origin}/v2?api-version=2024-06-01 (GET {origin}/v2/models?api-version=2024-06-01:"
        f" 404), but {origin}/v1?api-version=2024-06-01 lists qwen-local; pass --base-url"
        f" {origin}/v1?api-version=2024-06-01\n"
    )


def test_streamed_replies_without_usage_are_marked_estimated_in_calls_model_stats_and_the_console(
    tmp_path: Path,
) -> None:
    warn_once("usage", "gpt-test", "said in the test's process before: the run is a process of its own")
    with OpenAIServer(replies=REPLIES, stream_usage=False) as server:
        result = run(cli(tmp_path, server.url, "-v"))
    assert result.returncode == 0, result.stdout + result.stderr
    assert server.requests[0].body["stream_options"] == {"include_usage": True}  # asked for, never sent
    traj = json.loads((tmp_path / "out" / "t.traj.json").read_text())
    assert [call.get("usage_estimated") for call in traj["model_calls"]] == [True] * len(REPLIES)
    stats = traj["info"]["model_stats"]
    assert stats["estimated_calls"] == stats["api_calls"] == len(REPLIES)
    with gzip.open(tmp_path / "out" / "t.calls.jsonl.gz", "rt") as log:
        assert all(json.loads(line)["usage_estimated"] for line in log)
    assert result.stderr.count("the response carries no token usage; estimating it") == 1
    assert f"submitted after {len(REPLIES)} model calls, " in result.stdout
    assert "tokens (estimated), unpriced" in result.stdout  # gpt-test has no price either

    with OpenAIServer(replies=REPLIES) as server:  # the usage sent: nothing is marked
        counted = run(cli(tmp_path / "counted", server.url, "-v"))
    assert counted.returncode == 0, counted.stdout + counted.stderr
    counted_traj = json.loads((tmp_path / "counted" / "out" / "t.traj.json").read_text())
    assert all("usage_estimated" not in call for call in counted_traj["model_calls"])
    assert counted_traj["info"]["model_stats"]["estimated_calls"] == 0 and "(estimated" not in counted.stdout
