"""LangGraph Studio: `langgraph dev` serves the attempts graph (`llm-ide-attempts`); langgraph_sdk runs it."""

from __future__ import annotations

import asyncio
import subprocess
from pathlib import Path

import pytest
from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, review, scripts
from conftest import make_git_repo
from langgraph.checkpoint.memory import InMemorySaver
from test_studio import studio  # noqa: F401 - the fixture: langgraph dev on a free loopback port

from llm_ide.attempts.studio import graph


def worktrees(repo: Path) -> list[str]:
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True, text=True)
    return [line.removeprefix("worktree ") for line in listed.stdout.splitlines() if line.startswith("worktree ")]


def test_the_attempts_worktrees_go_when_the_served_run_ends(tmp_path: Path) -> None:
    """As the server runs it (in process): each attempt works in a worktree of the repository, removed at the end."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    inputs = {
        "task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"),
        "config": {"environment": {"tools": []}, "attempts": {"max": 1}},
    }  # fmt: skip

    async def run() -> dict:
        async with graph({"configurable": {}}) as compiled:
            served = compiled.copy(update={"checkpointer": InMemorySaver()})
            return await served.ainvoke(inputs, {"configurable": {"thread_id": "worktrees"}})

    final = asyncio.run(run())
    assert final["chosen"] == 1 and "+    return x + x\n" in final["submission"]
    assert (tmp_path / "out" / "attempt1" / f"{final['attempts'][0]['run_id']}.traj.json").is_file()
    assert worktrees(repo) == [str(repo.resolve())] and not (tmp_path / "out" / "attempt1" / "repo").exists()
    assert (repo / "calc.py").read_text() == FILES["calc.py"]  # the user's repository untouched


@pytest.mark.slow
def test_langgraph_dev_runs_the_attempts_graph(studio: str, tmp_path: Path) -> None:  # noqa: F811
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(WRONG), attempt_script(RIGHT)],
                    [review(1, "README only."), review(9, "Fixed.")])  # fmt: skip
    client = get_sync_client(url=studio)
    (assistant,) = client.assistants.search(graph_id="llm-ide-attempts")
    fields = client.assistants.get_schemas(assistant["assistant_id"])["input_schema"]["properties"]
    assert {"task", "repo", "model", "config", "output"} <= set(fields)

    thread = client.threads.create()
    inputs = {
        "task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"),
        "config": {"environment": {"tools": []}, "attempts": {"max": 3}},
    }  # fmt: skip
    parts = list(client.runs.stream(thread["thread_id"], assistant["assistant_id"], input=inputs,
                                    stream_mode=["custom", "values"]))  # fmt: skip
    steps = [(p.data["attempt"], p.data["kind"], p.data["step"]) for p in parts if p.event == "custom"]
    each = [("step", 1), ("step", 2), ("step", 3), ("end", 3)]
    assert steps == [(n, kind, s) for n in (1, 2) for kind, s in each]  # each attempt's steps, live
    final = [p.data for p in parts if p.event == "values"][-1]
    assert [(a["index"], a["score"]) for a in final["attempts"]] == [(1, 1.0), (2, 9.0)]
    assert final["chosen"] == 2 and final["chosen_by"] == "accept_score"
    assert "+    return x + x\n" in final["submission"]
    assert (tmp_path / "out" / "attempt2" / f"{final['attempts'][1]['run_id']}.traj.json").is_file()
    assert worktrees(repo) == [str(repo.resolve())]  # each attempt's removed at the run's end
