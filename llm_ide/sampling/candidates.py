"""The k candidate replies of one `act`, parsed and folded: identical actions are one candidate."""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llm_ide.calls import ModelReply
from llm_ide.errors import FormatError
from llm_ide.parsing import ParsedAction


@dataclass
class Candidate:
    """A distinct candidate action, the first reply that proposed it, and how many replies did (`samples`)."""

    action: ParsedAction
    reply: ModelReply
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


def fold(
    replies: tuple[ModelReply, ...], parse: Callable[[ModelReply], Any]
) -> tuple[list[Candidate], list[ModelReply]]:
    """The distinct candidates in first-seen order, and the replies that could not be read. `parse` reads a reply's
    action (with the verdict on the latest operation, one call per step)."""
    candidates: dict[tuple[str, str], Candidate] = {}
    failures: list[ModelReply] = []
    for reply in replies:
        try:
            action = parse(reply).action
        except FormatError:
            failures.append(reply)
            continue
        candidate = Candidate(action, reply)
        if candidate.key in candidates:
            candidates[candidate.key].samples += 1
        else:
            candidates[candidate.key] = candidate
    return list(candidates.values()), failures
