"""A model endpoint that misbehaves on purpose (tests/openai_server.py): bounded time, bounded cost, bounded prompts."""

from __future__ import annotations

import json
import logging
import re
import sqlite3
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, act, reflect
from conftest import make_git_repo
from openai_server import OpenAIServer, Reply

from llm_ide.config import Settings, load_config
from llm_ide.models import ModelError, get_model
from llm_ide.run.single import RunEvent, run_task
from llm_ide.settings import ModelSettings

MESSAGES = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Fix the bug."}]
SUBMIT = act("Done.", "submit")


def model_config(**values: Any) -> ModelSettings:
    return load_config(model={"max_retries": 2, "retry_base_delay": 0.01, "retry_max_delay": 0.02, **values}).model


def settings(**agent: Any) -> Settings:
    """Two calls per step: each reply of the tests' endpoints is one call's (a reflection, or an action)."""
    model = {"max_retries": 2, "retry_base_delay": 0.01, "retry_max_delay": 0.02, "timeout": 5}
    agent = {"cost_limit": 1e9, "token_limit": None, "single_call": False, **agent}
    return load_config("default", environment={"tools": []}, agent=agent, model=model)


def run_against(tmp_path: Path, server: OpenAIServer, model: str = "gpt-4o", **agent: Any) -> tuple[Any, list[str]]:
    phases: list[str] = []

    def on_event(event: RunEvent) -> None:
        if event.kind == "phase":
            phases.append(event.phase)

    result = run_task(
        "Cart.total ignores quantities.",
        model=model,
        base_url=server.url,
        settings=settings(**agent),
        output_dir=tmp_path / "out",
        run_id="t1",
        repo=make_git_repo(tmp_path / "repo", BUGGY_FILES),
        on_event=on_event,
    )
    return result, phases


@pytest.fixture(autouse=True)
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


@pytest.mark.timeout(120)
def test_slow_drip_cannot_hold_a_request_past_its_total_deadline() -> None:
    """A byte every 0.1 s never trips a per-read timeout; the 0.6 s total deadline ends each attempt after a few."""
    with OpenAIServer(replies=[Reply("a reply long enough to take a minute", drip=0.1)]) as server:
        model = get_model("gpt-4o", model_config(timeout=0.6, max_retries=1), base_url=server.url)
        with pytest.raises(ModelError, match="failed after 2 attempts.*(deadline|[Tt]imeout)"):
            model.complete(MESSAGES)
    assert server.hits == 2
    assert all(sent < 20 for sent in server.dripped), server.dripped


@pytest.mark.timeout(120)
def test_slow_drip_cannot_hold_the_run_past_its_wall_time_limit(tmp_path: Path) -> None:
    with OpenAIServer(replies=[Reply("a reply long enough to take minutes", drip=1.0)]) as server:
        result, _ = run_against(tmp_path, server, wall_time_limit=1.5)  # the call's own timeout: 5 s
    assert result.exit_status == "time_limit", result.error
    assert "wall-time limit" in result.error


def test_retry_after_is_honoured(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="llm_ide.models")
    replies = [Reply(status=429, headers=(("retry-after", "1.5"),)), "after the wait"]
    with OpenAIServer(replies=replies) as server:
        model = get_model("gpt-4o", model_config(), base_url=server.url)
        assert model.complete(MESSAGES).text == "after the wait"
    [warning] = [r.getMessage() for r in caplog.records if "retry 1/2" in r.getMessage()]
    assert warning.endswith("retry 1/2 in 1.50s")


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        ({"error": {"message": "overloaded", "type": "server_error"}}, "status 200 with an error"),
        ({"id": "x", "object": "chat.completion", "created": 0, "model": "m", "choices": []}, "no choices"),
        (b'{"choices": ' + b"[" * 200_000 + b"]" * 200_000 + b"}", "nested too deeply"),
    ],
)
def test_200_that_is_not_a_completion_is_retried_then_a_model_error(body: Any, reason: str) -> None:
    with OpenAIServer(replies=[Reply(body=body)]) as server:
        model = get_model("gpt-4o", model_config(), base_url=server.url)
        with pytest.raises(ModelError, match=f"failed after 3 attempts: BadCompletion: .*{reason}"):
            model.complete(MESSAGES)
    assert server.hits == 3


