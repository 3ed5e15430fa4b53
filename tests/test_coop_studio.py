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


DROP = object()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"run": None}, "the graph input's `run` must be a mapping of the pair ({{\"task\": folder, \"pair\": [i, j], "
         "\"setting\", \"model\", \"repo_source\"}})"),
        ({"run": "task7"}, "the graph input's `run` must be a mapping of the pair"),
        ({"output": 5}, "the graph input's `output` must be the folder of the pair's files, as text"),
        ({"config": "x", "coop": []}, "the graph input's `config` must be a mapping of agent settings, as a --config "
         "file holds; `coop` must be a mapping of coop settings, as coop.yaml holds"),
        ({"run.pair": DROP}, "the graph input's `run.pair`: field required"),
        ({"run.pair": [1]}, "the graph input's `run.pair.1`: field required"),
        ({"run.task": "{tmp}/nowhere"}, "the graph input's `run.task`: task folder not found: {tmp}/nowhere"),
        ({"config": {"agent": {"step_limt": 3}}},
         "the graph input's `config`: agent.step_limt: unknown setting (did you mean step_limit?)"),
        ({"coop": {"planning": {"max_iterations": "many"}}},
         "the graph input's `coop`: planning.max_iterations: input should be a valid integer (got 'many')"),
    ],
)  # fmt: skip
def test_the_pair_graphs_input_is_checked_before_anything_runs(tmp_path: Path, given: dict, said: str) -> None:
    """Studio's form for the coop graph: a missing `run` was KeyError 'run' ("An internal error occurred"), a field of
    it a pydantic dump, a setting's mistake found after the checkout."""
    from llm_ide.coop.pair import build_pair_graph
    from llm_ide.inputs import InputError

    task, source = build_task(tmp_path)
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": "scripted:x.yaml", "repo_source": str(source)}
    inputs = {"run": run, "output": str(tmp_path / "out")}
    for key, value in given.items():
        value = value.format(tmp=tmp_path) if isinstance(value, str) else value
        target, name = (run, key.removeprefix("run.")) if key.startswith("run.") else (inputs, key)
        if value is DROP:
            del target[name]
        else:
            target[name] = value
    with pytest.raises(InputError) as raised:
        build_pair_graph().invoke(inputs, {"configurable": {"thread_id": "t"}})
    assert str(raised.value).startswith(said.format(tmp=tmp_path)) and "\n" not in str(raised.value)
    assert not (tmp_path / "out").exists()  # nothing made: no folder, no checkout
