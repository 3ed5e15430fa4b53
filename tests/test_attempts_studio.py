"""LangGraph Studio: `langgraph dev` serves the attempts graph (`llm-ide-attempts`); langgraph_sdk runs it."""

from __future__ import annotations

from pathlib import Path

import pytest
from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, review, scripts
from conftest import make_git_repo
from test_studio import studio  # noqa: F401 - the fixture: langgraph dev on a free loopback port


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
