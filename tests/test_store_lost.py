"""A Postgres checkpoint store that dies in the middle of a batch or of a run (a real server, stopped as the test's
command waits at a gate): one line naming the store, the batch stopped with what it did not run recorded, and the
same command, once the store is back, going on where it stopped."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from agent_script import BUGGY_FILES
from conftest import make_git_repo, wait_for
from in_process import invoke
from pg_server import PostgresServer, stoppable_postgres
from swebench_fixtures import FIX_COMMAND, build_dataset, write_script

from llm_ide.swebench.store import read_preds


@pytest.fixture
def server() -> Iterator[PostgresServer]:
    with stoppable_postgres() as started:
        yield started


def stopped_at_gate(folder: Path, server: PostgresServer) -> threading.Thread:
    """Once a command made `folder/started`, the server is stopped, then `folder/gate` opened: the command ends and
    its run saves its step into a store that is gone."""

    def stop() -> None:
        try:
            wait_for((folder / "started").exists, what="the gated command")
            server.stop()
        finally:
            (folder / "gate").touch()

    watcher = threading.Thread(target=stop, daemon=True)
    watcher.start()
    return watcher


def gate(folder: Path, when: str = "true") -> str:
    """A command that, when `when` holds, makes `folder/started` and waits for `folder/gate`."""
    wait = f"touch {folder}/started; while [ ! -e {folder}/gate ]; do sleep 0.05; done"
    return f"if {when}; then {wait}; fi"


def test_a_batch_whose_store_dies_stops_in_one_line_and_its_rerun_goes_on(
    tmp_path: Path, server: PostgresServer
) -> None:
    """Before: the instance under way ended `error: OperationalError: the connection is closed`, each one after it
    `error` (a traceback each in swebench.log), the batch exited 0 and recorded them all as errors."""
    dataset, rows = build_dataset(tmp_path / "data", 3)
    second = gate(tmp_path, f"[ $(wc -l < {tmp_path}/trail) -eq 2 ]")  # the second instance's first command
    model = write_script(tmp_path / "m.yaml", [f"echo x >> {tmp_path}/trail; {second}", FIX_COMMAND])
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": [], "writable": [str(tmp_path)]}}))
    output = tmp_path / "out"
    args = ["swebench", "--subset", str(dataset), "--split", "test", "--model", model, "--environment", "local",
            "--output", str(output), "--config", str(config), "--checkpoint", server.url, "-w", "1"]  # fmt: skip
    watcher = stopped_at_gate(tmp_path, server)
    done = invoke(*args)
    watcher.join()
    first, cut, unrun = (row["instance_id"] for row in rows)

    assert done.returncode == 1, done.stdout + done.stderr
    where = f"the checkpoint store {server.url} is out of reach: connection failed"
    assert done.stderr.startswith(f"error: {where}") and done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.endswith(
        "; the batch stopped (1 instance interrupted, 1 not started): the same command goes on with them once the "
        "store is back\n"
    )
    assert f"{cut}: interrupted (0 steps, $0.0000): {where}" in done.stdout
    assert f"{unrun}: started" not in done.stdout
    assert list(read_preds(output)) == [first]
    statuses = yaml.safe_load((output / "exit_statuses.yaml").read_text())["instances"]
    expected = {first: "submitted", cut: "interrupted", unrun: "not_started"}  # (unrun was missing)
    assert {i: s["exit_status"] for i, s in statuses.items()} == expected
    assert statuses[cut]["error"].startswith(where)
    log = (output / "swebench.log").read_text()
    assert f"batch: stopped: {where}" in log and f"; interrupted: {cut}; not started: {unrun}\n" in log
    assert "Traceback" not in log

    server.start()
    again = invoke(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "2 instances run (1 resumed, 1 new), 1 skipped as finished in an earlier run" in again.stdout
    assert sorted(read_preds(output)) == sorted(row["instance_id"] for row in rows)
    assert {row["instance_id"]: row["patch"] for row in rows} == {
        i: pred["model_patch"] for i, pred in read_preds(output).items()
    }


def test_a_run_whose_store_dies_says_so_in_one_line_and_goes_on_once_it_is_back(
    tmp_path: Path, server: PostgresServer
) -> None:
    """Before: `OperationalError: the connection is closed`, after psycopg's `error ignored terminating
    <psycopg.Pipeline [BAD]>: the connection is lost`, naming no store."""
    make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "m.yaml", ["echo one", f"{gate(tmp_path)}; echo two", "echo three"])
    config = tmp_path / "c.yaml"
    config.write_text(yaml.safe_dump({"environment": {"tools": [], "writable": [str(tmp_path)]}}))
    args = ["run", "--repo", str(tmp_path / "repo"), "--task", "fix it", "--model", model, "--checkpoint", server.url,
            "-c", str(config), "--output", str(tmp_path / "out"), "--thread-id", "r1"]  # fmt: skip
    watcher = stopped_at_gate(tmp_path, server)
    done = invoke(*args)
    watcher.join()

    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines[0].startswith(f"the checkpoint store {server.url} is out of reach: connection failed"), lines
    assert lines[1:] == ["the run goes on where it stopped (interrupted) with:", lines[2]] and "r1" in lines[2]
    assert "interrupted after 2 model calls" in done.stdout and "step   1 bash: echo one" in done.stdout

    server.start()
    again = invoke(*args)
    assert again.returncode == 0, again.stdout + again.stderr
    assert "resuming run r1 after step 1 (its checkpoint)" in again.stdout
    assert "step   1" not in again.stdout and "→ three" in again.stdout and "submitted after" in again.stdout
