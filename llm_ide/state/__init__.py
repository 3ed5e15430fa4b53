from llm_ide.state.context import (
    Activity,
    Chunk,
    Scope,
    ScoreParams,
    add_scope,
    normalize_path,
    referral_score,
    rescore,
)
from llm_ide.state.operations import OperationNode, all_lessons, reasoning_chain
from llm_ide.state.references import Reference, count_references, parse_references

__all__ = [
    "Activity",
    "Chunk",
    "OperationNode",
    "Reference",
    "Scope",
    "ScoreParams",
    "add_scope",
    "all_lessons",
    "count_references",
    "normalize_path",
    "parse_references",
    "reasoning_chain",
    "referral_score",
    "rescore",
]
