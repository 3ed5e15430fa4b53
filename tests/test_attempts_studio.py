"""LangGraph Studio: `langgraph dev` serves the attempts graph (`llm-ide-attempts`); langgraph_sdk runs it."""

from __future__ import annotations

import asyncio
import gzip
import json
import subprocess
import tempfile
from contextlib import suppress
from pathlib import Path
from typing import Any

import pytest
from agent_script import act, reflect
from attempts_scripts import FILES, RIGHT, TASK, WRONG, attempt_script, choice, review, scripts
from conftest import make_git_repo
from langgraph.checkpoint.memory import InMemorySaver
from openai_server import OpenAIServer, Reply
from test_studio import studio, wait_for  # noqa: F401 - the fixture: langgraph dev on a free loopback port
from test_tools_install import write_tool

from llm_ide.attempts.studio import graph
from llm_ide.errors import ThreadMismatchError


def worktrees(repo: Path) -> list[str]:
    listed = subprocess.run(["git", "worktree", "list", "--porcelain"], cwd=repo, capture_output=True, text=True)
    return [line.removeprefix("worktree ") for line in listed.stdout.splitlines() if line.startswith("worktree ")]


def served(inputs: dict | None, thread: str, saver: InMemorySaver | None = None, stop_before: tuple = ()) -> dict:
    """The attempts graph's run as `langgraph dev` serves it, in process, on `thread` (its checkpoints in `saver`;
    `stop_before`: the nodes it is interrupted before, as a client can ask)."""

    async def run() -> dict:
        async with graph({"configurable": {}}) as compiled:
            server = compiled.copy(update={"checkpointer": saver or InMemorySaver()})
            return await server.ainvoke(inputs, {"configurable": {"thread_id": thread}}, interrupt_before=stop_before)

    return asyncio.run(run())


def one_attempt(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A repository and the input of a served run of one attempt, right and reviewed 9."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    inputs = {
        "task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"),
        "config": {"environment": {"tools": []}, "attempts": {"max": 1}},
    }  # fmt: skip
    return repo, inputs


def test_the_attempts_worktrees_go_when_the_served_run_ends(tmp_path: Path) -> None:
    """As the server runs it (in process): each attempt works in a worktree of the repository, removed at the end."""
    repo, inputs = one_attempt(tmp_path)

    final = served(inputs, "worktrees")
    assert final["chosen"] == 1 and "+    return x + x\n" in final["submission"]
    assert (tmp_path / "out" / "attempt1" / f"{final['attempts'][0]['run_id']}.traj.json").is_file()
    assert worktrees(repo) == [str(repo.resolve())] and not (tmp_path / "out" / "attempt1" / "repo").exists()
    assert (repo / "calc.py").read_text() == FILES["calc.py"]  # the user's repository untouched


@pytest.mark.slow
def test_langgraph_dev_runs_the_attempts_graph(studio: str, tmp_path: Path) -> None:  # noqa: F811
    from langgraph_sdk import get_sync_client

    repo = make_git_repo(tmp_path / "repo", FILES)
    attempts = [attempt_script(WRONG), attempt_script(RIGHT), attempt_script(RIGHT)]  # 3: checked, never run
    model = scripts(tmp_path / "scripts", attempts, [review(1, "README only."), review(9, "Fixed.")])
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


def test_a_served_run_whose_attempts_stopped_at_their_step_limit_goes_on_when_given_a_higher_one(
    tmp_path: Path,
) -> None:
    """Studio's form sent again with a higher `agent.step_limit` chose again among the same stopped attempts: they go
    on from their last step (not anew), in worktrees of their own again, then are reviewed and chosen among."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(2, "Unfinished."), review(2, "Unfinished."), review(9, "Fixed."), review(1, "README.")]
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(WRONG)], reviews)
    saver = InMemorySaver()

    def inputs(step_limit: int) -> dict:
        config = {"environment": {"tools": []}, "attempts": {"max": 2, "parallel": True}}
        return {"task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"),
                "config": {**config, "agent": {"step_limit": step_limit}}}  # fmt: skip

    stopped = served(inputs(1), "limits", saver)
    assert (stopped["exit_status"], [a["exit_status"] for a in stopped["attempts"]]) == (
        "step_limit",
        ["step_limit"] * 2,
    )
    final = served(inputs(0), "limits", saver)
    assert [(a["exit_status"], a["score"]) for a in final["attempts"]] == [("submitted", 9.0), ("submitted", 1.0)]
    assert (final["exit_status"], final["chosen"], final["going_on"]) == ("submitted", 1, [])
    assert "+    return x + x\n" in final["submission"]
    for record in final["attempts"]:
        folder = tmp_path / "out" / f"attempt{record['index']}"
        traj = json.loads((folder / f"{record['run_id']}.traj.json").read_text())
        assert [op["action_type"] for op in traj["operations"]] == ["bash", "bash", "submit"]
        with gzip.open(folder / f"{record['run_id']}.calls.jsonl.gz", "rt") as log:
            assert sum(1 for line in log if line.strip()) == 3  # from the second step on, not anew
    assert worktrees(repo) == [str(repo.resolve())]


def test_a_finished_served_run_given_again_is_its_result_with_no_call_made_again(tmp_path: Path) -> None:
    """Studio's form sent again to a finished thread, the same limits: was the chooser asked again (a paid call)."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    reviews = [review(5, "Maybe."), review(4, "Maybe.")]
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT), attempt_script(WRONG)], reviews, [choice(1, "Fix.")])
    inputs = {
        "task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"),
        "config": {"environment": {"tools": []}, "attempts": {"max": 2}},
    }  # fmt: skip
    saver = InMemorySaver()

    first = served(inputs, "again", saver)
    assert (first["exit_status"], first["chosen"], first["chosen_by"], len(first["calls"])) == (
        "submitted",
        1,
        "chooser",
        3,
    )
    again = served(inputs, "again", saver)
    assert again == first  # the reviews' and the chooser's calls as they were: none made again
    assert worktrees(repo) == [str(repo.resolve())]


