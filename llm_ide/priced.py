"""A model's price found by its name in `model.prices` (exact, without its provider's prefix, without a date suffix),
and whether its cost is known, for what shows one (the console, the inspector): a model without a price there is
shown as unpriced, with its tokens, never as a cost of $0."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from llm_ide.errors import usd
from llm_ide.pricing import Price, price_of
from llm_ide.settings import PriceSettings
from llm_ide.terminal import plural

DATE_SUFFIX = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$")


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
            return price_of(entry)
    return None


def has_price(model: str, prices: Mapping[str, PriceSettings]) -> bool:
    """A scripted model is free; another needs a price in `model.prices`."""
    return model.startswith("scripted:") or find_price(model.replace("{attempt}", "1"), prices) is not None


def run_priced(info: Mapping[str, Any]) -> bool:
    """Whether a trajectory's model had a price in its run's config (one without its config: taken as priced)."""
    prices = ((info.get("config") or {}).get("model") or {}).get("prices")
    if not isinstance(prices, dict):
        return True
    return has_price(str(info.get("model", "")), {name: PriceSettings(**price) for name, price in prices.items()})


def navigator_priced(info: Mapping[str, Any]) -> bool:
    """Whether a trajectory's model navigator (`navigator.model`, else the run's model) had a price in its run's config
    (a navigator of another mode: taken as priced, its cost as it said it)."""
    navigator = (info.get("config") or {}).get("navigator") or {}
    if navigator.get("mode", "model") != "model":
        return True
    return run_priced({**info, "model": navigator.get("model") or info.get("model", "")})


def apart_priced(info: Mapping[str, Any]) -> bool | None:
    """Whether the calls a run's variants paid apart from its driver's (a model navigator's) had a price; None: it has
    none of them."""
    navigator = (info.get("config") or {}).get("navigator") or {}
    return navigator_priced(info) if navigator.get("mode", "model") == "model" else None


def settings_apart_priced(model: str, settings: Any) -> bool | None:
    """`apart_priced` of a run to come, from its settings."""
    config = {"model": settings.model.model_dump(), "navigator": settings.navigator.model_dump()}
    return apart_priced({"config": config, "model": model})


def cost_text(cost: float, priced: bool = True, apart: bool | None = None) -> str:
    """A run's cost as shown: `$X`; `unpriced` when no model of it has a price (its cost unknown, never $0); `$X +
    unpriced` when its driver's model or its variants' (`apart`: a navigator's; None: as the driver's) has one and
    the other none."""
    apart = priced if apart is None else apart
    if priced and apart:
        return usd(cost)
    return f"{usd(cost)} + unpriced" if priced or apart else "unpriced"


def tokens_text(input_tokens: int, output_tokens: int, estimated: int, made: int) -> str:
    """A usage's tokens as shown (`1200+80 tokens`), and what of them is estimated (of `made` calls): ` (estimated)`,
    ` (estimated for N calls)`."""
    said = f"{input_tokens}+{output_tokens} tokens"
    if not estimated:
        return said
    return said + (" (estimated)" if estimated >= made else f" (estimated for {plural(estimated, 'call')})")
