"""A variant's test run: `run_task` on the buggy cart repository with a scripted driver and the variants and settings
given; and agent 1's end of a message channel agent 2 already wrote in."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from agent_script import BUGGY_FILES, write_script
from conftest import make_git_repo

from llm_ide.config import load_config
from llm_ide.coop.settings import load_coop_settings
from llm_ide.messages.channel import Mailbox
from llm_ide.run.single import RunResult, run_task
from llm_ide.run.trajectory import load_trajectory
from llm_ide.variant import Variant

TASK = "Cart.total ignores quantities."
FIXED = "total += price * quantity"


def run(
    tmp_path: Path, driver: list[str], variants: list[Variant] = (), **config: Any
) -> tuple[RunResult, dict[str, Any]]:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_git_repo(repo, BUGGY_FILES)
    settings = load_config("default", environment={"tools": []}, **config)
    result = run_task(TASK, model=write_script(tmp_path / "driver.yaml", driver), settings=settings,
                      output_dir=tmp_path / "out", run_id="toy", repo=repo, variants=variants)  # fmt: skip
    return result, load_trajectory(result.trajectory_path)


MESSAGE = "I changed nothing in shop/; the cart is yours."


def mailbox(folder: Path) -> Mailbox:
    """Agent 1's end of a channel in which agent 2 already wrote (before agent 1's first step)."""
    path = folder / "messages.jsonl"
    path.write_text(json.dumps({"from": "2", "to": "1", "text": MESSAGE, "seq": 1}) + "\n")
    return Mailbox(path, "1", "2", load_coop_settings().templates.messages)
