"""LangGraph Studio: `langgraph dev` serves the coop pair graph (langgraph.json) and runs a scripted pair through
planning, execution with messages, and evaluation."""

from __future__ import annotations

import json
import os
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
PAIR = '{{"task": folder, "pair": [i, j], "setting", "model", "repo_source"}}'
FILE_SAID = "it is a file, not a folder: give a folder (it is created if missing)"


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"run": None}, f"the graph input needs `run` (the pair: {PAIR})"),
        ({"run": {}}, f"the graph input needs `run` (the pair: {PAIR})"),
        ({"run": "task7"}, f"the graph input's `run` must be a mapping of the pair ({PAIR}), not str 'task7'"),
        ({"output": 5}, "the graph input's `output` must be the folder of the pair's files, as text, not int 5"),
        ({"config": "x", "coop": []}, "the graph input's `config` must be a mapping of agent settings, as a --config "
         "file holds, not str 'x'; `coop` must be a mapping of coop settings, as coop.yaml holds, not list []"),
        ({"run.pair": DROP}, "the graph input's `run.pair`: field required"),
        ({"run.pair": [1]}, "the graph input's `run.pair.1`: field required"),
        ({"run.pair": [2, 2]}, "the graph input's `run.pair`: [2, 2]: give two different features"),
        ({"run.pair": [1, 9]}, "the graph input's `run.pair`: {tmp}/dataset/demo_task/task7: no feature9 (features: "
         "1, 2, 3, 4)"),
        ({"run.k": -1}, "the graph input's `run.k`: input should be greater than or equal to 0"),
        ({"run.environment": "vm"}, "the graph input's `run.environment`: unknown environment 'vm': choose one of "
         "local, docker"),
        ({"run.repo_sorce": "x"}, "the graph input's `run.repo_sorce`: unknown field (use task, pair, setting, model, "
         "k, repo_source, base_url, environment)"),
        ({"run.task": "{tmp}/nowhere"}, "the graph input's `run.task`: task folder not found: {tmp}/nowhere"),
        ({"run.task": "{tmp}/nowhere", "run.repo_source": DROP},
         "the graph input's `run.task`: task folder not found: {tmp}/nowhere"),
        ({"run.model": ""}, "the graph input's `run.model`: no model: give one"),
        ({"run.model": "scripted:{tmp}/none.yaml"}, "the graph input's `run.model`: scripted model: file not found: "
         "{tmp}/none.yaml"),
        ({"run.repo_source": "{tmp}/nowhere"}, "the graph input's `run.repo_source`: {tmp}/nowhere: neither a git "
         "repository nor a bundle"),
        ({"run.repo_source": "{tmp}/a-file"}, "the graph input's `run.repo_source`: {tmp}/a-file: neither a git "
         "repository nor a bundle"),
        ({"output": "{tmp}/a-file"}, f"the graph input's `output`: {{tmp}}/a-file: {FILE_SAID}"),
        ({"output": "{tmp}/a-file/pairs"}, "the graph input's `output`: {tmp}/a-file/pairs: {tmp}/a-file is a file, "
         "not a folder: give a folder (it is created if missing)"),
        ({"config": {"agent": {"step_limt": 3}}},
         "the graph input's `config`: agent.step_limt: unknown setting (did you mean step_limit?)"),
        ({"config": {"navigator": {"mode": "human"}}}, "the graph input's `config`: navigator.mode human: nobody "
         "answers a coop run's agents; use navigator.mode model or mcp"),
        ({"coop": {"planning": {"max_iterations": "many"}}},
         "the graph input's `coop`: planning.max_iterations: input should be a valid integer (got 'many')"),
    ],
)  # fmt: skip
def test_the_pair_graphs_input_is_checked_before_anything_runs(tmp_path: Path, given: dict, said: str) -> None:
    """Studio's form for the coop graph: a missing `run` was KeyError 'run' ("An internal error occurred"), a field of
    it a pydantic dump or never checked (a pair with no such feature, a negative k, an unknown field), a setting's,
    a model's or the source's mistake found after the checkout, an output that is a file NotADirectoryError."""
    from llm_ide.coop.pair import build_pair_graph
    from llm_ide.inputs import InputError

    task, source = build_task(tmp_path)
    (tmp_path / "a-file").write_text("not a folder")
    model = pair_scripts(tmp_path / "scripts")
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": model, "repo_source": str(source)}
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
    assert str(raised.value).startswith(said.format(tmp=tmp_path)), str(raised.value)
    assert "\n" not in str(raised.value) and "Traceback" not in str(raised.value)
    assert not (tmp_path / "out").exists() and (tmp_path / "a-file").read_text() == "not a folder"  # nothing made


