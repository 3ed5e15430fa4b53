"""API keys and secrets never reach trajectories, logs, checkpoints or the model (SPEC §11), even when the agent
goes looking for them: `env`, `printenv`, and the environment of the agent process itself."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from agent_script import act, reflect
from conftest import BASE_IMAGE, make_git_repo, require_docker
from openai_server import OpenAIServer

PROBES = [
    ("env", "env; echo env-done"),
    ("printenv", "printenv OPENAI_API_KEY; echo printenv-rc=$?"),
    ("parent", "tr '\\0' '\\n' < /proc/$PPID/environ | grep -c . ; tr '\\0' '\\n' < /proc/$PPID/environ"),
]


def script() -> list[str]:
    replies: list[str] = []
    for name, command in PROBES:
        replies += [act(f"Inspect the environment ({name})[1](app.py:1).", "bash", command=command)]
        replies += [reflect(False, f"Looked at the environment with {name}.")]
    return [*replies, act("Nothing else to do.", "submit")]


def run_cli(tmp_path: Path, url: str, secrets: dict[str, str], *extra: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "no-tools.yaml").write_text("environment:\n  tools: []\n")
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", "run", "--repo", str(tmp_path / "repo")]
    command += ["--task", "Print the environment, then submit.", "--model", "test-org/secret-probe-model"]
    command += ["--base-url", url, "--thread-id", "S", "--output", str(tmp_path / "out")]
    command += ["--config", str(tmp_path / "no-tools.yaml"), *extra]
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_BASE_URL"}
    env |= {**secrets, "LLM_IDE_HARMLESS_MARKER": "visible-value-123"}
    return subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=300)


def leaks(directory: Path, values: list[str]) -> list[str]:
    """Every (file, secret) pair where the secret's bytes occur in a file under `directory`."""
    found = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file()):
        data = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        found += [f"{path.name}: {value}" for value in values if value.encode() in data]
    return found


@pytest.mark.parametrize("environment", ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])])
def test_secrets_stay_out_of_every_output(tmp_path: Path, environment: str) -> None:
    extra: list[str] = []
    if environment == "docker":
        require_docker()
        if subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True).returncode != 0:
            pytest.skip(f"{BASE_IMAGE} is missing: build it with scripts/build_base_image.sh")
        extra = ["--environment", "docker", "--image", BASE_IMAGE]
    make_git_repo(tmp_path / "repo", {"app.py": "print('hello')\n"})
    token = uuid.uuid4().hex
    secrets = {
        "OPENAI_API_KEY": f"sk-test-{token}",
        "ANTHROPIC_API_KEY": f"sk-ant-{token[::-1]}",
        "GITHUB_TOKEN": f"ghp_{token[:20]}",
        "MY_SERVICE_PASSWORD": f"pw-{token[5:25]}",
        "AWS_SECRET_ACCESS_KEY": f"aws-{token[10:]}",
        "OPENAI_ORGANIZATION": f"org-{token[3:23]}",
    }

    with OpenAIServer(replies=script()) as server:
        result = run_cli(tmp_path, server.url, secrets, *extra)

    assert result.returncode == 0, result.stdout + result.stderr
    assert server.hits == len(script())
    assert {request.headers["authorization"] for request in server.requests} == {f"Bearer {secrets['OPENAI_API_KEY']}"}
    values = list(secrets.values())
    assert leaks(tmp_path / "out", values) == []
    assert [value for value in values if value in result.stdout + result.stderr] == []
    bodies = [str(request.body) for request in server.requests]
    assert [value for value in values if any(value in body for body in bodies)] == []

    traj = json.loads((tmp_path / "out" / "S.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted"
    observations = {name: op["observation"] for (name, _), op in zip(PROBES, traj["operations"], strict=False)}
    assert "env-done" in observations["env"]
    assert [name for name in secrets if f"{name}=" in observations["env"]] == []
    assert "printenv-rc=1" in observations["printenv"]
    if environment == "local":
        assert "LLM_IDE_HARMLESS_MARKER=visible-value-123" in observations["env"]
        assert "LLM_IDE_HARMLESS_MARKER=visible-value-123" in observations["parent"]
        assert "OPENAI_API_KEY=***" in observations["parent"]  # the agent's own environment, read and masked
    else:
        assert "LLM_IDE_HARMLESS_MARKER" not in observations["env"]  # nothing of the host's environment
    written = {path.name for path in (tmp_path / "out").iterdir()}
    assert {"S.traj.json", "S.log", "S.calls.jsonl.gz", "S.checkpoint.sqlite"} <= written  # all were searched above
