"""llm-ide: a software-engineering agent with an IDE-like structured memory, built as a LangGraph state machine."""

from typing import Any

__version__ = "0.1.0"
__all__ = ["CostBudget", "RunEvent", "RunResult", "build_graph", "load_config", "run_task"]


def __getattr__(name: str) -> Any:
    if name == "build_graph":
        from llm_ide.graph import build_graph

        return build_graph
    if name == "load_config":
        from llm_ide.config import load_config

        return load_config
    if name in {"run_task", "RunEvent", "RunResult", "CostBudget"}:
        from llm_ide.run import single

        return getattr(single, name)
    raise AttributeError(f"module 'llm_ide' has no attribute {name!r}")
