"""The k candidate replies of one `act`, parsed and folded: identical actions are one candidate."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_ide.parsing import FormatError, ParsedAction


@dataclass
class Candidate:
    """A distinct candidate action, the first reply that proposed it, and how many replies did (`samples`)."""

    action: ParsedAction
    text: str
    samples: int = 1

    @property
    def key(self) -> tuple[str, str]:
        return self.action.action_type, json.dumps(self.action.action_params, sort_keys=True)

    def record(self, chosen: bool) -> dict[str, Any]:
        return {
            "thought": self.action.thought,
            "action_type": self.action.action_type,
            "action_params": self.action.action_params,
            "samples": self.samples,
            "chosen": chosen,
        }


def fold(texts: tuple[str, ...], parse: Callable[[str], Any]) -> tuple[list[Candidate], list[str]]:
    """The distinct candidates in first-seen order, and the replies that could not be read. `parse` gives an action,
    or the verdict on the latest operation and an action (one call per step)."""
    candidates: dict[tuple[str, str], Candidate] = {}
    failures: list[str] = []
    for text in texts:
        try:
            parsed = parse(text)
        except FormatError:
            failures.append(text)
            continue
        candidate = Candidate(parsed[1] if isinstance(parsed, tuple) else parsed, text)
        if candidate.key in candidates:
            candidates[candidate.key].samples += 1
        else:
            candidates[candidate.key] = candidate
    return list(candidates.values()), failures
