"""What a driver of several runs at a task (attempts) asks the variants that can check a finished run by execution:
`verify(bench, runs, record)` with the finished runs and a bench of clean environments (`bench.clean(label, patch)`:
the base commit with the patch applied). A variant that can, implements `Verifier` beside `Variant`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True)
class Finished:
    """A finished run at the task: its number, its patch, its trajectory's info (the variants' records)."""

    index: int
    patch: str
    info: dict[str, Any]


@dataclass(frozen=True)
class Verified:
    """What `verify` found: its `record` (what it ran; the driver keeps it and gives it back next time), `facts` and
    `ranks` by run number. A rank is compared before any model judges: lower is better; all zeros: nothing found
    wrong."""

    record: dict[str, Any]
    facts: dict[int, dict[str, Any]] = field(default_factory=dict)
    ranks: dict[int, tuple[int, ...]] = field(default_factory=dict)


@runtime_checkable
class Verifier(Protocol):
    name: str

    def verify(self, bench: Any, runs: list[Finished], record: dict[str, Any]) -> Verified | None: ...
