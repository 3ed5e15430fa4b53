"""LangGraph Studio: `langgraph dev` serves the coop pair graph (langgraph.json) and runs a scripted pair through
planning, execution with messages, and evaluation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from test_coop_evaluate import build_task
from test_coop_messages import LATER, NOTE, pair_scripts
from test_studio import studio  # noqa: F401 (the fixture)


@pytest.mark.slow
def test_langgraph_dev_runs_a_coop_pair(studio: str, tmp_path: Path) -> None:  # noqa: F811
    from langgraph_sdk import get_sync_client

    task, source = build_task(tmp_path)
    client = get_sync_client(url=studio)
    (assistant,) = client.assistants.search(graph_id="coop")
    fields = client.assistants.get_schemas(assistant["assistant_id"])["input_schema"]["properties"]
    assert {"run", "output", "config", "coop"} <= set(fields)
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": pair_scripts(tmp_path / "scripts"),
           "repo_source": str(source)}  # fmt: skip
    inputs = {"run": run, "output": str(tmp_path / "out"), "config": {"environment": {"tools": []}},
              "coop": {"execution": {"lockstep": True}}}  # fmt: skip
    thread = client.threads.create()
    final = client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=inputs, raise_error=True)
    result = final["result"]
    assert (result["merge"]["status"], result["both_passed"]) == ("clean", True)
    assert set(result["seconds"]) == {"planning", "execution", "evaluation"}
    folder = Path(final["folder"])
    assert json.loads((folder / "eval.json").read_text())["both_passed"] is True
    sent = [json.loads(line)["text"] for line in (folder / "messages.jsonl").read_text().splitlines()]
    assert sent == [NOTE, LATER]
    assert final["plans"] == {"1": "three() in pkg/core.py", "2": "four() somewhere"}
