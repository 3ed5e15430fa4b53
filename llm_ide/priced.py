"""Whether a model's cost is known, for what shows one (the console, the inspector): a model without a price in
`model.prices` is shown as unpriced, with its tokens, never as a cost of $0."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from llm_ide.pricing import find_price
from llm_ide.settings import PriceSettings


def has_price(model: str, prices: Mapping[str, PriceSettings]) -> bool:
    """A scripted model is free; another needs a price in `model.prices`."""
    return model.startswith("scripted:") or find_price(model.replace("{attempt}", "1"), prices) is not None


def run_priced(info: Mapping[str, Any]) -> bool:
    """Whether a trajectory's model had a price in its run's config (one without its config: taken as priced)."""
    prices = ((info.get("config") or {}).get("model") or {}).get("prices")
    if not isinstance(prices, dict):
        return True
    return has_price(str(info.get("model", "")), {name: PriceSettings(**price) for name, price in prices.items()})
