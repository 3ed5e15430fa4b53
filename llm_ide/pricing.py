"""What a model's tokens cost: the prices of the config's `model.prices` (found by the model's name: priced.py); the
price lists the benchmarks bill both agents with (`PROFILES`)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from llm_ide.settings import PriceSettings


@dataclass(frozen=True)
class Price:
    """USD per million tokens; a cache price left out is the input price (no discount assumed)."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    @property
    def write(self) -> float:
        """A prompt token the cache does not hold: written to it where the provider charges for that."""
        return self.input if self.cache_write is None else self.cache_write

    @property
    def read(self) -> float:
        """A prompt token read from the provider's prompt cache (a prefix of the previous request)."""
        return self.input if self.cache_read is None else self.cache_read

    @property
    def charged(self) -> bool:
        """Whether a prompt token costs anything (a free or local model's price list is all zeros)."""
        return self.write > 0

    def bill(self, uncached: float, cached: float, output: float) -> float:
        """The price of a request of `uncached` new and `cached` re-read prompt units and `output` reply units (tokens,
        or characters as the benchmarks count them): a new one is written to the cache (`cache_write`) where it has
        a price, as providers that charge for it cache every prompt prefix they are asked to."""
        return uncached * self.write + cached * self.read + output * self.output

    def cost(self, input_tokens: int, output_tokens: int, cache_read: int = 0, cache_write: int = 0) -> float:
        uncached = max(0, input_tokens - cache_read - cache_write)
        spent = uncached * self.input + cache_read * self.read + cache_write * self.write
        return (spent + output_tokens * self.output) / 1e6


PROFILES = {  # per prompt token of an uncached input; examples in docs/replay.md
    "gpt": Price(input=1.0, output=8.0, cache_read=0.1),
    "claude55": Price(input=1.0, output=5.0, cache_read=0.05, cache_write=1.25),
    "open": Price(input=1.0, output=3.0, cache_read=0.02),
}


def price_of(settings: PriceSettings) -> Price:
    return Price(settings.input, settings.output, settings.cache_read, settings.cache_write)


def renewal_rates(model: object, unpriced: PriceSettings) -> tuple[float, float]:
    """What the memory weighs a renewal at, per uncached prompt character: a re-read one (at most 1) and a reply's, at
    the model's own prices (`unpriced` for a model without a price, or a free one)."""
    price = getattr(model, "price", None)
    price = price if isinstance(price, Price) and price.charged else price_of(unpriced)
    return min(1.0, price.read / price.write), price.output / price.write


def settings_of(price: Price) -> dict[str, float]:
    """`price` as an entry of the config's `model.prices`."""
    return {key: value for key, value in asdict(price).items() if value is not None}


__all__ = ["PROFILES", "Price", "price_of", "renewal_rates", "settings_of"]
