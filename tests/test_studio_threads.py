"""The graph LangGraph Studio serves (llm_ide.studio), run in process as the server runs it: a thread is one task's,
its input is checked as the command line checks its options, and its stream says what the console says (setting up,
the baseline and its warning, a model call's retry)."""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import pytest
from agent_script import act, single_call, write_script
from conftest import make_git_repo
from langgraph.checkpoint.memory import InMemorySaver
from openai_server import OpenAIServer, Reply
from test_studio import BUGGY, SCRIPT, TEST

from llm_ide import studio
from llm_ide.attempts import studio as attempts_studio
from llm_ide.coop import pair
from llm_ide.errors import ThreadMismatchError
from llm_ide.studio import graph

TASK = "Fix to_fahrenheit."
QUIET = {"environment": {"tools": []}}


def served_run(
    saver: InMemorySaver, thread: str, inputs: dict[str, Any] | None, stop_before: tuple[str, ...] = ()
) -> tuple[dict[str, Any], list[dict]]:
    """One server run on `thread` (the graph made anew, as the server's factory makes it for each run): its final
    values and its custom events; `stop_before`: the nodes it is interrupted before (as a client can ask)."""

    async def run() -> tuple[dict[str, Any], list[dict]]:
        async with graph({"configurable": {}}) as compiled:
            served = compiled.copy(update={"checkpointer": saver})
            config = {"configurable": {"thread_id": thread, "graph_id": "llm-ide"}}  # as the server's
            values: dict[str, Any] = {}
            events: list[dict] = []
            modes = ["custom", "values"]
            async for mode, chunk in served.astream(inputs, config, stream_mode=modes, interrupt_before=stop_before):
                if mode == "values":
                    values = chunk
                else:
                    events.append(chunk)
            return values, events

    return asyncio.run(run())


def notes(events: list[dict]) -> list[tuple[str, str]]:
    return [(event["level"], event["text"]) for event in events if event["event"] == "note"]


@pytest.fixture(autouse=True)
def own_tmp(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The server's temporary folder (a thread's models keep their place under it) is the test's."""
    server_tmp = tmp_path / "server-tmp"
    server_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(server_tmp))
    return server_tmp


def test_a_thread_says_its_setting_up_and_refuses_a_run_of_another_task_keeping_its_outcome(
    tmp_path: Path, own_tmp: Path
) -> None:
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    (repo / "notes.txt").write_text("mine\n")  # not committed: the patch will hold it, as the console warns
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": QUIET}
    saver = InMemorySaver()

    first, events = served_run(saver, "t1", inputs)
    assert first["exit_status"] == "submitted" and "+mine" in first["submission"]
    said = notes(events)
    assert said[0] == ("info", "starting environment") and ("info", "installing tools") not in said  # (no tools)
    assert said[1][1].startswith("the commands use Python ")  # the environment's notes, as on the console
    assert said[-2][1].startswith("baseline: commit ")
    assert said[-1] == ("warning", said[-1][1]) and said[-1][1].startswith("warning: the repository has uncommitted ")
    assert "(notes.txt)" in said[-1][1] and sum(level == "warning" for level, _ in said) == 1

    refused = r"^the thread is a run of another task \('Fix to_fahrenheit.'\); start a new thread \(or give the same "
    thread = {"configurable": {"thread_id": "t1"}}
    checkpoints = len(list(saver.list(thread)))
    with pytest.raises(ThreadMismatchError, match=refused):
        served_run(saver, "t1", {**inputs, "task": "Another task entirely."})
    ended, events = served_run(saver, "t1", None)  # the refusal left nothing for `null` to meet: the thread's outcome
    assert (ended["exit_status"], ended["submission"], events) == ("submitted", first["submission"], [])
    assert len(list(saver.list(thread))) == checkpoints and not saver.get_tuple(thread).pending_writes
    kept = saver.get_tuple(thread).checkpoint["channel_values"]
    assert (kept["task"], kept["exit_status"], kept["submission"]) == (TASK, "submitted", first["submission"])
    again, events = served_run(saver, "t1", inputs)  # the same task: the thread's outcome, nothing run again
    assert {key: again[key] for key in ("exit_status", "submission", "usage", "operations")} == {
        key: first[key] for key in ("exit_status", "submission", "usage", "operations")
    }
    assert list(own_tmp.iterdir()) == []  # the ended thread's folder went, and the refused run made none


