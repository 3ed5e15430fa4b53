"""Attempts as a variant of the run, not of the agent's graph: its settings section (`attempts:`); with
`attempts.max` > 1 the runner runs the attempts graph (llm_ide/attempts/graph.py), each attempt a run of the agent
with the other variants."""

from __future__ import annotations

from llm_ide.attempts.settings import AttemptsSettings
from llm_ide.variant import Variant


class Attempts(Variant):
    name = "attempts"
    sections = {"attempts": (AttemptsSettings, AttemptsSettings)}
