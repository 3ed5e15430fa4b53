"""llm-ide: a software-engineering agent with an IDE-like structured memory, built as a LangGraph state machine."""

from typing import Any

from llm_ide.version import __version__

__all__ = [
    "__version__",
    "AttemptsResult",
    "ConfigError",
    "CostBudget",
    "ExitStatus",
    "LlmIdeError",
    "RunEvent",
    "RunResult",
    "Settings",
    "build_attempts_graph",
    "build_graph",
    "load_config",
    "run_attempts",
    "run_task",
]


def __getattr__(name: str) -> Any:
    if name == "build_graph":
        from llm_ide.graph import build_graph

        return build_graph
    if name in {"load_config", "Settings", "ConfigError"}:
        from llm_ide import config

        return getattr(config, name)
    if name in {"ExitStatus", "LlmIdeError"}:
        from llm_ide import errors

        return getattr(errors, name)
    if name in {"run_task", "RunEvent", "RunResult", "CostBudget"}:
        from llm_ide.run import single

        return getattr(single, name)
    if name in {"run_attempts", "AttemptsResult"}:
        from llm_ide.attempts import run

        return getattr(run, name)
    if name == "build_attempts_graph":
        from llm_ide.attempts.graph import build_attempts_graph

        return build_attempts_graph
    raise AttributeError(f"module 'llm_ide' has no attribute {name!r}")