@pytest.mark.parametrize("again", ["the same task", "null"])
def test_a_thread_cut_before_its_action_ran_runs_that_action_when_given_its_task_again(
    tmp_path: Path, again: str
) -> None:
    """Given its task again (what Studio's form sends), a thread cut as its step's action was about to run started
    the step over: a model call more, and the action the model had chosen never ran; `null` resumed it."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": QUIET}
    saver = InMemorySaver()
    cut, _ = served_run(saver, "t1", inputs, stop_before=("execute_tool",))
    assert cut.get("exit_status") is None and cut["usage"]["api_calls"] == 1
    final, _ = served_run(saver, "t1", inputs if again == "the same task" else None)
    assert (final["exit_status"], final["usage"]["api_calls"]) == ("submitted", 4)  # the script's four replies
    assert [op.action_type for op in final["operations"]] == ["view", "edit", "bash", "submit"]
    assert "+    return celsius * 9 / 5 + 32" in final["submission"]


def run_as(way: str, made: Any, inputs: Any, config: dict[str, Any]) -> Any:
    """`made` run on `inputs` one of the four ways a compiled graph runs (the sync ones in a thread of their own)."""
    if way == "ainvoke":
        return made.ainvoke(inputs, config)
    if way == "astream":
        return collected(made.astream(inputs, config))
    runner = made.invoke if way == "invoke" else lambda *args: list(made.stream(*args))
    return asyncio.to_thread(runner, inputs, config)


async def collected(chunks: Any) -> list[Any]:
    return [chunk async for chunk in chunks]


WAYS = ["ainvoke", "astream", "invoke", "stream"]


@pytest.mark.parametrize("way", WAYS)
def test_a_cut_thread_given_its_task_again_resumes_its_step_whichever_way_it_is_run(tmp_path: Path, way: str) -> None:
    """invoke and stream (sync) skipped the served graph's look at the thread: the task given again started the cut
    step over (a model call more, the chosen action never run), as astream had until it was checked there."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": QUIET}
    saver = InMemorySaver()
    served_run(saver, "t1", inputs, stop_before=("execute_tool",))
    config = {"configurable": {"thread_id": "t1", "graph_id": "llm-ide"}}
    asyncio.run(run_as_served(way, saver, inputs, config))
    final = saver.get_tuple(config).checkpoint["channel_values"]
    assert (final["exit_status"], final["usage"]["api_calls"]) == ("submitted", 4)
    with pytest.raises(ThreadMismatchError, match="^the thread is a run of another task"):
        asyncio.run(run_as_served(way, saver, {**inputs, "task": "Another task entirely."}, config))


async def run_as_served(way: str, saver: InMemorySaver, inputs: Any, config: dict[str, Any]) -> Any:
    async with graph({"configurable": {}}) as compiled:
        return await run_as(way, compiled.copy(update={"checkpointer": saver}), inputs, config)


