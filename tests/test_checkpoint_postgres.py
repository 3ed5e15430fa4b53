"""Postgres checkpoints (SPEC §8) against a real server started by the test: a full run, resuming an interrupted
run without losing or repeating an operation, and pruning that keeps the checkpoint tables small."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from agent_script import BUGGY_FILES, act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke
from langgraph.checkpoint.base import empty_checkpoint
from pg_server import postgres_server

from llm_ide.config import Settings, load_config
from llm_ide.run.checkpoint import open_checkpointer, prune
from llm_ide.run.pg_thread import PostgresThread, prepare_postgres
from llm_ide.run.single import RunResult, run_task

CHECK = "echo {label} >> trail.log; python3 -m unittest discover -s tests -t . 2>&1"
SCRIPT = [
    act("Read the cart's total[1](shop/cart.py:11).", "view", path="shop/cart.py", start_line=1, end_line=15),
    reflect(False, "Cart.total sums the price of each item."),
    act("Hypothesis: rounding[1](shop/cart.py:15) loses money.", "bash", command=CHECK.format(label="hypothesis")),
    reflect(True, "11.5 != 16.0: rounding is fine, quantities are ignored.", "Run the tests before guessing."),
    act(
        "The loop ignores the quantity[1](shop/cart.py:14).",
        "edit",
        path="shop/cart.py",
        old="            total += price\n",
        new="            total += price * quantity\n",
    ),
    reflect(False, "Cart.total multiplies price by quantity."),
    act("Check the fix[1](shop/cart.py:14).", "bash", command=CHECK.format(label="check")),
    reflect(False, "The tests pass."),
    act("Done.", "submit"),
]
EXPECTED_TREE = [
    (0, None, "view"),
    (1, 0, "bash"),
    (2, 0, "edit"),
    (3, 2, "bash"),
    (4, 3, "submit"),
]
ACTION_KEYS = ("id", "parent_id", "thought", "action_type", "action_params", "observation", "returncode", "duration")
TASK = "Cart.total ignores quantities; make `python3 -m unittest discover -s tests -t .` pass."


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    with postgres_server() as url:
        yield url


def config(single_call: bool = True, **checkpoint: Any) -> Settings:
    return load_config("default", environment={"tools": []}, checkpoint=checkpoint, agent={"single_call": single_call})


def run(
    tmp_path: Path,
    url: str,
    run_id: str,
    responses: list[str],
    single_call: bool = True,
    keep: PostgresThread | None = None,
    **checkpoint: Any,
) -> RunResult:
    model = write_script(tmp_path / "script.yaml", responses)
    return run_task(
        TASK,
        model=model,
        settings=config(single_call, **checkpoint),
        output_dir=tmp_path / "out",
        run_id=run_id,
        repo=tmp_path / "repo",
        checkpoint=url,
        keep=keep,
    )


def table_rows(url: str, thread_id: str) -> dict[str, int]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            table: conn.execute(f"SELECT count(*) FROM {table} WHERE thread_id = %s", (thread_id,)).fetchone()[0]
            for table in ("checkpoints", "checkpoint_blobs", "checkpoint_writes")
        }


def thought(response: str) -> str:
    return response.split("<thought>", 1)[1].split("</thought>", 1)[0]


def tree(traj: dict[str, Any]) -> list[tuple[int, int | None, str]]:
    return [(op["id"], op["parent_id"], op["action_type"]) for op in traj["operations"]]


@pytest.mark.slow
def test_full_run_with_postgres_checkpoints_prunes_history(tmp_path: Path, postgres_url: str) -> None:
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    result = run(tmp_path, postgres_url, "pg-full", SCRIPT)

    assert result.exit_status == "submitted", result.error
    assert not (tmp_path / "out" / "pg-full.checkpoint.sqlite").exists()
    traj = json.loads(result.trajectory_path.read_text())
    assert tree(traj) == EXPECTED_TREE
    assert traj["operations"][1]["bad_action"] is True
    assert traj["operations"][1]["lessons"] == "Run the tests before guessing."
    assert "OK" in traj["operations"][3]["observation"]
    assert [call["kind"] for call in traj["model_calls"]] == ["act"] * 5  # one call per step
    assert "+            total += price * quantity" in result.submission
    assert (tmp_path / "repo" / "trail.log").read_text() == "hypothesis\ncheck\n"

    pruned = table_rows(postgres_url, "pg-full")
    assert pruned["checkpoints"] == 1
    assert pruned["checkpoint_writes"] == 0
    assert 0 < pruned["checkpoint_blobs"] <= 30

    # The same run keeping its history: one checkpoint per superstep and blobs for every version of every channel.
    history_dir = tmp_path / "history"
    history_dir.mkdir()
    make_git_repo(history_dir / "repo", BUGGY_FILES)
    kept = run(history_dir, postgres_url, "pg-history", SCRIPT, keep_history=True)
    assert kept.exit_status == "submitted", kept.error
    assert tree(json.loads(kept.trajectory_path.read_text())) == EXPECTED_TREE
    full = table_rows(postgres_url, "pg-history")
    assert full["checkpoints"] >= 5 * 4  # five steps of four nodes
    assert full["checkpoint_blobs"] > 3 * pruned["checkpoint_blobs"]

    # Finished: running the thread again returns at once, nothing re-executed.
    again = run(tmp_path, postgres_url, "pg-full", SCRIPT)
    assert again.exit_status == "submitted"
    assert again.submission == result.submission
    assert (tmp_path / "repo" / "trail.log").read_text() == "hypothesis\ncheck\n"
    assert table_rows(postgres_url, "pg-full") == pruned


@pytest.mark.slow
@pytest.mark.parametrize(
    ("cut", "done_before"),
    [
        (4, ["view", "bash"]),  # the script ends after the reflection that marks the bash action bad
        (5, ["view", "bash", "edit"]),  # ends before the reflection on the edit
        (8, ["view", "bash", "edit", "bash"]),  # ends just before submitting
    ],
)
def test_interrupted_run_resumes_from_postgres(
    tmp_path: Path, postgres_url: str, cut: int, done_before: list[str]
) -> None:
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    run_id = f"pg-resume-{cut}"  # two calls per step: the script is cut between a reflection and an action
    first = run(tmp_path, postgres_url, run_id, SCRIPT[:cut], single_call=False)

    assert first.exit_status == "model_error"
    assert "ran out of responses" in first.error
    stopped = json.loads(first.trajectory_path.read_text())
    assert [op["action_type"] for op in stopped["operations"]] == done_before
    # `reflect` is a node of its own: its call is kept even when the action call after it fails
    assert [call["index"] for call in stopped["model_calls"]] == list(range(cut))
    assert table_rows(postgres_url, run_id)["checkpoints"] <= 7  # pruned per step: one iteration's supersteps remain

    second = run(tmp_path, postgres_url, run_id, SCRIPT, single_call=False)

    assert second.exit_status == "submitted", second.error
    traj = json.loads(second.trajectory_path.read_text())
    assert tree(traj) == EXPECTED_TREE
    n = len(done_before)
    assert traj["operations"][: n - 1] == stopped["operations"][: n - 1]
    assert {key: traj["operations"][n - 1][key] for key in ACTION_KEYS} == {
        key: stopped["operations"][-1][key] for key in ACTION_KEYS
    }
    assert [op["thought"] for op in traj["operations"]] == [thought(SCRIPT[i]) for i in range(0, len(SCRIPT), 2)]
    assert [call["index"] for call in traj["model_calls"]] == list(range(len(SCRIPT)))
    assert [call["response"] for call in traj["model_calls"]] == SCRIPT
    assert traj["info"]["model_stats"]["api_calls"] == len(SCRIPT)
    assert (tmp_path / "repo" / "trail.log").read_text() == "hypothesis\ncheck\n"
    assert "+            total += price * quantity" in second.submission
    assert table_rows(postgres_url, run_id)["checkpoints"] == 1


@pytest.mark.slow
def test_the_models_keep_in_postgres_outlives_the_run_folder_and_not_the_thread(
    tmp_path: Path, postgres_url: str
) -> None:
    """A Ray batch's run keeps its scripted model's place in Postgres, beside its checkpoints, not in the run folder
    (a node's, lost with it): the resumed run goes on where the first one was from there alone; a thread started
    afresh starts its script from the top."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with PostgresThread(postgres_url, "pg-keep") as guard:
        first = run(tmp_path, postgres_url, "pg-keep", SCRIPT[:4], single_call=False, keep=guard)
    assert first.exit_status == "model_error" and "ran out of responses after 4 calls" in first.error
    assert not list((tmp_path / "out").glob("*scripted-*"))  # nothing of the model's in the run folder
    (place,) = {name for (name,) in rows(postgres_url, "SELECT name FROM llm_ide_kept WHERE thread_id = 'pg-keep'")}
    with PostgresThread(postgres_url, "pg-keep") as guard:
        assert len(guard.lines(place)) == 4
        second = run(tmp_path, postgres_url, "pg-keep", SCRIPT, single_call=False, keep=guard)
        assert second.exit_status == "submitted", second.error
        assert len(guard.lines(place)) == len(SCRIPT)  # each call once: the first run's four were not made again
    traj = json.loads(second.trajectory_path.read_text())
    assert [call["response"] for call in traj["model_calls"]] == SCRIPT
    assert "+            total += price * quantity" in second.submission
    with PostgresThread(postgres_url, "pg-keep-new") as guard:
        guard.write(place, ["stale"])
    with PostgresThread(postgres_url, "pg-keep-new") as guard:  # no checkpoint: a thread started afresh
        assert guard.lines(place) == []


def rows(url: str, query: str) -> list[tuple[Any, ...]]:
    import psycopg

    with psycopg.connect(url) as conn:
        return conn.execute(query).fetchall()


def fresh_database(server_url: str, name: str) -> str:
    import psycopg

    with psycopg.connect(server_url, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    return server_url.rsplit("/", 1)[0] + "/" + name


def put(saver: Any, config: dict, values: dict[str, Any], versions: dict[str, str], new: list[str]) -> dict:
    checkpoint = {**empty_checkpoint(), "channel_values": values, "channel_versions": versions}
    return saver.put(config, checkpoint, {}, {k: versions[k] for k in new})


@pytest.mark.slow
def test_a_long_string_is_stored_once_per_version_not_in_each_row_and_rows_written_before_still_read(
    tmp_path: Path, postgres_url: str
) -> None:
    """LangGraph's saver keeps a string inline in every checkpoint row (a step writes six): ours stores one of 128
    characters or more once per version, in checkpoint_blobs; a row LangGraph's own saver wrote (the string inline)
    reads, and the first row after it that leaves the string out stores it; LangGraph's saver reads ours."""
    from langgraph.checkpoint.postgres import PostgresSaver

    url = fresh_database(postgres_url, "strings")
    config = {"configurable": {"thread_id": "s", "checkpoint_ns": ""}}
    v = [f"{n:010}.0000000{n}" for n in range(5)]
    states = [
        ({"task": TASK * 3, "patch": "+a\n" * 60, "n": 1}, {"task": v[1], "patch": v[1], "n": v[1]}, []),
        ({"task": TASK * 3, "patch": "+a\n" * 60, "n": 2}, {"task": v[1], "patch": v[1], "n": v[2]}, ["n"]),
        ({"task": TASK * 3, "patch": "+b\n" * 70, "n": 3}, {"task": v[1], "patch": v[3], "n": v[3]}, ["patch", "n"]),
        ({"task": TASK * 3, "patch": "+b\n" * 70, "n": 4}, {"task": v[1], "patch": v[3], "n": v[4]}, ["n"]),
    ]
    with open_checkpointer(url, tmp_path / "unused") as saver:
        assert type(saver).__name__ == "ChannelPostgresSaver"
        theirs = PostgresSaver(saver.conn, serde=saver.serde)
        at, saved = config, []
        for index, (values, versions, new) in enumerate(states):
            at = put(saver if index else theirs, at, values, versions, new if index else list(versions))
            saved.append(at)
        for at, (values, _, _) in zip(saved, states, strict=True):
            found = saver.get_tuple(at)
            assert found is not None and found.checkpoint["channel_values"] == values
        assert theirs.get_tuple(config).checkpoint["channel_values"] == states[-1][0]  # type: ignore[union-attr]
        inline = "SELECT checkpoint -> 'channel_values' ? 'task', checkpoint -> 'channel_values' ? 'patch', "
        assert (
            rows(url, inline + "checkpoint -> 'channel_values' ? 'n' FROM checkpoints ORDER BY checkpoint_id")
            == [(True, True, True)] + [(False, False, True)] * 3
        )
        blobs = "SELECT channel, version FROM checkpoint_blobs ORDER BY channel, version"
        assert rows(url, blobs) == [("patch", v[1]), ("patch", v[3]), ("task", v[1])]
        prune(saver, "s")
        assert rows(url, blobs) == [("patch", v[3]), ("task", v[1])]
        found = saver.get_tuple(config)
        assert found is not None and found.checkpoint["channel_values"] == states[-1][0]


@pytest.mark.slow
def test_the_keep_table_is_made_by_the_first_thing_kept(postgres_url: str) -> None:
    """A batch whose models keep nothing has no `llm_ide_kept` (an empty table and its two indexes in every batch's
    database); two runs keeping their first lines at once both make it."""
    url = fresh_database(postgres_url, "keeps")
    prepare_postgres(url)
    tables = "SELECT tablename FROM pg_tables WHERE schemaname = 'public' AND tablename LIKE 'llm_ide%' ORDER BY 1"
    assert rows(url, tables) == [("llm_ide_intents",)]
    with PostgresThread(url, "a") as first, PostgresThread(url, "b") as second:
        assert first.lines("place") == [] and rows(url, tables) == [("llm_ide_intents",)]
        writers = [
            threading.Thread(target=keep.write, args=("place", [name])) for keep, name in ((first, "1"), (second, "2"))
        ]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        assert (first.lines("place"), second.lines("place")) == (["1"], ["2"])
    assert rows(url, tables) == [("llm_ide_intents",), ("llm_ide_kept",)]
    with PostgresThread(url, "a") as again:  # no checkpoint: a thread started afresh
        assert again.lines("place") == []


def test_a_thread_missing_from_the_postgres_store_is_said_without_the_password(
    tmp_path: Path, postgres_url: str
) -> None:
    """The refusal to start over a run the store no longer holds printed the URL's password (the others mask it)."""
    with psycopg.connect(postgres_url, autocommit=True) as admin:
        admin.execute("DROP DATABASE IF EXISTS emptied")
        admin.execute("CREATE DATABASE emptied")
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", [act("Done.", "submit")])
    secret = postgres_url.replace("postgres@", "postgres:s3cret@")  # (the test server trusts any password)
    no_tools = tmp_path / "c.yaml"
    no_tools.write_text("environment: {tools: []}\n")  # no tools to build: the refusal is what is checked
    run = ["run", "--repo", str(repo), "--task", "t", "-m", model, "--thread-id", "t", "-o", str(tmp_path / "out")]
    run += ["-c", str(no_tools)]
    assert invoke(*run, "--checkpoint", secret, cwd=tmp_path).returncode == 0
    done = invoke(*run, "--checkpoint", secret.rpartition("/")[0] + "/emptied", cwd=tmp_path)
    assert done.returncode == 2 and "holds no state for this thread" in done.stderr, done.stderr
    assert "s3cret" not in done.stderr and "postgres:***@" in done.stderr