def test_a_finished_served_run_given_a_higher_attempts_max_runs_the_new_attempts_and_chooses_anew(
    tmp_path: Path,
) -> None:
    """Two attempts, none accepted, the same patch (attempt 1 chosen as the only one); sent again with
    `attempts.max: 3`: attempt 3 runs, is reviewed, and the chooser chooses among the three (the first choice's fields
    were kept: the run ended at once)."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    attempts = [attempt_script(WRONG), attempt_script(WRONG), attempt_script(RIGHT)]
    reviews = [review(3, "No."), review(2, "No."), review(6, "Fixes it.")]
    model = scripts(tmp_path / "scripts", attempts, reviews, [choice(2, "The fix.")])
    inputs = {
        "task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"),
        "config": {"environment": {"tools": []}, "attempts": {"max": 2, "accept_score": 8}},
    }  # fmt: skip
    saver = InMemorySaver()

    first = served(inputs, "more", saver)
    assert (first["exit_status"], first["chosen"], first["chosen_by"]) == ("submitted", 1, "only")
    assert [r["index"] for r in first["attempts"]] == [1, 2]
    more = served({**inputs, "config": {**inputs["config"], "attempts": {"max": 3, "accept_score": 8}}}, "more", saver)
    assert (more["exit_status"], more["chosen"], more["chosen_by"]) == ("submitted", 3, "chooser")
    assert [(r["index"], r["score"]) for r in more["attempts"]] == [(1, 3), (2, 2), (3, 6)]
    assert "return x + x\n" in more["submission"] and "README" not in more["submission"]
    assert len(more["calls"]) == len(first["calls"]) + 2  # attempt 3's review and the new choice
    assert worktrees(repo) == [str(repo.resolve())]


@pytest.mark.parametrize("most", [2, 3])
def test_a_served_run_whose_task_budget_was_spent_runs_no_more_attempts_when_sent_again(
    tmp_path: Path, most: int
) -> None:
    """attempts.cost_limit $6.5: attempt 1 ($5) and its review ($1) leave no room for a call, so the run chose it.
    Studio's form sent again (its maximum, or a higher one) ran attempt 2 on a budget that forgot the $6 (the command
    line and a batch count them): the task paid past its limit."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    dollar = {"input_tokens": 1_000_000, "output_tokens": 0}
    replies = [*(Reply(text, **dollar) for text in attempt_script(RIGHT)), Reply(review(5, "Maybe."), **dollar)]
    prices = {"gpt-test": {"input": 1.0, "output": 0}}
    config = {
        "environment": {"tools": []}, "attempts": {"max": 2, "accept_score": 8, "cost_limit": 6.5},
        "agent": {"single_call": False, "cost_limit": 0}, "model": {"prices": prices},
    }  # fmt: skip
    saver = InMemorySaver()
    with OpenAIServer(replies=replies) as server:
        inputs = {"task": TASK, "repo": str(repo), "model": "gpt-test", "base_url": server.url,
                  "output": str(tmp_path / "out"), "config": config}  # fmt: skip
        first = served(inputs, "spent", saver)
    assert ([r["index"] for r in first["attempts"]], first["chosen"], server.hits) == ([1], 1, 6)
    with OpenAIServer(replies=replies) as server:
        again = {
            **inputs,
            "base_url": server.url,
            "config": {**config, "attempts": {**config["attempts"], "max": most}},
        }
        second = served(again, "spent", saver)
        hits = server.hits
    assert (hits, [r["index"] for r in second["attempts"]], second["chosen"]) == (0, [1], 1)
    assert worktrees(repo) == [str(repo.resolve())]