@pytest.mark.parametrize("way", WAYS)
@pytest.mark.parametrize("other", ["llm-ide-attempts", "coop"])
def test_a_thread_resumed_with_another_graph_says_which_graph_it_is_of(tmp_path: Path, other: str, way: str) -> None:
    """An `llm-ide` thread cut before its action, resumed (`null`) with the attempts or the coop graph: a run that met
    none of its nodes, no outcome and no error; now one line naming the thread's graph, the thread as it was. The
    sync ways (invoke, stream) were not checked: the check was astream's alone."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": QUIET}
    saver = InMemorySaver()
    served_run(saver, "t1", inputs, stop_before=("execute_tool",))
    config = {"configurable": {"thread_id": "t1", "graph_id": other}}
    kept = saver.get_tuple(config).checkpoint["id"]

    async def resume() -> None:
        async with contextlib.AsyncExitStack() as stack:
            made = pair.graph({}) if other == "coop" else await stack.enter_async_context(attempts_studio.graph({}))
            await run_as(way, made.copy(update={"checkpointer": saver}), None, config)

    said = f"^the thread is a run of the 'llm-ide' graph, not of '{other}'; run it with that graph \\(or start a new"
    with pytest.raises(ThreadMismatchError, match=said):
        asyncio.run(resume())
    assert saver.get_tuple(config).checkpoint["id"] == kept
    final, _ = served_run(saver, "t1", None)
    assert (final["exit_status"], final["usage"]["api_calls"]) == ("submitted", 4)


def test_a_thread_stopped_at_its_step_limit_goes_on_when_given_its_task_with_a_higher_one(tmp_path: Path) -> None:
    """As `llm-ide run` does: given its task with a `config` whose step limit is higher, a thread that had stopped at
    its limit goes on from its next step (the script where it was); with the same limit it stays as it is."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    model = write_script(tmp_path / "s.yaml", SCRIPT)
    inputs = {"task": TASK, "repo": str(repo), "model": model, "config": {**QUIET, "agent": {"step_limit": 2}}}
    saver = InMemorySaver()
    stopped, _ = served_run(saver, "t1", inputs)
    assert (stopped["exit_status"], stopped["n_operations"], stopped["usage"]["api_calls"]) == ("step_limit", 2, 2)
    assert stopped["error"] == "the run's step limit (2) is reached" and "+    return celsius" in stopped["submission"]
    again, _ = served_run(saver, "t1", inputs)
    assert (again["exit_status"], again["n_operations"], again["usage"]["api_calls"]) == ("step_limit", 2, 2)
    final, _ = served_run(saver, "t1", {**inputs, "config": {**QUIET, "agent": {"step_limit": 0}}})
    assert (final["exit_status"], final["usage"]["api_calls"], final.get("error")) == ("submitted", 4, "")
    assert [op.action_type for op in final["operations"]] == ["view", "edit", "bash", "submit"]
    assert "+    return celsius * 9 / 5 + 32" in final["submission"]


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"config": "agent: {}"}, "`config` must be a mapping of settings, as a --config file holds, not str 'agent"),
        ({"repo": 5}, "`repo` must be text, not int 5"),
        ({"model": 5, "config": [1]}, "`model` must be text, not int 5; `config` must be a mapping of settings"),
        ({"repo": "repo"}, "`repo` must be an absolute path on the server's machine, not 'repo'"),
        ({"confg": {}}, "`confg`: unknown field (did you mean config?; use task, repo, model, base_url, config)"),
        ({"bogus": 1, "task": ""}, "`bogus`: unknown field (use task, repo, model, base_url, config)"),
        (
            {"config": {"agent": {"step_limt": 3}}},
            "`config`: agent.step_limt: unknown setting (did you mean step_limit?)",
        ),
    ],
)
def test_an_input_of_the_wrong_type_ends_the_run_with_one_line(tmp_path: Path, given: dict, line: str) -> None:
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY})
    inputs = {"task": TASK, "repo": str(repo), "model": "scripted:none.yaml", **given}
    final, events = served_run(InMemorySaver(), "typed", inputs)
    assert final["exit_status"] == "error" and final["error"].startswith(f"the graph input's {line}")
    assert final.get("operations", []) == [] and notes(events) == []


def test_a_model_calls_retry_is_a_warning_in_the_stream(tmp_path: Path) -> None:
    for copy in ("sampled", "navigator"):  # the server loads the file once per graph of langgraph.json
        spec = importlib.util.spec_from_file_location(f"studio_{copy}", Path(studio.__file__))
        assert spec is not None and spec.loader is not None
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY})
    replies = [Reply(status=500, error_message="overloaded"), *single_call([act("Nothing to change.", "submit")])]
    config = {**QUIET, "model": {"retry_base_delay": 0.01, "retry_max_delay": 0.02}}
    with OpenAIServer(replies=replies, models=None) as server:
        inputs = {"task": TASK, "repo": str(repo), "model": "retried-model", "base_url": server.url, "config": config}
        final, events = served_run(InMemorySaver(), "retried", inputs)
    assert final["exit_status"] == "submitted" and server.hits == 2
    unpriced, retry = [text for level, text in notes(events) if level == "warning"]  # as the console shows them
    assert unpriced.startswith("model retried-model has no price in the config's model.prices")
    assert retry.startswith("model retried-model: ") and "overloaded" in retry and "; retry 1/" in retry


