from llm_ide.state.context import (
    Activity,
    Chunk,
    Reference,
    Scope,
    ScoreParams,
    add_scope,
    count_references,
    normalize_path,
    parse_references,
    referral_score,
    rescore,
)
from llm_ide.state.operations import OperationNode, all_lessons, reasoning_chain

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
