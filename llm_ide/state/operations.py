from __future__ import annotations

import re
from dataclasses import dataclass, field, fields
from typing import Any

from llm_ide.state.record import Record
from llm_ide.verdict import Judged

BULLET = re.compile(r"^[-*•](?:\s+|$)")
VERDICT_PARTS = tuple(part.name for part in fields(Judged))


@dataclass
class OperationNode(Judged, Record):
    """An operation: its place in the tree, its reasoning, action and outcome, its verdict (llm_ide/verdict.py)."""

    id: int
    parent_id: int | None
    thought: str = ""
    action_type: str = ""
    action_params: dict[str, Any] = field(default_factory=dict)
    observation: str = ""
    returncode: int | None = None
    duration: float = 0.0
    marks: dict[str, Any] = field(default_factory=dict)  # what variants recorded on it, each under its own keys
    lead_in: str = ""  # rows seen earlier just above what its output shows of a function (state/context.py: lead_in)


def node_record(node: OperationNode) -> dict[str, Any]:
    """An operation as a trajectory holds it: its fields, with what the variants marked on it among them."""
    record = node._asdict()
    parts, marks = {name: record.pop(name) for name in VERDICT_PARTS}, record.pop("marks")
    return {**record, **parts, "marks": marks, **marks}  # the verdict's parts after the action's, as they always were


def node_of(record: dict[str, Any]) -> OperationNode:
    """An operation read back from a trajectory: the keys that are no field of a node are its marks."""
    fields = OperationNode.__dataclass_fields__
    known = {key: value for key, value in record.items() if key in fields and key != "marks"}
    return OperationNode(**known, marks={key: value for key, value in record.items() if key not in fields})


def merge_operations(current: list[OperationNode] | None, update: list[OperationNode]) -> list[OperationNode]:
    """The operations channel's reducer: a node whose id exists replaces it (its verdict arrived), a new one is
    appended; so a step writes only the nodes it touched, not the whole tree."""
    merged = list(current or [])
    for node in update:
        if node.id < len(merged) and merged[node.id].id == node.id:
            merged[node.id] = node
        else:
            merged.append(node)
    return merged


def children_index(nodes: list[OperationNode]) -> dict[int | None, list[int]]:
    """parent id → positions of its children, in creation order (None is the virtual root)."""
    children: dict[int | None, list[int]] = {}
    for position, node in enumerate(nodes):
        children.setdefault(node.parent_id, []).append(position)
    return children


def reasoning_chain(nodes: list[OperationNode]) -> list[OperationNode]:
    """Walk from the root: at each level take the first sibling that has a child and descend; the last node is
    always included. Failed alternatives (childless siblings) drop out."""
    if not nodes:
        return []
    children = children_index(nodes)
    chain: list[OperationNode] = []
    level = children.get(None, [])
    while level:
        for position in level:
            node = nodes[position]
            if node.id in children:
                chain.append(node)
                level = children[node.id]
                break
        else:
            break
    if not chain or chain[-1] is not nodes[-1]:
        chain.append(nodes[-1])
    return chain


def all_lessons(nodes: list[OperationNode]) -> list[str]:
    """Lessons of every node, on the chain or not, one per line, de-duplicated in first-seen order."""
    seen: dict[str, None] = {}
    for node in nodes:
        for line in node.lessons.splitlines():
            lesson = BULLET.sub("", line.strip()).strip()
            if lesson:
                seen.setdefault(lesson, None)
    return list(seen)


def failed_ids(nodes: list[OperationNode]) -> set[int]:
    """Nodes off the reasoning chain: the failed alternatives."""
    return {node.id for node in nodes} - {node.id for node in reasoning_chain(nodes)}
