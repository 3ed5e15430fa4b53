"""The repository as the actions reach it (`Codebase`: the environment it lives in, the code view over it, and the
templates and limits the actions need), what an action gives back (`ActionOutcome`), and a bad parameter's error
(`ParamError`): what the core's actions (actions.py, file_actions.py) and the variants' share."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from llm_ide.codeview import CodeView
from llm_ide.environments.base import Environment
from llm_ide.environments.live import CommandListener
from llm_ide.prompting import render
from llm_ide.settings import CoreSettings, Templates
from llm_ide.state.context import Scope

MIN_TIMEOUT = 0.1  # seconds a command gets when the wall-time limit is (all but) reached


class ParamError(ValueError):
    pass


@dataclass
class ActionOutcome:
    observation: str
    returncode: int
    accessed: list[Scope] = field(default_factory=list)
    duration: float = 0.0
    submitted: bool = False
    timed_out: bool = False


@dataclass
class Codebase:
    """The repository as the actions reach it: the environment it lives in, the code view over it, and the
    templates and limits the actions need."""

    env: Environment
    view: CodeView
    templates: Templates
    view_max_lines: int = 200
    search_max_results: int = 100
    command_timeout: float = 120.0
    observation_max_chars: int = 0  # what of an output the agent is shown (0: all of it)
    tool_commands: tuple[str, ...] = ()
    deadline: float | None = None  # time.monotonic() at which the run's wall-time limit passes
    on_command: CommandListener | None = None  # told of each command of the agent's as it runs (its output so far)

    def timeout(self) -> float:
        """A command's timeout: the configured one, or the time left before the wall-time limit when that is sooner."""
        if self.deadline is None:
            return self.command_timeout
        return max(MIN_TIMEOUT, min(self.command_timeout, self.deadline - time.monotonic()))

    @classmethod
    def for_settings(cls, env: Environment, settings: CoreSettings, **extra: Any) -> Codebase:
        """The repository in `env` with the templates and limits of `settings`."""
        return cls(
            env=env,
            view=CodeView(env),
            templates=settings.templates,
            view_max_lines=settings.agent.view_max_lines,
            search_max_results=settings.agent.search_max_results,
            command_timeout=settings.environment.command_timeout,
            observation_max_chars=settings.agent.observation_max_chars,
            **extra,
        )

    def observe(self, name: str, **values: Any) -> str:
        return render(self.templates, f"observations.{name}", **values)
