"""A reply's usage and cost: tokens read from the usage (cached, Anthropic's cache reads and writes), priced from
the price table, the name a price is found by, a model without a price."""

from __future__ import annotations

import logging
import uuid

import pytest
from models_support import MESSAGES, SECRET, fast_settings
from openai_server import OpenAIServer, Reply

from llm_ide.config import load_config
from llm_ide.models import ModelReply, get_model
from llm_ide.priced import find_price
from llm_ide.pricing import Price
from llm_ide.settings import ModelSettings, PriceSettings


@pytest.fixture
def config() -> ModelSettings:
    """The bundled `model:` section with delays and timeouts small enough for fast tests."""
    return fast_settings()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "OPENAI_API_BASE"):
        monkeypatch.delenv(name, raising=False)


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


def test_reply_carries_usage_and_cost_from_price_table(config: ModelSettings, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    with OpenAIServer(replies=[Reply("<thought>ok</thought>", input_tokens=1200, output_tokens=300)]) as server:
        model = get_model("tensorblock/gpt-5-mini", config, base_url=server.url)
        reply = model.complete(MESSAGES)
    assert model.name == "tensorblock/gpt-5-mini"
    assert reply == ModelReply(
        "<thought>ok</thought>", 1200, 300, pytest.approx(1200 * 0.25e-6 + 300 * 2.0e-6), finish_reason="stop"
    )
    [request] = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    assert request.body["model"] == "tensorblock/gpt-5-mini"
    assert request.body["messages"] == [{"role": m["role"], "content": m["content"]} for m in MESSAGES]
    assert "temperature" not in request.body


def test_cached_prompt_tokens_are_read_from_the_usage_and_priced(
    config: ModelSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    replies = [
        Reply("first", input_tokens=9000, output_tokens=100),
        Reply("again", input_tokens=10_000, output_tokens=200, cached_tokens=8800),
    ]
    with OpenAIServer(replies=replies) as server:
        model = get_model("gpt-5-mini", config, base_url=server.url)
        first, second = (model.complete(MESSAGES) for i in range(2))
    assert first == ModelReply("first", 9000, 100, pytest.approx(9000 * 0.25e-6 + 100 * 2.0e-6), finish_reason="stop")
    cost = 1200 * 0.25e-6 + 8800 * 0.025e-6 + 200 * 2.0e-6
    assert second == ModelReply("again", 10_000, 200, pytest.approx(cost), cache_read_tokens=8800, finish_reason="stop")


def test_anthropic_cache_reads_and_writes_are_read_from_the_usage_and_priced(
    config: ModelSettings, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("langchain_anthropic")
    monkeypatch.setenv("ANTHROPIC_API_KEY", SECRET)
    reply = Reply("cached", input_tokens=10_000, output_tokens=100, cached_tokens=6000, cache_write_tokens=3000)
    with OpenAIServer(replies=[reply]) as server:
        model = get_model("anthropic:claude-haiku-4-5", config, base_url=server.url.removesuffix("/v1"))
        answer = model.complete(MESSAGES)
    assert server.requests[0].path.endswith("/v1/messages")
    cost = 1000 * 1e-6 + 6000 * 0.1e-6 + 3000 * 1.25e-6 + 100 * 5e-6  # claude-haiku-4-5's bundled prices
    assert answer == ModelReply(
        "cached",
        10_000,
        100,
        pytest.approx(cost),
        cache_read_tokens=6000,
        cache_write_tokens=3000,
        finish_reason="stop",  # Anthropic's end_turn, in OpenAI's words
    )


@pytest.mark.parametrize(
    ("price", "tokens", "expected"),
    [
        (
            Price(3.0, 15.0, cache_read=0.3, cache_write=3.75),
            (10_000, 100, 6000, 3000),
            3e-3 + 1.8e-3 + 11.25e-3 + 1.5e-3,
        ),
        (Price(1.0, 2.0), (10_000, 100, 6000, 3000), 10_000e-6 + 200e-6),  # no cache prices: input price
        (Price(0.25, 2.0, cache_read=0.025), (10_000, 0, 10_000, 0), 250e-6),  # all of the prompt cached
    ],
)
def test_cost_prices_uncached_cache_read_cache_write_and_output_tokens(
    price: Price, tokens: tuple[int, int, int, int], expected: float
) -> None:
    assert price.cost(*tokens) == pytest.approx(expected)


def test_unknown_price_costs_zero_with_one_warning(
    config: ModelSettings, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = unique("local/qwen-coder")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    caplog.set_level(logging.WARNING, logger="llm_ide.models")
    with OpenAIServer(replies=[Reply("a", input_tokens=10, output_tokens=2), "bbbbbbbb"]) as server:
        model = get_model(name, config, base_url=server.url)
        replies = [model.complete(MESSAGES) for i in range(2)]
    prompt_chars = sum(len(m["content"]) for m in MESSAGES)
    assert replies == [
        ModelReply("a", 10, 2, 0.0, finish_reason="stop"),
        ModelReply("bbbbbbbb", prompt_chars // 4, 2, 0.0, finish_reason="stop"),
    ]
    price_warnings = [r.getMessage() for r in caplog.records if "no price" in r.getMessage()]
    assert price_warnings == [
        f"model {name} has no price in the config's model.prices: it is shown as unpriced, with its tokens; its cost "
        "counts as 0, so the cost limit cannot be enforced (agent.token_limit still applies)"
    ]
    assert server.hits == 2


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gpt-5-mini", Price(0.25, 2.0, cache_read=0.025)),
        ("openai:gpt-5-mini", Price(0.25, 2.0, cache_read=0.025)),
        ("tensorblock/gpt-5-mini", Price(0.25, 2.0, cache_read=0.025)),
        ("openrouter/openai/gpt-4o-mini", Price(0.15, 0.6, cache_read=0.075)),
        ("anthropic:claude-sonnet-4-5-20250929", Price(3.0, 15.0, cache_read=0.3, cache_write=3.75)),
        ("gpt-4o-2024-08-06", Price(2.5, 10.0, cache_read=1.25)),
        ("claude-haiku-4-5-latest", Price(1.0, 5.0, cache_read=0.1, cache_write=1.25)),
        ("gpt-5-pro", None),
        ("ollama:qwen2.5-coder:7b", None),
        ("gpt-5-mini-turbo", None),
    ],
)
def test_find_price(name: str, expected: Price | None) -> None:
    prices = load_config(model={"prices": {"ollama:qwen2.5-coder:7b-typo": {"input": 1, "output": 1}}}).model.prices
    assert find_price(name, prices) == expected


@pytest.mark.parametrize(
    ("name", "ratios"),
    [
        ("anthropic:claude-sonnet-5-5", (1.25, 0.05, 5.0)),  # issue 36's claude55 profile
        ("claude-opus-5-5-20260923", (1.25, 0.05, 5.0)),
        ("claude-fable-5-1", (1.25, 0.025, 5.0)),  # "0.025x for the newest"
        ("claude-sonnet-5", (1.25, 0.1, 5.0)),  # not Sonnet 5.5's: no prefix match
        ("claude-opus-5", (1.25, 0.1, 5.0)),
    ],
)
def test_claude_5_models_are_priced_as_their_profile(name: str, ratios: tuple[float, float, float]) -> None:
    price = find_price(name, load_config().model.prices)
    assert price is not None
    assert (price.write / price.input, price.read / price.input, price.output / price.input) == pytest.approx(ratios)


def test_find_price_prefers_the_exact_name() -> None:
    prices = {"my/model": PriceSettings(input=9.0, output=9.0), "model": PriceSettings(input=1.0, output=2.0)}
    assert (find_price("my/model", prices), find_price("other/model", prices)) == (Price(9, 9), Price(1, 2))
