"""LangGraph Studio: `langgraph dev` serves the exported graph and runs it to the end through `langgraph_sdk`."""

from __future__ import annotations

import importlib.util
import os
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from agent_script import act, reflect, single_call, write_script
from conftest import git, make_git_repo, unavailable
from test_tools_install import write_tool

ROOT = Path(__file__).resolve().parents[1]

BUGGY = '''"""Temperature helpers."""


def to_fahrenheit(celsius: float) -> float:
    return celsius * 9 / 5 - 32


def to_celsius(fahrenheit: float) -> float:
    return (fahrenheit - 32) * 5 / 9
'''

TEST = """import unittest

from temps import to_celsius, to_fahrenheit


class TemperatureTest(unittest.TestCase):
    def test_round_trip(self) -> None:
        self.assertEqual(to_fahrenheit(100), 212)
        self.assertEqual(to_celsius(212), 100)
"""

SCRIPT = [
    act("The task names `to_fahrenheit`[1](temps.py:4); read it.", "view", path="temps.py", start_line=1, end_line=10),
    reflect(False, "to_fahrenheit subtracts 32 instead of adding it."),
    act("The offset has the wrong sign[1](temps.py:5).", "edit", path="temps.py", old="9 / 5 - 32", new="9 / 5 + 32"),
    reflect(False, "to_fahrenheit now adds 32."),
    act("Run the tests[1](temps.py:5).", "bash", command="python3 -m unittest -q test_temps 2>&1"),
    reflect(False, "The round-trip test passes.", "Run the unit tests after an edit."),
    act("Fixed and tested; submit.", "submit"),
]
REFUSED = r"^ThreadMismatchError: the thread is a run of another task \('Fix to_fahrenheit.'\); start a new thread"


def wait_for(path: Path) -> str:
    return f"while [ ! -e {path} ]; do sleep 0.05; done"


def require_langgraph_dev() -> None:
    modules = ("langgraph_cli", "langgraph_api", "langgraph_sdk")
    missing = [name for name in modules if importlib.util.find_spec(name) is None]
    if not missing:
        return
    unavailable(f"{', '.join(missing)} not installed (pip install 'llm-ide[studio]')")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(process: subprocess.Popen[bytes], url: str, log: Path, seconds: float = 90) -> str:
    """The server's URL once it answers: langgraph dev takes another port, and says which, when its own was taken
    (free_port freed it, and another worker's bind(0) may be given it before the server binds it)."""
    import httpx

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if moved := re.search(rb"Port \d+ is already in use, using port (\d+) instead", log.read_bytes()):
            url = f"http://127.0.0.1:{int(moved[1])}"
        if process.poll() is not None:
            pytest.fail(f"langgraph dev exited with {process.returncode}:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"{url}/ok", timeout=2).status_code == 200:
                return url
        except httpx.TransportError:
            pass
        time.sleep(0.3)
    pytest.fail(f"langgraph dev did not answer on {url} within {seconds}s:\n{log.read_text()[-3000:]}")


def stop(process: subprocess.Popen[bytes]) -> int:
    """SIGINT (Ctrl-C) to the server's process group, SIGKILL if it does not exit in time."""
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGINT)
        try:
            return process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
    return process.wait()


