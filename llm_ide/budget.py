"""A cost limit shared by concurrent runs (a batch's `--cost-limit`, an attempts run's `attempts.cost_limit`): a model
call starts only once the budget admits it, checked and reserved in one step, so runs calling at the same moment
cannot overshoot the limit together."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Protocol, runtime_checkable

from llm_ide.errors import BudgetSpent, usd

EPSILON = 1e-9  # dollars: sums of float prices that land on the limit count as on it


@runtime_checkable
class Budget(Protocol):
    @property
    def exhausted(self) -> bool: ...

    def admit(self, calls: int = 1) -> Any: ...

    def add(self, cost: float, reservation: Any = 0.0) -> None: ...

    def release(self, reservation: Any) -> None: ...


class CostBudget:
    """A cost limit shared by the runs of a batch (thread-safe). `admit` lets `calls` model calls start when what is
    spent, what the calls under way may still cost and these calls fit in the limit, every call counted as the
    dearest one so far (before any call is known, as free: the first calls of concurrent runs all start); it reserves
    that much, and `add` settles a call at its real cost (`release`: a call that failed). `spent`: what was spent
    before (a batch's earlier runs), `dearest` what a call of theirs cost (a rerun with little left does not let its
    first calls through as free)."""

    def __init__(self, limit: float | None, spent: float = 0.0, dearest: float = 0.0) -> None:
        self.limit = limit if limit and limit > 0 else None
        self.spent = spent
        self.reserved = 0.0
        self.dearest = dearest
        self._lock = threading.Lock()

    def _room(self, calls: int) -> bool:
        if self.limit is None:
            return True
        committed = self.spent + self.reserved
        return committed < self.limit - EPSILON and committed + calls * self.dearest <= self.limit + EPSILON

    @property
    def exhausted(self) -> bool:
        with self._lock:
            return not self._room(1)

    def admit(self, calls: int = 1) -> float:
        """The reservation for `calls` calls; BudgetSpent when there is no room for them."""
        with self._lock:
            if not self._room(calls):
                limit, spent = usd(self.limit), usd(self.spent)
                raise BudgetSpent(f"the shared cost limit {limit} is reached (spent {spent})")
            reservation = calls * self.dearest
            self.reserved += reservation
            return reservation

    def add(self, cost: float, reservation: Any = 0.0) -> None:
        with self._lock:
            self.spent += cost
            self.reserved = max(0.0, self.reserved - reservation)
            self.dearest = max(self.dearest, cost)

    def release(self, reservation: Any) -> None:
        with self._lock:
            self.reserved = max(0.0, self.reserved - reservation)


@contextmanager
def admitted(budget: Budget | None, calls: int = 1) -> Iterator[Any]:
    """The budget's reservation for `calls` model calls made inside the block (raises BudgetSpent when there is no
    room); released when they fail. Settle it with `budget.add(cost, reservation)`."""
    if budget is None:
        yield 0.0
        return
    reservation = budget.admit(calls)
    try:
        yield reservation
    except BaseException:
        budget.release(reservation)
        raise


def shares(usages: Mapping[str, Mapping[str, Any]], cost: bool = True) -> str:
    """`: the driver $0.2000, the <variant> $0.4000` (each one's cost, else its tokens) when a variant's own calls
    (its channel's `usage`) count beside the driver's, else nothing."""
    figures = {key: usage.get("input_tokens", 0) + usage.get("output_tokens", 0) for key, usage in usages.items()}
    if cost:
        figures = {key: usage.get("cost", 0.0) for key, usage in usages.items()}
    said = [
        f"the {key} {usd(value) if cost else f'{value:,}'}"
        for key, value in figures.items()
        if value or key == "driver"
    ]
    return ": " + ", ".join(said) if len(said) > 1 else ""