def test_a_run_removes_the_repositorys_future_and_says_its_environment_as_the_command_line_does(
    tmp_path: Path,
) -> None:
    """`environment.scrub_history: always`: what came after the base commit (a branch holding the fix) is gone before
    the first step, and the stream says so; so is the Python the commands use (the console's lines at its start)."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    run = lambda *args: subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True)  # noqa: E731
    run("checkout", "-q", "-b", "the-fix")
    (repo / "temps.py").write_text(BUGGY.replace("9 / 5 - 32", "9 / 5 + 32"))
    run("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam", "the fix")
    run("checkout", "-q", "-")
    config = {**QUIET, "environment": {"tools": [], "scrub_history": "always"}}
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": config}
    final, events = served_run(InMemorySaver(), "scrubbed", inputs)
    assert final["exit_status"] == "submitted"
    said = [text for _, text in notes(events)]
    assert any(text.startswith("removed what came after the base commit") for text in said), said
    assert any(text.startswith("the commands use Python") for text in said), said
    assert run("branch", "--list", "the-fix").stdout == ""


@pytest.mark.parametrize("cut", [True, False])
def test_a_thread_given_its_task_with_another_repository_is_refused_as_the_command_line_refuses_it(
    tmp_path: Path, cut: bool
) -> None:
    """A thread cut mid-step went on in its own repository, the other one given ignored unsaid; an ended one took the
    other as its `repo` beside the first one's patch. As `llm-ide run --thread-id` with another --repo: one line, the
    thread as it was; another checkout of the same repository goes on."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    other = make_git_repo(tmp_path / "other", {"x.py": "x = 1\n"})
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": QUIET}
    saver = InMemorySaver()
    first, _ = served_run(saver, "t1", inputs, stop_before=("execute_tool",) if cut else ())
    base = first["base_commit"]
    said = (
        f"thread t1 started in {repo}; the graph input's `repo` {other} is another repository (no commit "
        f"{base[:12]}, the thread's base): give the thread's repository (or a clone of it), or a new thread"
    )
    with pytest.raises(ThreadMismatchError) as raised:
        served_run(saver, "t1", {**inputs, "repo": str(other)})
    assert str(raised.value) == said
    kept = saver.get_tuple({"configurable": {"thread_id": "t1"}}).checkpoint["channel_values"]
    assert kept["repo"] == str(repo)
    final, _ = served_run(saver, "t1", inputs)
    assert (final["exit_status"], final["repo"]) == ("submitted", str(repo))


def test_a_cut_thread_given_its_task_with_another_model_goes_on_with_it_and_says_so(tmp_path: Path) -> None:
    """A cut thread given its task again with another `model` (`config`, `base_url`) went on with the thread's own,
    the one given dropped unsaid; `llm-ide run --thread-id T -m OTHER` goes on with OTHER. Now the same: the run
    goes on with the model given, and says it."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    first = write_script(tmp_path / "first.yaml", SCRIPT)
    other = write_script(tmp_path / "other.yaml", [SCRIPT[1], act("Submit as it is.", "submit")])
    inputs = {"task": TASK, "repo": str(repo), "model": first, "config": QUIET}
    saver = InMemorySaver()
    served_run(saver, "t1", inputs, stop_before=("execute_tool",))
    final, events = served_run(saver, "t1", {**inputs, "model": other})
    assert (final["exit_status"], [op.action_type for op in final["operations"]]) == ("submitted", ["view", "submit"])
    said = f"run t1 started with model {first}: it goes on with model {other}, the one given now"
    assert ("info", said) in notes(events), notes(events)


@pytest.mark.parametrize("empty", [{"base_url": ""}, {"model": ""}, {"config": {}}])
def test_a_cut_thread_given_its_task_with_an_empty_field_goes_on_with_its_own(
    tmp_path: Path, empty: dict[str, Any]
) -> None:
    """A form's empty `base_url`, `model` or `config` (a field left blank) counted as given anew: the run said it went
    on with it (an empty model ended it). An empty value is unset: the thread goes on with its own, unsaid."""
    repo = make_git_repo(tmp_path / "repo", {"temps.py": BUGGY, "test_temps.py": TEST})
    inputs = {"task": TASK, "repo": str(repo), "model": write_script(tmp_path / "s.yaml", SCRIPT), "config": QUIET}
    saver = InMemorySaver()
    served_run(saver, "t1", inputs, stop_before=("execute_tool",))
    final, events = served_run(saver, "t1", {**inputs, **empty})
    assert final["exit_status"] == "submitted", final.get("error")
    assert not [text for _, text in notes(events) if "goes on with" in text], notes(events)
