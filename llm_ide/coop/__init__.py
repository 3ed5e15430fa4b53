"""Cooperation (CooperBench): the Python API. `run_pair` runs one pair, `run_pairs` a batch (with its `Summary`),
`collect` reads the results under an output folder and `summarize` rates any of them."""

from typing import Any

__all__ = ["CoopRun", "Setting", "collect", "load_task", "parse_pairs", "run_pair", "run_pairs", "summarize"]


def __getattr__(name: str) -> Any:
    if name in {"CoopRun", "Setting", "run_pair"}:
        from llm_ide.coop import run

        return getattr(run, name)
    if name in {"run_pairs", "summarize", "collect"}:
        from llm_ide.coop import batch

        return getattr(batch, name)
    if name in {"load_task", "parse_pairs"}:
        from llm_ide.coop import task

        return getattr(task, name)
    raise AttributeError(f"module 'llm_ide.coop' has no attribute {name!r}")
