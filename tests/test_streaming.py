"""Replies stream while someone watches (issue 40 §4): the watcher is told the tokens so far and their rate; a reply
that produces nothing for `model.timeout` is cut and said, naming the setting, while one still producing is never cut
by that timeout however long it writes. Against the loopback OpenAI-compatible server."""

from __future__ import annotations

import pytest
from openai_server import OpenAIServer, Reply

from llm_ide.calls import CallProgress
from llm_ide.config import load_config
from llm_ide.errors import ModelError
from llm_ide.models import get_model

MESSAGES = [{"role": "system", "content": "You are careful."}, {"role": "user", "content": "Fix calc.py."}]
WORDS = " ".join(f"word{index}" for index in range(40))


def model_settings(**values: object):
    return load_config(model={"max_retries": 0, "retry_base_delay": 0.0, **values}).model


def test_a_reply_still_producing_is_not_cut_by_the_timeout_and_its_rate_is_told() -> None:
    """40 chunks 0.04 s apart: 1.6 seconds in all, twice `model.timeout` and past the second from which a rate is
    told; a gap between two tokens would have to last twenty paces (a loaded machine's stall) to be cut."""
    told: list[CallProgress] = []
    with OpenAIServer(replies=[Reply(WORDS, pace=0.04)]) as server:
        model = get_model("gpt-test", model_settings(timeout=0.8), base_url=server.url)
        model.listener = told.append  # type: ignore[attr-defined]
        reply = model.complete(MESSAGES)
    assert reply.text == WORDS and server.requests[0].body["stream"] is True
    texts = [progress for progress in told if progress.kind == "text"]
    assert [progress.kind for progress in told] == ["start", *["text"] * len(texts), "end"]
    assert "".join(progress.text for progress in texts) == WORDS
    counts = [progress.output_tokens for progress in texts]
    assert counts == sorted(counts) and counts[-1] > 40  # the tokens so far, growing
    rated = [progress for progress in texts if progress.rate is not None]
    assert rated and all(progress.rate > 0 for progress in rated)  # a rate once a second of them has come
    assert told[-1].seconds > 0.8  # it ran past the timeout: 39 paces of 0.04 s, the server's own waits
    assert told[-1].output_tokens == reply.output_tokens


@pytest.mark.parametrize("stream", [True, "auto"])
def test_a_stream_that_produces_nothing_is_cut_and_said_naming_the_setting(stream: object) -> None:
    """The server keeps the connection alive with SSE comments but never sends a token."""
    with OpenAIServer(replies=[Reply(WORDS, pings=0.1)]) as server:
        model = get_model("gpt-test", model_settings(timeout=0.5, stream=stream), base_url=server.url)
        model.listener = lambda progress: None  # type: ignore[attr-defined]
        with pytest.raises(ModelError) as raised:
            model.complete(MESSAGES)
    assert str(raised.value) == (
        "model gpt-test failed after 1 attempt: nothing came for 0.5 s (model.timeout; raise it for a slow model)"
    )


def test_unwatched_calls_are_not_streamed_and_their_timeout_is_the_whole_reply() -> None:
    with OpenAIServer(replies=[Reply(WORDS, delay=1.0)]) as server:
        model = get_model("gpt-test", model_settings(timeout=0.4), base_url=server.url)
        with pytest.raises(ModelError, match=r"no whole reply within 0.4 s \(model.timeout; raise it"):
            model.complete(MESSAGES)
    assert not server.requests[0].body.get("stream")


def test_an_endpoint_that_does_not_stream_is_asked_whole_from_then_on(caplog: pytest.LogCaptureFixture) -> None:
    """A server that answers a request for a stream with one body (the loopback endpoints of some proxies): the reply
    is asked again, whole, said once, and the next calls are not streamed."""
    with OpenAIServer(replies=["unread", "first", "second"], streams=False) as server:
        model = get_model("gpt-nostream", model_settings(), base_url=server.url)
        model.listener = lambda progress: None  # type: ignore[attr-defined]
        assert [model.complete(MESSAGES).text for _ in range(2)] == ["first", "second"]
    assert [bool(request.body.get("stream")) for request in server.requests] == [True, False, False]
    said = [record.getMessage() for record in caplog.records if "sends no streams" in record.getMessage()]
    assert said == ["model gpt-nostream: the endpoint sends no streams; asked whole"]


WHY = "the streamed reply held nothing (no chunk, no whole completion)"


@pytest.mark.parametrize(
    "broken",
    [
        Reply(body=b"not a stream, not JSON"),
        Reply(body=b"data: [DONE]\n\n", headers=(("content-type", "text/event-stream"),)),
    ],
)
def test_one_broken_stream_is_a_retry_and_the_next_calls_still_stream(
    caplog: pytest.LogCaptureFixture, broken: Reply
) -> None:
    """A streaming endpoint's one bad 200 (a body that is no stream, or a stream of nothing) turned streaming off for
    the whole run ("the endpoint sends no streams") and was no retry."""
    with OpenAIServer(replies=[broken, "first", "second"]) as server:
        model = get_model("gpt-test", model_settings(max_retries=2), base_url=server.url)
        model.listener = lambda progress: None  # type: ignore[attr-defined]
        assert [model.complete(MESSAGES).text for _ in range(2)] == ["first", "second"]
    assert [bool(request.body.get("stream")) for request in server.requests] == [True, True, True]
    said = [record.getMessage() for record in caplog.records if "price" not in record.getMessage()]  # (once a run)
    assert len(said) == 1 and said[0].startswith(f"model gpt-test: BadCompletion: {WHY}; retry 1/2 in "), said
