"""A navigator's test run: the buggy cart repository fixed by a scripted driver beside a navigator of the settings given
(a scripted model or one served), through `run_task`; the edit a navigator denies and its plan."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_script import BUGGY_FILES, act, write_script
from conftest import make_git_repo

from llm_ide.config import load_config
from llm_ide.run.single import RunResult, run_task
from llm_ide.run.trajectory import load_trajectory

CHEAT = act(
    "Make the test expect what the code returns[1](tests/test_cart.py:11).",
    "edit",
    path="tests/test_cart.py",
    old="16.0",
    new="11.5",
)
PLAN = [
    '<view>{"path": "shop/cart.py"}</view>',
    "<plan>1. In Cart.total multiply price by quantity.\n2. Run the unit tests.</plan>",
]


def run(
    tmp_path: Path, driver: list[str], navigator: list[str] | None, nav: dict[str, Any], **kw: Any
) -> tuple[RunResult, dict[str, Any]]:
    repo = tmp_path / "repo"
    if not repo.exists():
        make_git_repo(repo, BUGGY_FILES)
    if navigator is not None:
        nav = {"model": write_script(tmp_path / "navigator.yaml", navigator), **nav}
    settings = load_config("default", environment={"tools": []}, navigator={"mode": "model", **nav}, **kw)
    result = run_task(
        "Cart.total ignores quantities.",
        model=write_script(tmp_path / "driver.yaml", driver),
        settings=settings,
        output_dir=tmp_path / "out",
        run_id="nav",
        repo=repo,
    )
    return result, load_trajectory(result.trajectory_path)
