"""What the attempts' tests share (test_attempts, test_attempts_resume, test_attempts_limits): their settings without
tools and the prompts an attempt's calls log holds."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from llm_ide.config import load_config

NO_TOOLS = {"environment": {"tools": []}}


def settings(**attempts):
    return load_config("default", **NO_TOOLS, attempts=attempts)


def prompts(output: Path, index: int) -> list[str]:
    path = output / f"attempt{index}" / f"T-attempt{index}.calls.jsonl.gz"
    with gzip.open(path, "rt") as log:
        return [json.loads(line)["prompt"] for line in log if line.strip()]