def test_200_error_body_then_a_completion_goes_on() -> None:
    replies = [Reply(body={"error": {"message": "overloaded"}}), Reply(body={"choices": []}), "fine"]
    with OpenAIServer(replies=replies) as server:
        model = get_model("gpt-4o", model_config(), base_url=server.url)
        assert model.complete(MESSAGES).text == "fine"


@pytest.mark.parametrize(("input_tokens", "output_tokens"), [(-5_000_000, 10), (10, -1), (10**12, 10), (10, 10**30)])
def test_impossible_usage_is_replaced_by_the_estimate_and_both_are_kept(
    input_tokens: int, output_tokens: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="llm_ide.models")
    reply = Reply("<thought>ok</thought>", input_tokens=input_tokens, output_tokens=output_tokens)
    with OpenAIServer(replies=[reply]) as server:
        model = get_model("gpt-4o", model_config(), base_url=server.url)
        result = model.complete(MESSAGES)
    assert 0 <= result.input_tokens < 1000 and 0 <= result.output_tokens < 1000
    assert 0 <= result.cost < 0.01
    assert result.reported_usage == {"input_tokens": input_tokens, "output_tokens": output_tokens}
    assert any("implausible usage" in r.getMessage() for r in caplog.records)


def test_implausible_usage_is_said_once_per_run_and_each_call_records_both_figures(tmp_path: Path) -> None:
    """A run whose endpoint reports 1e12 prompt tokens, then negative ones: one warning in the run, the estimate
    priced and counted (so the cost limit uses it), the reported figures beside it in every call they concern."""
    script = [act("Look.", "bash", command="true"), reflect(False, "ok"), SUBMIT]
    usages = [(10**12, 30), (-7, 20), (500, 10)]
    replies = [Reply(text, input_tokens=i, output_tokens=o) for text, (i, o) in zip(script, usages, strict=True)]
    with OpenAIServer(replies=replies) as server:
        result, _ = run_against(tmp_path, server, model="gpt-4o", cost_limit=1.0)
    assert result.exit_status == "submitted", result.error
    calls = json.loads(result.trajectory_path.read_text())["model_calls"]
    assert [c.get("reported_usage") for c in calls] == [
        {"input_tokens": 10**12, "output_tokens": 30},
        {"input_tokens": -7, "output_tokens": 20},
        None,
    ]
    estimated = [c["prompt_chars"] // 4 for c in calls[:2]]
    assert [c["prompt_tokens"] for c in calls] == [*estimated, 500]
    assert [c["response_tokens"] for c in calls] == [30, 20, 10]
    assert result.model_stats["input_tokens"] == sum(estimated) + 500 < 100_000
    cost = result.model_stats["cost"]
    assert cost == pytest.approx(sum(c["cost"] for c in calls)) and cost < 0.1
    log = (tmp_path / "out" / "t1.log").read_text()
    assert log.count("implausible usage") == 1 and "cost limits use the estimate" in log


def test_token_limit_holds_for_an_unpriced_model_with_a_console_warning(tmp_path: Path) -> None:
    steps = [act("Look.", "bash", command="true"), reflect(False, "ok")] * 5 + [SUBMIT]
    with OpenAIServer(replies=[Reply(text, input_tokens=4000, output_tokens=100) for text in steps]) as server:
        result, _ = run_against(tmp_path, server, model="local/unpriced-model", token_limit=10_000)
    tokens = result.model_stats["input_tokens"] + result.model_stats["output_tokens"]
    assert (result.exit_status, result.model_stats["cost"]) == ("cost_limit", 0.0) and tokens >= 10_000
    assert result.error == f"the run's token limit (10,000) is reached ({tokens:,} tokens)"
    assert result.model_stats["api_calls"] < len(steps)
    [warning] = [line for line in (tmp_path / "out" / "t1.log").read_text().splitlines() if "no price" in line]
    assert "WARNING" in warning and "cost limit cannot be enforced" in warning


BAD_REPLIES = {
    "nul": act("A NUL\0 inside.", "bash", command="echo nul\0byte"),
    "surrogate": act("A lone \ud800 surrogate.", "bash", command="echo \udc00"),
    "huge_integer": act("Huge.", "view", path="shop/cart.py", start_line=10**30),
    "deep_json": "<thought>Deep.</thought><action_type>view</action_type><action_params>"
    + '{"a": ' * 200_000
    + "1"
    + "}" * 200_000
    + "</action_params>",
}


def strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else []
    return [text for child in children for text in strings(child)]


@pytest.mark.parametrize("kind", sorted(BAD_REPLIES))
def test_hostile_bytes_in_a_reply_cost_that_call_only(tmp_path: Path, kind: str) -> None:
    replies = [BAD_REPLIES[kind], reflect(False, "looked"), act("Look.", "bash", command="true"), reflect(False, "ok")]
    with OpenAIServer(replies=[*replies, SUBMIT]) as server:
        result, _ = run_against(tmp_path, server)
    assert result.exit_status == "submitted", result.error
    out = tmp_path / "out"
    data = json.loads((out / "t1.traj.json").read_bytes().decode("utf-8"))  # valid UTF-8 throughout
    assert not [text for text in strings(data) if "\0" in text or re.search(r"[\ud800-\udfff]", text)]
    if kind in {"huge_integer", "deep_json"}:
        assert [o["thought"] for o in data["operations"]] == ["Look.", "Done."]
        retry = "".join(str(m["content"]) for m in server.requests[1].body["messages"])
        assert retry.count("could not be used") == 1
    else:
        assert data["operations"][0]["thought"].startswith("A ")
    with sqlite3.connect(out / "t1.checkpoint.sqlite") as db:
        assert db.execute("SELECT count(*) FROM checkpoints").fetchone()[0] > 0


def test_every_prompt_stays_within_budget_whatever_the_model_writes(tmp_path: Path) -> None:
    """A 10 MB thought, 1 MB of lessons, a 100k-character source line and a 10 MB unusable reply."""
    long_line = "x = '" + "y" * 100_000 + "'\n"
    steps = [
        act("T" * 10_000_000, "create", path="wide.py", content=long_line),
        reflect(False, "created", "\n".join(f"- lesson {n} " + "l" * 100 for n in range(10_000))),
        act("View it.", "view", path="wide.py"),
        reflect(False, "viewed"),
        "R" * 10_000_000,
        act("Done.", "submit"),
    ]
    with OpenAIServer(replies=steps) as server:
        result, _ = run_against(tmp_path, server)
    assert result.exit_status == "submitted", result.error
    budget = 250_000
    sizes = [sum(len(m["content"]) for m in request.body["messages"]) for request in server.requests]
    assert max(sizes) < budget, sizes
    checkpoint = tmp_path / "out" / "t1.checkpoint.sqlite"
    stored = sum(p.stat().st_size for p in checkpoint.parent.glob("t1.checkpoint.sqlite*"))
    assert stored < 5_000_000


@pytest.mark.parametrize("stream", [True, False])
def test_a_server_gone_names_the_endpoint_and_why(stream: bool) -> None:
    """A local server that died mid-run: the line says which endpoint did not answer and why, not `Connection error.`"""
    with OpenAIServer(replies=["never sent"]) as server:
        url = server.url
    model = get_model("gpt-4o", model_config(stream=stream), base_url=url)
    said = rf"after 3 attempts: the endpoint {url.removesuffix('/v1')} did not answer \(Connection refused;"
    with pytest.raises(ModelError, match=said):
        model.complete(MESSAGES)


@pytest.mark.parametrize(
    ("message", "hinted"),
    [
        ("This model's maximum context length is 8192 tokens. However, your messages resulted in 9000 tokens.", True),
        ("request (1520 tokens) exceeds the available context size (1024 tokens), try increasing it", True),
        ("prompt is too long: 212000 tokens > 200000 maximum", True),
        ("temperature must be at most 2", False),
    ],
)
@pytest.mark.parametrize("stream", [True, False])
def test_a_prompt_past_the_context_names_the_setting_that_shortens_it(message: str, hinted: bool, stream: bool) -> None:
    with OpenAIServer(replies=[Reply(status=400, error_message=message)]) as server:
        model = get_model("gpt-4o", model_config(stream=stream), base_url=server.url)
        with pytest.raises(ModelError) as raised:
            model.complete(MESSAGES)
    assert server.hits == 1
    assert message[:30] in str(raised.value)
    assert ("lower memory.prompt_budget_chars" in str(raised.value)) is hinted
