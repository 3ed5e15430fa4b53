"""The bill of a scripted run's calls as the benchmarks price it, and the memory given that price, in this package or
in an older one (bench_old_new runs a benchmark that declares `PORTABLE = True` on the old package too: the same
measurement of both).

Characters, priced like providers price: the prefix a request shares with the run's previous request is a cached
re-read, the rest uncached (written to the cache where the price list charges for that), plus the output."""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from llm_ide.config import load_config
from llm_ide.pricing import Price

try:
    from llm_ide.pricing import PROFILES
except ImportError:  # a package from before the price profiles (0922c50): the same lists (a test keeps them equal)
    PROFILES = {
        "gpt": Price(input=1.0, output=8.0, cache_read=0.1),
        "claude55": Price(input=1.0, output=5.0, cache_read=0.05, cache_write=1.25),
        "open": Price(input=1.0, output=3.0, cache_read=0.02),
    }

GPT = PROFILES["gpt"]


def bill_of(calls: Iterable[dict[str, Any]], price: Price = GPT) -> tuple[int, float, int]:
    """Raw prompt characters, the bill and the output characters of a run's calls (the trajectory's `model_calls`)."""
    raw = out = 0
    bill, previous = 0.0, ""
    uncached = price.input if price.cache_write is None else price.cache_write
    read = price.input if price.cache_read is None else price.cache_read
    for call in calls:
        prompt, response = call.get("prompt", ""), call.get("response", "")
        shared = len(os.path.commonprefix([previous, prompt]))
        raw, out = raw + len(prompt), out + len(response)
        bill += (len(prompt) - shared) * uncached + shared * read + len(response) * price.output
        previous = prompt
    return raw, bill, out


def appended_bill(prompts: list[int], replies: list[int], price: Price = GPT) -> float:
    """The bill of a full-history agent's calls: each prompt (its length) the previous one with a turn appended, a
    cached re-read but for that turn; `replies` the lengths of its replies."""
    uncached = price.input if price.cache_write is None else price.cache_write
    read = price.input if price.cache_read is None else price.cache_read
    previous, bill = 0, 0.0
    for prompt, reply in zip(prompts, replies, strict=True):
        bill += (prompt - previous) * uncached + previous * read + reply * price.output
        previous = prompt
    return bill


def memory_priced(price: Price = GPT) -> dict[str, Any]:
    """The memory settings that make its renewals weigh `price` for a model without one (a scripted model):
    `unpriced` (a price list), or in a package from before it `cached_price` (a re-read's share of an uncached
    character's price)."""
    if "unpriced" in type(load_config("default").memory).model_fields:
        entry = {"input": price.input, "output": price.output, "cache_read": price.cache_read}
        return {"unpriced": {**entry, **({"cache_write": price.cache_write} if price.cache_write else {})}}
    read = price.input if price.cache_read is None else price.cache_read
    return {"cached_price": read / (price.input if price.cache_write is None else price.cache_write)}