def gated_run(tmp_path: Path, first: str = "") -> tuple[Path, Path, str]:
    """A repository, the gate its run's first command waits for (after `first`), and the scripted model: that command,
    a view, submit."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    gate = tmp_path / "gate"
    command = f"{first}while [ ! -e {gate} ]; do sleep 0.05; done; echo let go"
    steps = [
        act("Wait for the build.", "bash", command=command),
        reflect(False, "The build is done."),
        act("Read it[1](temps.py:4).", "view", path="temps.py", start_line=1, end_line=10),
        reflect(False, "Read."),
        act("Done.", "submit"),
    ]
    return repo, gate, write_script(tmp_path / "script.yaml", single_call(steps))


@pytest.fixture
def studio(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[str]:
    """`langgraph dev` on a free loopback port, serving the repository's langgraph.json (it keeps its in-memory
    store in ROOT/.langgraph_api, which is git-ignored); an indirect parametrize adds to its environment."""
    require_langgraph_dev()
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "langgraph-dev.log"
    server_tmp = tmp_path / "server-tmp"  # the server's temporary files: a run's leftovers would show here
    server_tmp.mkdir()
    env = {**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_CLI_NO_ANALYTICS": "1", "PYTHONUNBUFFERED": "1"}
    env["TMPDIR"] = str(server_tmp)
    env.update(getattr(request, "param", {}))
    command = [sys.executable, "-m", "langgraph_cli", "dev", "--no-browser", "--no-reload"]
    command += ["--host", "127.0.0.1", "--port", str(port)]
    with log.open("wb") as output:
        process = subprocess.Popen(
            command, cwd=ROOT, env=env, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
        )
    try:
        yield wait_ready(process, url, log)
    finally:
        stop(process)
    assert process.returncode is not None


@pytest.mark.slow
def test_langgraph_dev_runs_the_graph(studio: str, tmp_path: Path) -> None:
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    model = write_script(tmp_path / "script.yaml", SCRIPT)
    client = get_sync_client(url=studio)

    (assistant,) = client.assistants.search(graph_id="llm-ide")
    schemas = client.assistants.get_schemas(assistant["assistant_id"])
    fields = schemas["input_schema"]["properties"]
    assert {"task", "repo", "model", "base_url", "config"} <= set(fields)
    assert fields["config"]["type"] == "object"
    assert {fields[name]["type"] for name in ("task", "repo", "model", "base_url")} == {"string"}
    assert "operations" in schemas["state_schema"]["properties"]

    thread = client.threads.create()
    task = "`to_fahrenheit(100)` returns 148 instead of 212. Fix it so that `python3 -m unittest test_temps` passes."
    inputs = {
        "task": task,
        "repo": str(repo),
        "model": model,
        "config": {"environment": {"tools": []}},
    }
    final = client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=inputs, raise_error=True)

    assert final["exit_status"] == "submitted"
    assert final["submission"].startswith("diff --git a/temps.py b/temps.py")
    assert "+    return celsius * 9 / 5 + 32" in final["submission"]
    assert final["n_operations"] == 4
    operations = final["operations"]
    assert [op["action_type"] for op in operations] == ["view", "edit", "bash", "submit"]
    assert [op["parent_id"] for op in operations] == [None, 0, 1, 2]
    assert [op["bad_action"] for op in operations] == [False, False, False, None]
    assert "5\t    return celsius * 9 / 5 - 32" in operations[0]["observation"]
    assert "OK" in operations[2]["observation"]
    assert operations[2]["returncode"] == 0
    assert final["usage"]["api_calls"] == len(single_call(SCRIPT))  # one call per step
    assert any(chunk["file_path"] == "temps.py" for chunk in final["code_context"])
    assert "return celsius * 9 / 5 + 32" in (repo / "temps.py").read_text()
    assert git(repo, "diff", "--stat").strip().startswith("temps.py")

    (run,) = client.runs.list(thread["thread_id"])
    assert run["status"] == "success"
    state = client.threads.get_state(thread["thread_id"])
    assert state["next"] == []
    assert state["values"]["operations"] == operations
    history = client.threads.get_history(thread["thread_id"], limit=200)
    counts = [len(snapshot["values"].get("operations", [])) for snapshot in reversed(history)]
    assert counts == sorted(counts)
    assert set(counts) == {0, 1, 2, 3, 4}


@pytest.mark.slow
def test_a_failing_run_closes_its_environment_and_the_client_gets_the_message(studio: str, tmp_path: Path) -> None:
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    model = write_script(tmp_path / "script.yaml", SCRIPT[:3])  # edits, then the model has nothing more to say
    client = get_sync_client(url=studio)
    (assistant,) = client.assistants.search(graph_id="llm-ide")
    thread = client.threads.create()
    inputs = {"task": "Fix to_fahrenheit.", "repo": str(repo), "model": model, "config": {"environment": {"tools": []}}}
    final = client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=inputs, raise_error=True)

    assert final["exit_status"] == "model_error"
    assert final["error"] == f"scripted model ran out of responses after 2 calls ({tmp_path / 'script.yaml'})"
    assert "+    return celsius * 9 / 5 + 32" in final["submission"]
    assert list((tmp_path / "server-tmp").glob("llm-ide-*")) == []  # the run's tools folder went with it

    bad = {**inputs, "config": {"agent": {"step_limt": 3}}}
    failed = client.runs.create(client.threads.create()["thread_id"], assistant["assistant_id"], input=bad)
    client.runs.join(failed["thread_id"], failed["run_id"])
    state = client.threads.get_state(failed["thread_id"])["values"]
    assert (state["exit_status"], state["error"]) == (
        "error",
        "the graph input's `config`: agent.step_limt: unknown setting (did you mean step_limit?)",
    )


@pytest.mark.slow
def test_a_run_interrupted_while_it_sets_up_leaves_nothing_open(studio: str, tmp_path: Path) -> None:
    """The server closed what the run had opened when it was interrupted (nothing yet) while the node's thread went
    on setting up an environment that no one closed: its folders, its cgroup, its processes, until the server's exit."""
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY})
    setting_up, gate = repo / "setting-up", tmp_path / "gate"  # (the repository: what a command writes)
    tool = write_tool(tmp_path / "tools", "gated", setup_script=f"touch {setting_up}; {wait_for(gate)}")
    model = write_script(tmp_path / "script.yaml", single_call([act("Nothing to change.", "submit")]))
    inputs = {"task": "Fix it.", "repo": str(repo), "model": model, "config": {"environment": {"tools": [str(tool)]}}}
    client = get_sync_client(url=studio)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "llm-ide", input=inputs)
    subprocess.run(["bash", "-c", wait_for(setting_up)], timeout=300, check=True)
    client.runs.cancel(thread, run["run_id"], wait=True, action="interrupt")
    gate.touch()
    assert client.runs.wait(thread, "llm-ide", input=None)["exit_status"] == "submitted"
    assert list((tmp_path / "server-tmp").glob("llm-ide-*")) == []