@pytest.mark.parametrize(
    ("field", "said"),
    [
        ("cop", "the graph input's `cop`: unknown field (did you mean coop?; use run, output, config, coop)"),
        ("outputs", "the graph input's `outputs`: unknown field (did you mean output?; use run, output, config, coop)"),
    ],
)
def test_the_served_pair_graph_refuses_an_input_field_of_no_such_name(tmp_path: Path, field: str, said: str) -> None:
    """LangGraph dropped it unsaid (`cop`: the pair run with coop.yaml's settings): refused as the pair graph's other
    input mistakes are, before anything is made, as the agent graphs refuse theirs."""
    import asyncio

    from llm_ide.coop.pair import graph

    task, source = build_task(tmp_path)
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": pair_scripts(tmp_path / "scripts"),
           "repo_source": str(source)}  # fmt: skip
    inputs = {"run": run, "output": str(tmp_path / "out"), field: {"execution": {"lockstep": True}}}
    final = asyncio.run(graph({}).ainvoke(inputs, {"configurable": {"thread_id": "t"}}))
    assert (final["exit_status"], final["error"]) == ("error", said) and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("given", "said"),
    [
        ({"run": None}, "the graph input needs `run` (the pair: {pair})"),
        ({"run.model": "nosuch:model"}, "the graph input's `run.model`: model nosuch:model: unknown provider 'nosuch'"),
        ({"run.pair": [1, 9]}, "the graph input's `run.pair`: "),
    ],
)
@pytest.mark.parametrize("way", ["ainvoke", "invoke"])
def test_the_served_pair_graph_ends_the_run_with_its_error_as_the_agent_graphs_do(
    tmp_path: Path, given: dict, said: str, way: str
) -> None:
    """A bad input was an InputError the server made the run's failure (Studio showed `__error__`), where the agent
    and attempts graphs end the run, its `exit_status` error and the line its `error`: the pair graph now does too
    (the pair graph itself, as `coop run` runs it, still raises)."""
    import asyncio

    from llm_ide.coop.pair import graph

    task, source = build_task(tmp_path)
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": pair_scripts(tmp_path / "scripts"),
           "repo_source": str(source)}  # fmt: skip
    inputs = {"run": run, "output": str(tmp_path / "out")}
    for key, value in given.items():
        run[key.removeprefix("run.")] = value if key.startswith("run.") else None
        inputs |= {} if key.startswith("run.") else {key: value}
    served, config = graph({}), {"configurable": {"thread_id": "t"}}
    final = asyncio.run(served.ainvoke(inputs, config)) if way == "ainvoke" else served.invoke(inputs, config)
    assert final["exit_status"] == "error" and final["error"].startswith(said.format(pair=PAIR.format()))
    assert "folder" not in final and "result" not in final and not (tmp_path / "out").exists()


@pytest.mark.parametrize("beside", [True, False])
def test_the_pair_graph_takes_the_bundle_beside_the_dataset_as_coop_run_does(tmp_path: Path, beside: bool) -> None:
    """`run.repo_source` left out: the one `repos/*.bundle` beside the dataset, as `llm-ide coop run` without
    `--repo-source` (was `field required`); without one, one line naming the field."""
    import subprocess

    from llm_ide.coop.pair import build_pair_graph
    from llm_ide.inputs import InputError

    task, source = build_task(tmp_path)
    bundle = tmp_path / "repos" / "demo.bundle"
    if beside:
        bundle.parent.mkdir()
        subprocess.run(["git", "-C", str(source), "bundle", "create", str(bundle), "--all"], check=True)
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": pair_scripts(tmp_path / "scripts")}
    inputs = {"run": run, "output": str(tmp_path / "out"), "config": {"environment": {"tools": []}}}
    if not beside:
        with pytest.raises(InputError, match=r"^the graph input's `run.repo_source`: no repository source: give "):
            build_pair_graph().invoke(inputs, {"configurable": {"thread_id": "t"}})
        return
    final = build_pair_graph().invoke(inputs, {"configurable": {"thread_id": "t"}})
    assert json.loads((Path(final["folder"]) / "run.json").read_text())["repo_source"] == str(bundle)
    assert final["result"]["merge"]["status"] in ("clean", "conflicts")


@pytest.mark.parametrize("case", ["no key", "another task"])
def test_the_pair_graph_names_its_inputs_fields_not_coop_runs_options(
    tmp_path: Path, case: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The coop graph's user, who gives `run.base_url` and `output`, was told of "--base-url" (a model's key or
    endpoint) and "choose another --output" (a folder holding another task's pair), `coop run`'s options."""
    from llm_ide.coop.pair import graph

    task, source = build_task(tmp_path)
    model = "local-model" if case == "no key" else pair_scripts(tmp_path / "scripts")
    run = {"task": str(task), "pair": [1, 2], "setting": "coop", "model": model, "repo_source": str(source)}
    for name in [key for key in os.environ if key.startswith("OPENAI_")]:
        monkeypatch.delenv(name)
    folder = tmp_path / "out" / "demo_task7_f1_f2_coop_k0"
    if case == "another task":
        folder.mkdir(parents=True)
        (folder / "run.json").write_text(json.dumps({"task": str(tmp_path / "another")}))
    final = graph({}).invoke({"run": run, "output": str(tmp_path / "out")}, {"configurable": {"thread_id": "t"}})
    said = {
        "no key": "the graph input's `run.model`: model local-model: OPENAI_API_KEY is not set (for a keyless local "
        "server give the graph input's `run.base_url` or OPENAI_BASE_URL)",
        "another task": f"{folder} holds a run of another task; give the graph input's `output` another folder",
    }[case]
    assert (final["exit_status"], final["error"]) == ("error", said)
