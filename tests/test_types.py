"""The core of one step and the variant protocol type-check (mypy, configured in pyproject.toml), and the checker
finds a type error when there is one."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

# Cold, mypy reads what the checked modules import (langgraph, pydantic, langchain-core): 20-33 s of CPU per test on a
# fresh clone, 2 s with the cache a rerun leaves. Over --cpu-limit on CI's fresh clone, so slow (CI runs it).
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]


def mypy(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "mypy", *args], cwd=ROOT, capture_output=True, text=True)


def test_the_core_and_the_variant_protocol_type_check() -> None:
    checked = mypy()
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert checked.stdout.startswith("Success: no issues found in ") and "llm_ide" not in checked.stdout


def test_a_variant_breaking_the_protocol_is_caught(tmp_path: Path) -> None:
    (tmp_path / "mine.py").write_text(
        "from llm_ide.state.operations import OperationNode\n"
        "from llm_ide.variant import ActionResult, ActionRun, PromptParts, State, Variant\n\n\n"
        "class Mine(Variant):\n"
        "    def prompt(self, ctx: object, state: object) -> PromptParts:\n"
        "        return PromptParts(preface=3)\n\n"
        "    def wrap_action(self, ctx: object, state: State, node: OperationNode, run: ActionRun) -> ActionResult:\n"
        "        return run(node).merged(['not', 'a', 'dict'])\n"
    )
    checked = mypy("--follow-imports=silent", str(tmp_path / "mine.py"))
    assert checked.returncode == 1
    assert 'Argument "preface" to "PromptParts" has incompatible type "int"; expected "str"' in checked.stdout
    assert 'Argument 1 to "merged" of "ActionResult" has incompatible type "list[str]"' in checked.stdout