@pytest.mark.slow
def test_the_sampled_graph_runs_the_discriminators_pick(studio: str, tmp_path: Path) -> None:
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    view, edit, test = SCRIPT[0], SCRIPT[2], SCRIPT[4]
    submit = SCRIPT[6]
    script = [view, test, view, "<choice>2</choice>"]  # two distinct candidates: the discriminator picks the tests
    script += [reflect(False, "The round-trip test fails."), edit, edit, edit]  # three identical: no choosing call
    script += [reflect(False, "Fixed."), submit, submit, submit]
    model = write_script(tmp_path / "script.yaml", script)
    client = get_sync_client(url=studio)
    (assistant,) = client.assistants.search(graph_id="llm-ide-sampled")
    config = {"environment": {"tools": []}, "sampling": {"k": 3}, "agent": {"single_call": False}}  # as scripted
    inputs = {"task": "Fix to_fahrenheit.", "repo": str(repo), "model": model, "config": config}
    final = client.runs.wait(client.threads.create()["thread_id"], assistant["assistant_id"], input=inputs)

    assert final["exit_status"] == "submitted"
    operations = final["operations"]
    assert [op["action_type"] for op in operations] == ["bash", "edit", "submit"]
    assert [(c["action_type"], c["samples"], c["chosen"]) for c in operations[0]["marks"]["candidates"]] == [
        ("view", 2, False),
        ("bash", 1, True),
    ]
    choices = [operation["marks"]["choice"]["method"] for operation in operations]  # the state: marks on a node
    assert choices[:2] == ["ask_colleagues", "unanimous"]
    assert final["usage"]["api_calls"] == len(script)
    assert "+    return celsius * 9 / 5 + 32" in final["submission"]


EMPTY_TASK = "the task is empty: say what the agent should do"


@pytest.mark.slow
def test_the_input_schemas_mark_what_is_required_and_a_missing_task_is_one_clear_error(
    studio: str, tmp_path: Path
) -> None:
    from langgraph_sdk import get_sync_client

    client = get_sync_client(url=studio)
    for graph_id in ("llm-ide", "llm-ide-sampled", "llm-ide-navigator", "llm-ide-attempts"):
        (assistant,) = client.assistants.search(graph_id=graph_id)
        schema = client.assistants.get_schemas(assistant["assistant_id"])["input_schema"]
        assert schema["required"] == ["task", "repo", "model"], graph_id
        assert {"base_url", "config"} <= set(schema["properties"]) - set(schema["required"])

    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    model = write_script(tmp_path / "script.yaml", SCRIPT)
    (assistant,) = client.assistants.search(graph_id="llm-ide")
    for inputs, line in [
        ({"repo": str(repo), "model": model}, EMPTY_TASK),  # (a task not given reads "" in the graph's state)
        ({"task": "  ", "repo": str(repo)}, "the graph input needs `model` (as for --model, e.g. scripted:PATH)"),
        ({"task": "  ", "repo": str(repo), "model": model}, EMPTY_TASK),  # as at every door
    ]:
        thread = client.threads.create()
        final = client.runs.wait(thread["thread_id"], assistant["assistant_id"], input=inputs, raise_error=True)
        assert (final["exit_status"], final["error"]) == ("error", line)
        assert final.get("operations", []) == [] and final["submission"] == ""
    (run,) = client.runs.list(thread["thread_id"])
    assert run["status"] == "success"  # the error is the run's outcome, told in its state: no traceback

    (attempts,) = client.assistants.search(graph_id="llm-ide-attempts")  # the same outcome (the server's run failed)
    inputs = {"repo": str(repo), "model": model, "output": str(tmp_path / "attempts")}
    thread = client.threads.create()
    final = client.runs.wait(thread["thread_id"], attempts["assistant_id"], input=inputs, raise_error=True)
    assert (final["exit_status"], final["error"]) == ("error", EMPTY_TASK)
    assert final.get("attempts", []) == [] and not (tmp_path / "attempts").exists()
    (run,) = client.runs.list(thread["thread_id"])
    assert run["status"] == "success"


