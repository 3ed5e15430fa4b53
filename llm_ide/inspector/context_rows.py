"""Which code-context chunks each step's prompt held, read back from its `## Code Context` sections (the snapshot the
prompts build on, renewed now and then, and what was added since): their `### File:` blocks and numbered rows."""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

SECTION = re.compile(r"^## Code Context \(as of operation \d+[^)\n]*\)$", re.M)
FILE = "### File: `"
ROW = re.compile(r" *(\d+)\t")
ROLE = re.compile(r"\[(system|user|assistant|tool)\]")


def prompt_rows(prompt: str) -> dict[str, set[int]]:
    """Each file's line numbers the prompt's code context shows."""
    rows: dict[str, set[int]] = {}
    for section in SECTION.finditer(prompt):
        current: set[int] | None = None
        for line in prompt[section.end() + 1 :].split("\n"):
            if line.startswith(FILE):
                current = rows.setdefault(line[len(FILE) :].rstrip("`"), set())
            elif line.startswith("#") or ROLE.fullmatch(line):
                break
            elif current is not None and (row := ROW.match(line)):
                current.add(int(row.group(1)))
    return rows


def step_prompts(calls: Iterable[Any]) -> dict[int, str]:
    """Each step's prompt: that of its last act call (a reply refused is asked again), where the log kept it."""
    prompts = {}
    for call in calls:
        if call.kind == "act" and call.step is not None and call.prompt:
            prompts[call.step] = call.prompt
    return prompts


def shown_in_prompts(file_path: str, lines: list[int], rows: list[dict[str, set[int]] | None]) -> list[bool | None]:
    """Per step, whether the chunk's rows were in its prompt's code context (None: the step's prompt is unknown)."""
    wanted = set(lines)
    return [None if step is None else bool(wanted & step.get(file_path, set())) for step in rows]
