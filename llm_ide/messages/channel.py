"""The message channel of two agents working at once (a coop pair during execution): a mailbox file shared by the pair
(`messages.jsonl`, append-only), and, when `execution.lockstep` is on, the turns that interleave the agents' steps
deterministically (the agent with the fewest operations goes next, ties in agent order), so that a message sent at a
step reaches the other agent before its next step, run after run."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

from llm_ide.errors import LlmIdeError
from llm_ide.prompting import render_string
from llm_ide.settings import TemplateSet

_WRITE = threading.Lock()


class ChannelError(LlmIdeError):
    """The other agent's run failed while this one waited for its turn."""


class MessageTemplates(TemplateSet):
    sent: str
    duplicate: str
    received: str


class Turns:
    """Lockstep for the agents of one pair, run as threads of one process."""

    def __init__(self, agents: list[str]) -> None:
        self.order = list(agents)
        self.steps: dict[str, int | None] = dict.fromkeys(agents)
        self.left: set[str] = set()
        self.aborted = False
        self._cond = threading.Condition()

    def _next(self) -> str | None:
        active = [a for a in self.order if a not in self.left]
        if any(self.steps[a] is None for a in active):
            return None  # an agent not started yet may be behind
        return min(active, key=lambda a: (self.steps[a], self.order.index(a)), default=None)

    def wait(self, agent: str, step: int) -> None:
        """Block until `agent`, about to take operation `step + 1`, has its turn."""
        with self._cond:
            self.steps[agent] = step
            self._cond.notify_all()
            self._cond.wait_for(lambda: self.aborted or self._next() == agent)
            if self.aborted:
                raise ChannelError(f"agent {agent}: the other agent's run failed; run again to resume")

    def leave(self, agent: str) -> None:
        with self._cond:
            self.left.add(agent)
            self._cond.notify_all()

    def abort(self) -> None:
        with self._cond:
            self.aborted = True
            self._cond.notify_all()


class Mailbox:
    """One agent's end of the channel: `send` appends to the pair's file, `receive` reads what is addressed to it."""

    def __init__(
        self, path: Path, agent: str, other: str, templates: MessageTemplates, turns: Turns | None = None
    ) -> None:
        self.path, self.agent, self.other, self.turns = path, agent, other, turns
        self.templates = templates

    def _read(self) -> list[dict[str, Any]]:
        try:
            lines = self.path.read_text(encoding="utf-8").splitlines()
        except FileNotFoundError:
            return []
        entries = []
        for line in lines:
            try:
                entries.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a kill: that message was never sent
        return entries

    def send(self, text: str) -> str:
        """The observation of `send_message`; a message the agent already sent (a step redone after a kill) is not
        sent twice."""
        with _WRITE:
            entries = self._read()
            if any(e["from"] == self.agent and e["text"] == text for e in entries):
                return render_string(self.templates.duplicate, other=self.other)
            entry = {"from": self.agent, "to": self.other, "text": text, "seq": len(entries) + 1}
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                os.write(fd, (json.dumps(entry, ensure_ascii=False) + "\n").encode("utf-8"))
                os.fsync(fd)
            finally:
                os.close(fd)
        return render_string(self.templates.sent, other=self.other)

    def receive(self, known: int) -> list[dict[str, Any]]:
        """The messages to this agent after the first `known` of them."""
        with _WRITE:
            return [e for e in self._read() if e["to"] == self.agent][known:]

    def wait_turn(self, step: int) -> None:
        if self.turns is not None:
            self.turns.wait(self.agent, step)

    def section(self, messages: list[dict[str, Any]]) -> str:
        """The prompt section of messages received together."""
        return render_string(self.templates.received, other=self.other, messages=messages) if messages else ""