@pytest.mark.parametrize("output", ["file", "file/out"])
def test_an_output_that_is_a_file_ends_the_served_run_in_one_line(tmp_path: Path, output: str) -> None:
    """Was a NotADirectoryError from making attempt 1's worktree: "An internal error occurred" to the client."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    (tmp_path / "file").write_text("mine\n")
    inputs = {
        "task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / output),
        "config": {"environment": {"tools": []}, "attempts": {"max": 2}},
    }  # fmt: skip

    final = served(inputs, "filed")
    said = "it" if output == "file" else str(tmp_path / "file")
    assert (final["exit_status"], final["error"]) == (
        "error",
        f"the graph input's `output` {tmp_path / output}: {said} is a file, not a folder: give a folder (it is "
        "created if missing)",
    )
    assert (tmp_path / "file").read_text() == "mine\n" and worktrees(repo) == [str(repo.resolve())]


def test_an_output_named_as_a_json_file_ends_the_served_run_in_one_line(tmp_path: Path) -> None:
    """As `llm-ide run -o x.json` refuses it (mini-swe-agent's -o is the trajectory file): was taken as a folder."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    output = tmp_path / "last.traj.json"
    config = {"environment": {"tools": []}, "attempts": {"max": 2}}
    final = served({"task": TASK, "repo": str(repo), "model": model, "output": str(output), "config": config}, "named")
    assert (final["exit_status"], final["error"]) == (
        "error",
        f"the graph input's `output` {output}: the graph input's `output` is the run's output folder (mini-swe-agent's "
        "-o is the trajectory file); give a folder: the trajectory is <folder>/named.traj.json",
    )
    assert not output.exists() and worktrees(repo) == [str(repo.resolve())]


@pytest.mark.parametrize(
    ("given", "said"),
    [
        (
            {"confg": {}},
            "`confg`: unknown field (did you mean config?; use task, repo, model, base_url, config, output)",
        ),
        ({"outptu": "x"}, "`outptu`: unknown field (did you mean output?; use task, repo, model, base_url, config, "),
        ({"config": {"attempts": {"maxx": 2}}}, "`config`: attempts.maxx: unknown setting (did you mean max?)"),
    ],
)
def test_an_input_field_of_no_such_name_ends_the_served_run_in_one_line(tmp_path: Path, given: dict, said: str) -> None:
    """LangGraph dropped it unsaid (`confg`: the attempts run with the defaults), as the agent graph's did."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    model = scripts(tmp_path / "scripts", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    inputs = {"task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"), **given}
    final = served(inputs, "unknown")
    assert final["exit_status"] == "error" and final["error"].startswith(f"the graph input's {said}"), final["error"]
    assert not final.get("attempts") and not (tmp_path / "out").exists()


def running(mark: Path) -> list[str]:
    """The processes whose command line names `mark`."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        with suppress(OSError):
            if str(mark) in (line := cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")):
                found.append(line)
    return found


@pytest.mark.parametrize("where", ["command", "setup"])
def test_a_served_run_cancelled_mid_attempt_leaves_nothing_open_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """The server cancels a run (interrupted, cancelled) and leaves the graph's context: the attempt under way went on
    in its thread — its command, its environment's folders, its model's calls — and the resumed run's attempt found
    its thread still being run (RunStateError)."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))  # where the environments' folders go
    (tmp_path / "tmp").mkdir()
    repo = make_git_repo(tmp_path / "repo", FILES)
    gate, started = tmp_path / "gate", tmp_path / "out" / "attempt1" / "repo" / "started"  # (the attempt's worktree)
    gated = f"touch {started}; {wait_for(gate)}"
    config: dict = {"environment": {"tools": []}, "attempts": {"max": 1}}
    first = attempt_script(RIGHT)
    if where == "setup":
        config["environment"]["tools"] = [str(write_tool(tmp_path / "tools", "gated", setup_script=gated))]
    else:
        first = [act("Wait for the build.", "bash", command=gated), reflect(False, "Built."), *first]
    model = scripts(tmp_path / "scripts", [first], [review(9, "Fixed.")])
    inputs = {"task": TASK, "repo": str(repo), "model": model, "output": str(tmp_path / "out"), "config": config}
    saver = InMemorySaver()
    at = {"configurable": {"thread_id": "cut"}}

    async def cut() -> tuple[list[str], list[Path]]:
        async with graph({"configurable": {}}) as compiled:
            run = asyncio.create_task(compiled.copy(update={"checkpointer": saver}).ainvoke(inputs, at))
            await asyncio.to_thread(subprocess.run, ["bash", "-c", wait_for(started)], timeout=300, check=True)
            run.cancel()
            with suppress(asyncio.CancelledError):
                await run
            if where == "setup":
                gate.touch()  # the setup ends; the attempt stops at its next step
        left = running(gate), list((tmp_path / "tmp").iterdir())  # the server's loop goes on: its threads too
        gate.touch()
        return left

    assert asyncio.run(cut()) == ([], [])
    final = served(None, "cut", saver)
    assert (final["exit_status"], final["chosen"]) == ("submitted", 1) and "+    return x + x\n" in final["submission"]
    assert worktrees(repo) == [str(repo.resolve())] and list((tmp_path / "tmp").iterdir()) == []
    with gzip.open(tmp_path / "out" / "cut.calls.jsonl.gz", "rt") as log:
        assert len(log.read().splitlines()) == 1  # the review's call, its gzip member completed


@pytest.mark.parametrize("again", ["its task", "null"])
def test_a_cut_served_run_given_its_task_again_resumes_where_it_stopped(tmp_path: Path, again: str) -> None:
    """Cut before its attempt's review, then given its task again (what Studio's form sends): the run started over at
    `dispatch`, which found the attempts all run and chose the one never reviewed; `null` reviewed it. As the agent
    graph's cut thread (tests/test_studio_threads.py): where it stopped."""
    repo, inputs = one_attempt(tmp_path)
    saver = InMemorySaver()
    cut = served(inputs, "cut", saver, stop_before=("review",))
    assert [(r["index"], r.get("score")) for r in cut["attempts"]] == [(1, None)] and not cut.get("exit_status")
    final = served(inputs if again == "its task" else None, "cut", saver)
    assert [(r["index"], r["score"]) for r in final["attempts"]] == [(1, 9.0)] and len(final["calls"]) == 1
    assert (final["exit_status"], final["chosen"]) == ("submitted", 1)
    assert worktrees(repo) == [str(repo.resolve())]


@pytest.mark.parametrize("cut", [True, False])
def test_a_served_run_given_its_task_with_another_repository_is_refused(tmp_path: Path, cut: bool) -> None:
    """The attempts graph took the other `repo` unsaid (its attempts' worktrees made from a repository without the
    thread's base commit); the agent graph and `llm-ide run --thread-id` refuse it: one line, the thread as it was."""
    repo, inputs = one_attempt(tmp_path)
    other = make_git_repo(tmp_path / "other", {"x.py": "x = 1\n"})
    saver = InMemorySaver()
    first = served(inputs, "t1", saver, stop_before=("review",) if cut else ())
    base = first["base_commit"]
    with pytest.raises(ThreadMismatchError) as raised:
        served({**inputs, "repo": str(other)}, "t1", saver)
    assert str(raised.value) == (
        f"thread t1 started in {repo}; the graph input's `repo` {other} is another repository (no commit "
        f"{base[:12]}, the thread's base): give the thread's repository (or a clone of it), or a new thread"
    )
    kept = saver.get_tuple({"configurable": {"thread_id": "t1"}}).checkpoint["channel_values"]
    assert kept["repo"] == str(repo)
    final = served(inputs, "t1", saver)
    assert (final["exit_status"], final["chosen"], final["repo"]) == ("submitted", 1, str(repo))
    assert worktrees(repo) == [str(repo.resolve())] and worktrees(other) == [str(other.resolve())]


def test_a_cut_served_run_given_its_task_with_another_model_goes_on_with_it(tmp_path: Path) -> None:
    """As the agent graph's (tests/test_studio_threads.py): the `model` given to a cut run was dropped unsaid (its
    reviewer the thread's); `llm-ide run --thread-id T -m OTHER` goes on with OTHER."""
    repo = make_git_repo(tmp_path / "repo", FILES)
    first = scripts(tmp_path / "first", [attempt_script(RIGHT)], [review(9, "Fixed.")])
    other = scripts(tmp_path / "other", [attempt_script(RIGHT)], [review(3, "Not sure.")])
    inputs = {
        "task": TASK, "repo": str(repo), "model": first, "output": str(tmp_path / "out"),
        "config": {"environment": {"tools": []}, "attempts": {"max": 1}},
    }  # fmt: skip
    saver = InMemorySaver()
    served(inputs, "cut", saver, stop_before=("review",))
    final = served({**inputs, "model": other}, "cut", saver)
    assert [(r["index"], r["score"], r["reasons"]) for r in final["attempts"]] == [(1, 3.0, "Not sure.")]
    assert worktrees(repo) == [str(repo.resolve())]
