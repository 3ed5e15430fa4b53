"""Tree layout in pure Python, drawn like a commit graph: one row per operation in the order it happened, the branch
that goes on stays in its parent's lane, an alternative opens the nearest free lane to the right, and the labels line
up in one column after the lanes. Each attempt gets its own band, side by side."""

from __future__ import annotations

from pydantic import BaseModel

from llm_ide.inspector.model import NodeView

LANE = 22
ROW = 28
MARGIN = 20
GAP = 14
LABEL_ROOM = 330


class Placed(BaseModel):
    node: NodeView
    x: float
    y: float
    label_x: float
    parent: tuple[float, float] | None = None


class Band(BaseModel):
    attempt: int
    x: float


class Layout(BaseModel):
    placed: list[Placed]
    width: float
    height: float
    bands: list[Band]


def layout(nodes: list[NodeView]) -> Layout:
    placed: list[Placed] = []
    bands: list[Band] = []
    left, rows = MARGIN, 0
    for attempt in sorted({node.attempt for node in nodes}):
        mine = sorted((node for node in nodes if node.attempt == attempt), key=lambda node: node.id)
        lanes = assign_lanes(mine)
        label_x = left + (max(lanes.values(), default=0) + 1) * LANE + GAP
        row = {node.id: position for position, node in enumerate(mine)}
        point = {
            node.id: (left + lanes[node.id] * LANE + LANE / 2, MARGIN + row[node.id] * ROW + ROW / 2) for node in mine
        }
        for node in mine:
            x, y = point[node.id]
            placed.append(Placed(node=node, x=x, y=y, label_x=label_x, parent=point.get(node.parent_id)))
        bands.append(Band(attempt=attempt, x=left))
        left, rows = label_x + LABEL_ROOM, max(rows, len(mine))
    return Layout(placed=placed, width=left + MARGIN, height=MARGIN * 2 + max(rows, 1) * ROW, bands=bands)


def assign_lanes(nodes: list[NodeView]) -> dict[int, int]:
    """Lane of each node (nodes of one tree, in row order). The child that goes on is the first one with children
    (as in the reasoning chain), else the last one."""
    row = {node.id: position for position, node in enumerate(nodes)}
    children: dict[int | None, list[NodeView]] = {}
    for node in nodes:
        parent = node.parent_id if node.parent_id in row else None
        children.setdefault(parent, []).append(node)
    last_row = dict(row)
    for node in reversed(nodes):  # a child comes after its parent: one backward pass gives each subtree's last row
        if node.parent_id in last_row:
            last_row[node.parent_id] = max(last_row[node.parent_id], last_row[node.id])
    busy: dict[int, list[tuple[int, int]]] = {}

    def free(lane: int, start: int, end: int) -> bool:
        return all(end < a or start > b for a, b in busy.get(lane, []))

    lanes: dict[int, int] = {}
    stack: list[tuple[NodeView, int, int]] = []
    for root in children.get(None, []):
        lane = next(lane for lane in range(len(nodes) + 1) if free(lane, row[root.id], last_row[root.id]))
        stack.append((root, lane, row[root.id]))
        while stack:
            node, lane, start = stack.pop()
            lanes[node.id] = lane
            busy.setdefault(lane, []).append((start, last_row[node.id]))
            kids = children.get(node.id, [])
            going_on = next((kid for kid in kids if kid.id in children), kids[-1] if kids else None)
            for kid in kids:
                if kid is going_on:
                    stack.append((kid, lane, row[kid.id]))
                    continue
                span = (row[node.id], last_row[kid.id])
                other = next(
                    candidate for candidate in range(lane + 1, lane + len(nodes) + 2) if free(candidate, *span)
                )
                busy.setdefault(other, []).append(span)
                stack.append((kid, other, row[kid.id]))
    return lanes
