"""A batch's and an evaluation's Ray options and failures, each said in one line: a Ray option without
--engine ray, an address where nothing or no Ray listens, a head refusing the driver's token, a Ray task's
exception (never its traceback), the batch's store lost under a Ray task; and a Ray batch's relative sqlite
store and repos are the driver's."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from dataclasses import replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml
from agent_script import write_script
from conftest import wait_for
from first_week_support import CLI, DONE, llm_ide, one_line


@pytest.mark.parametrize(
    ("command", "option"),
    [
        ("swebench", ["--address", "10.0.0.1:6379"]),
        ("swebench", ["--shared-output"]),
        ("swebench", ["--prefetch-images"]),
        ("evaluate", ["--address", "10.0.0.1:6379"]),
    ],
)
def test_a_ray_option_without_engine_ray_is_a_usage_error(tmp_path: Path, command: str, option: list[str]) -> None:
    """It was ignored: the batch ran on this machine's thread pool, though the user named a cluster."""
    (dataset := tmp_path / "data.jsonl").write_text(json.dumps({"instance_id": "demo__a-1", "repo": "x/y"}) + "\n")
    (preds := tmp_path / "preds.json").write_text(json.dumps({"demo__a-1": {"instance_id": "demo__a-1"}}))
    args = [str(preds)] if command == "evaluate" else ["-m", "scripted:s.yaml", "--environment", "local"]
    result = llm_ide(command, *args, "--subset", str(dataset), "-o", "out", *option, cwd=tmp_path)
    one_line(result, f"{option[0]} is for --engine ray")
    assert not (tmp_path / "out").exists()


