"""What a model's tokens cost: the prices of the config's `model.prices`, found by the model's name."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from llm_ide.settings import PriceSettings

DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


@dataclass(frozen=True)
class Price:
    """USD per million tokens; a cache price left out is the input price (no discount assumed)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        uncached = max(0, input_tokens - cache_read - cache_write)
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        return (uncached * self.input + cache_read * read + cache_write * write + output_tokens * self.output) / 1e6


def langchain_providers() -> frozenset[str]:
    from langchain.chat_models import base

    return frozenset(getattr(base, "_BUILTIN_PROVIDERS", ()))  # init_chat_model's own provider table


def bare_model_name(name: str) -> str:
    """`openai:gpt-5-mini`, `tensorblock/gpt-5-mini`, `openrouter/openai/gpt-5-mini` → `gpt-5-mini`."""
    prefix, _, rest = name.partition(":")
    if rest and prefix in langchain_providers():
        name = rest
    return name.rsplit("/", 1)[-1]


def find_price(name: str, prices: Mapping[str, PriceSettings]) -> Price | None:
    """The price of `name`: exact, then without provider prefix, then without a date/`-latest` suffix."""
    bare = bare_model_name(name)
    for candidate in (name, bare, DATE_SUFFIX.sub("", bare)):
        entry = prices.get(candidate)
        if entry is not None:
            return Price(entry.input, entry.output, entry.cache_read, entry.cache_write)
    return None


__all__ = ["Price", "bare_model_name", "find_price", "langchain_providers"]
