"""Attempts at one task (issue 11), driven by the scripted model in the local environment (a git worktree each)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, review, scripts
from conftest import make_git_repo

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config

NO_TOOLS = {"environment": {"tools": []}}


def settings(**attempts):
    return load_config("default", **NO_TOOLS, attempts=attempts)


def prompts(output: Path, index: int) -> list[str]:
    path = output / f"attempt{index}" / f"T-attempt{index}.calls.jsonl.gz"
    with gzip.open(path, "rt") as log:
        return [json.loads(line)["prompt"] for line in log if line.strip()]


def test_the_reviewer_stops_at_the_accepted_attempt_and_its_critique_reaches_the_next(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(
        tmp_path / "scripts",
        [attempt_script(WRONG, "The README is not the code."), attempt_script(RIGHT), attempt_script(RIGHT)],
        [review(2, "The patch only edits the README; calc.double still adds 1."), review(9, "Removes the + 1.")],
    )
    result = run_attempts(TASK, model=model, settings=settings(max=3), output_dir=tmp_path / "out", run_id="T",
                          repo=repo)  # fmt: skip
    assert result.exit_status == "submitted"
    assert [a["index"] for a in result.attempts] == [1, 2]  # accepted at 2: no third attempt
    assert [a["score"] for a in result.attempts] == [2.0, 9.0]
    assert result.chosen == 2
    assert "-    return x + x + 1  # BUG\n+    return x + x" in result.submission
    assert "README" not in result.submission
    assert (repo / "calc.py").read_text() == FILES["calc.py"]  # each attempt worked in its own worktree

    second = prompts(tmp_path / "out", 2)[0]
    lessons = second.split("## Lessons Learned", 1)[1]
    assert "Attempt 1 (submitted, review score 2/10) was not accepted: The patch only edits the README" in lessons
    assert "- The README is not the code." in lessons
    assert "Lessons Learned" in prompts(tmp_path / "out", 1)[0]
    assert "The README is not the code" not in prompts(tmp_path / "out", 1)[0]

    traj = json.loads(result.trajectory_path.read_text())
    outcomes = [(a["index"], a["chosen"], a["score"]) for a in traj["info"]["attempts"]]
    assert outcomes == [(1, False, 2.0), (2, True, 9.0)]
    assert traj["info"]["choice"]["by"] == "accept_score"
    assert {op["attempt"] for op in traj["operations"]} == {1, 2}
    assert [c["kind"] for c in traj["model_calls"] if c["kind"] in ("review", "choose")] == ["review", "review"]
    review_prompt = next(c["prompt"] for c in traj["model_calls"] if c["kind"] == "review")
    assert "double(2) = 5" in review_prompt  # the attempt's test output reached the reviewer
    assert "README.md" in review_prompt and "The README is not the code." in review_prompt