class QuietHandler(BaseHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.mark.timeout(90)
@pytest.mark.parametrize("command", ["swebench", "evaluate"])
@pytest.mark.parametrize(
    ("there", "said"),
    [
        (None, "nothing listens there (ray start --head there?)"),
        ("http", "what listens there is not a Ray head node (the --port of `ray start --head`, 6379 by default?)"),
    ],
)
def test_a_ray_address_where_nothing_or_no_ray_listens_is_one_line(
    tmp_path: Path, command: str, there: str | None, said: str
) -> None:
    """ray.init retried it for minutes, printing Ray's log lines, deaf to Ctrl-C and SIGTERM; where something else
    listened (a web server, Postgres), it still did."""
    pytest.importorskip("ray")
    (dataset := tmp_path / "data.jsonl").write_text(
        json.dumps({"instance_id": "demo__a-1", "repo": "x/y", "problem_statement": "fix a"}) + "\n"
    )
    (preds := tmp_path / "preds.json").write_text(json.dumps({"demo__a-1": {"instance_id": "demo__a-1"}}))
    write_script(tmp_path / "s.yaml", [DONE])
    args = [str(preds), "-o", "ev"] if command == "evaluate" else ["-m", "scripted:s.yaml", "--environment", "local"]
    with ThreadingHTTPServer(("127.0.0.1", 0), QuietHandler) as server:
        if there:
            threading.Thread(target=server.serve_forever, args=(0.01,), daemon=True).start()  # shutdown() waits a poll
        else:
            server.server_close()
        address = f"127.0.0.1:{server.server_address[1]}"
        ray_args = ["--engine", "ray", "--address", address]
        result = llm_ide(command, *args, "--subset", str(dataset), *ray_args, cwd=tmp_path)
        if there:
            server.shutdown()
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr.strip().splitlines() == [f"error: could not connect to Ray at {address}: {said}"]
    assert not (tmp_path / "ev").exists() and not (tmp_path / "swebench_output").exists()  # no empty folder left


@pytest.mark.slow
def test_a_ray_head_refusing_the_drivers_token_is_one_line(tmp_path: Path) -> None:
    """ray.init retried for 20 s, a GCS warning a second, then said it could not connect, naming no token."""
    from ray_cluster import ray_cluster

    (dataset := tmp_path / "data.jsonl").write_text(
        json.dumps({"instance_id": "demo__a-1", "repo": "x/y", "problem_statement": "fix a"}) + "\n"
    )
    write_script(tmp_path / "s.yaml", [DONE])
    batch = ["-m", "scripted:s.yaml", "--environment", "local", "--subset", str(dataset), "--engine", "ray"]
    bare = {k: v for k, v in os.environ.items() if not k.startswith("RAY_AUTH")}
    with ray_cluster(tmp_path / "ray", [{}]) as cluster:
        for auth, said in [({}, "wants a token"), ({"RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": "0" * 64}, "refuses")]:
            command = [sys.executable, "-m", "llm_ide", "swebench", *batch, "--address", cluster.address]
            result = subprocess.run(command, cwd=tmp_path, env={**bare, **auth}, capture_output=True, text=True)
            assert result.returncode == 2, result.stdout + result.stderr
            assert result.stderr.splitlines() == [
                f"error: could not connect to Ray at {cluster.address}: the cluster {said}"
                f"{' this token' * bool(auth)} (RAY_AUTH_MODE=token and RAY_AUTH_TOKEN as on its nodes)"
            ]


def test_a_ray_batchs_relative_sqlite_store_and_repos_are_the_drivers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--checkpoint sqlite:rel.sqlite` went to the Ray workers' folder (where `ray start` ran), while the driver's
    `--redo-existing` cleared ./rel.sqlite: the redone instances were "already finished" in the other one."""
    pytest.importorskip("ray")
    from llm_ide.swebench.choice import BatchOptions
    from llm_ide.swebench.ray_engine import absolute

    options = BatchOptions(model="m", output=Path("out"), checkpoint="sqlite:rel.sqlite", repos=Path("repos"))
    monkeypatch.chdir(tmp_path)
    seen = absolute(options)
    assert (seen.checkpoint, seen.repos) == (f"sqlite:{tmp_path / 'rel.sqlite'}", tmp_path / "repos")
    assert absolute(replace(options, checkpoint="postgres://h/db", repos=None)).checkpoint == "postgres://h/db"


@pytest.mark.slow
def test_a_ray_task_that_raises_is_its_error_in_one_line_not_its_traceback(tmp_path: Path) -> None:
    """The batch's Postgres database refuses connections while a Ray task runs: the next task's thread guard raised,
    and its instance's reason was Ray's text of the task's traceback (file, line, source, carets). The batch now stops
    there: the cut instance's reason is one line naming the store, the next never starts, exit 1."""
    import psycopg
    from pg_server import postgres_server
    from swebench_fixtures import FIX_COMMAND, build_dataset
    from swebench_fixtures import write_script as write_commands

    pytest.importorskip("ray")
    data, _ = build_dataset(tmp_path / "data", 2)
    wait = f"touch {tmp_path}/started; while [ ! -e {tmp_path}/gate ]; do sleep 0.05; done"
    (config := tmp_path / "c.yaml").write_text(
        yaml.safe_dump({"environment": {"tools": [], "writable": [str(tmp_path)]}})
    )
    model = write_commands(tmp_path / "m.yaml", [wait, FIX_COMMAND])
    with postgres_server() as url, psycopg.connect(url, autocommit=True) as admin:
        admin.execute("CREATE DATABASE batch")
        args = ["swebench", "--subset", str(data), "-m", model, "-c", str(config), "--environment", "local"]
        store = ["--engine", "ray", "--checkpoint", url.rpartition("/")[0] + "/batch", "-o", str(tmp_path / "out")]
        batch = subprocess.Popen([*CLI, *args, *store], cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        try:
            wait_for((tmp_path / "started").exists, timeout=300, what="the first instance's command")
            admin.execute("ALTER DATABASE batch ALLOW_CONNECTIONS false")
            admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = 'batch'")
            (tmp_path / "gate").touch()
            stdout, stderr = batch.communicate(timeout=300)
        finally:
            batch.kill()
    statuses = yaml.safe_load((tmp_path / "out" / "exit_statuses.yaml").read_text())["instances"]
    said = {status["exit_status"]: status.get("error", "") for status in statuses.values()}
    assert sorted(said) == ["interrupted", "not_started"]  # the second instance: it was missing
    error = said["interrupted"]
    assert error.startswith(f"the checkpoint store {url.rpartition('/')[0]}/batch is out")
    assert not any(mark in error for mark in ("File ", "^^^", "ray::", "\n")), error
    assert batch.returncode == 1 and "Traceback" not in stdout.decode() + stderr.decode()
    assert "the batch stopped (1 instance interrupted, 1 not started)" in stderr.decode(), stderr.decode()


@pytest.mark.parametrize("kind", ["raised", "died"])
def test_a_ray_tasks_failure_is_its_own_exception_in_one_line(kind: str) -> None:
    """What a batch's and an evaluation's instance says when its Ray task failed: the exception the task raised (the
    evaluation gave Ray's text of its traceback: colours, the worker, carets), or Ray's own error when no task
    raised (its node died)."""
    exceptions = pytest.importorskip("ray.exceptions")
    from llm_ide.errors import ExitStatus, crashed
    from llm_ide.swebench.ray_engine import raised

    traceback = "\x1b[36mray::evaluate()\x1b[39m\nTraceback (most recent call last):\n  File x.py\n  ^^^\nValueError"
    error = exceptions.RayTaskError("evaluate", traceback, ValueError("boom")) if kind == "raised" else None
    error = error or exceptions.WorkerCrashedError()
    said = "ValueError: boom" if kind == "raised" else f"WorkerCrashedError: {exceptions.WorkerCrashedError()}"
    assert crashed(raised(error)) == (ExitStatus.ERROR, said)