@pytest.mark.slow
def test_a_served_thread_cut_mid_step_resumes_on_its_task_and_stays_readable_after_a_refusal(
    studio: str, tmp_path: Path
) -> None:
    from langgraph_sdk import get_sync_client

    repo, gate, model = gated_run(tmp_path)
    inputs = {"task": "Fix to_fahrenheit.", "repo": str(repo), "model": model, "config": {"environment": {"tools": []}}}
    client = get_sync_client(url=studio)
    thread = client.threads.create()["thread_id"]
    run_id = ""
    for chunk in client.runs.stream(thread, "llm-ide", input=inputs, stream_mode="custom", on_disconnect="continue"):
        if chunk.event == "metadata":
            run_id = chunk.data["run_id"]
        if chunk.event == "custom" and chunk.data["event"] == "command" and chunk.data["kind"] == "start":
            client.runs.cancel(thread, run_id, wait=True, action="interrupt")
            break
    cut = client.threads.get_state(thread)
    assert cut["next"] == ["execute_tool"] and cut["values"]["usage"]["api_calls"] == 1

    other = {**inputs, "task": "Another task entirely."}
    with pytest.raises(Exception, match=REFUSED):
        client.runs.wait(thread, "llm-ide", input=other)
    kept = client.threads.get_state(thread)  # was HTTP 400: the refused input's writes were kept and met again
    assert (kept["values"], kept["next"], kept["checkpoint"]) == (cut["values"], cut["next"], cut["checkpoint"])

    gate.touch()
    final = client.runs.wait(thread, "llm-ide", input=inputs)  # the task again, as Studio's form sends it: resumed
    assert (final.get("exit_status"), final["usage"]["api_calls"]) == ("submitted", 3), final  # was 4: asked again
    assert [op["action_type"] for op in final["operations"]] == ["bash", "view", "submit"]
    assert final["operations"][0]["observation"].strip().endswith("let go")

    with pytest.raises(Exception, match=REFUSED):
        client.runs.wait(thread, "llm-ide", input=other)
    ended = client.threads.get_state(thread)
    assert {key: ended["values"][key] for key in final} == final and ended["next"] == []


@pytest.mark.slow
@pytest.mark.parametrize("studio", [{"LANGGRAPH_STRICT_MSGPACK": "true"}], indirect=True)
def test_a_run_interrupted_and_resumed_under_strict_msgpack_reads_its_own_state(studio: str, tmp_path: Path) -> None:
    """The server copies the graph with its checkpointer: the copy lost the types of the state that LangGraph allows
    under LANGGRAPH_STRICT_MSGPACK (OperationNode), read back as dicts ("'dict' object has no attribute
    'action_type'")."""
    from langgraph_sdk import get_sync_client

    repo, gate, model = gated_run(tmp_path, "touch started; ")
    inputs = {"task": "Fix it.", "repo": str(repo), "model": model, "config": {"environment": {"tools": []}}}
    client = get_sync_client(url=studio)
    thread = client.threads.create()["thread_id"]
    run = client.runs.create(thread, "llm-ide", input=inputs)
    subprocess.run(["bash", "-c", wait_for(repo / "started")], timeout=300, check=True)
    client.runs.cancel(thread, run["run_id"], wait=True, action="interrupt")
    gate.touch()
    final = client.runs.wait(thread, "llm-ide", input=None, raise_error=True)
    assert (final["exit_status"], [op["action_type"] for op in final["operations"]]) == (
        "submitted",
        ["bash", "view", "submit"],
    )
    assert "Blocked deserialization" not in (tmp_path / "langgraph-dev.log").read_text()
