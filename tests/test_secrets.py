"""Secrets never reach an output (issue 10 §4, SPEC §11): not the trajectory, the logs, the calls log, the checkpoint
and its WAL, preds.json, stdout/stderr, nor the requests the model receives — even when the agent goes looking for
them (the agent's own environment, base64/rev/hex/URL-encoded), when they come from `--config` (headers,
`environment.env`), are only 6 characters long, are named only `…_PASS`, or are echoed by the model endpoint."""

from __future__ import annotations

import base64
import contextlib
import gzip
import json
import os
import subprocess
import sys
import uuid
import zlib
from pathlib import Path
from urllib.parse import quote, quote_plus

import pytest
import yaml
from agent_script import act, reflect, single_call
from conftest import BASE_IMAGE, base_image_client, make_git_repo
from openai_server import OpenAIServer
from swebench_fixtures import build_dataset

from llm_ide.credentials import is_secret_name
from llm_ide.environments import LocalEnvironment

CLI = "from llm_ide.cli import app; app()"
PY = (
    "python3 -c 'import os,sys,urllib.parse as u; v=os.environ[sys.argv[1]]; print(v.encode().hex(), "
    'u.quote(v, safe=""))\''
)
CONFIG_PROBE = "printenv SERVICE_TOKEN | base64; printenv DB_PASS | rev"
PROBES = [
    ("env", "env; echo env-done"),
    ("printenv", "printenv OPENAI_API_KEY; echo printenv-rc=$?"),
    ("parent", "base64 /proc/$PPID/environ; rev /proc/$PPID/environ; xxd -p /proc/$PPID/environ; echo parent-done"),
    ("config", f"{CONFIG_PROBE}; {PY} SERVICE_TOKEN; {PY} DB_PASS; {PY} DATABASE_URL"),
    ("file", 'printf "%s\\n%s\\n" "$DB_PASS" "$SERVICE_TOKEN" > leaked.txt; cat leaked.txt; echo file-done'),
]


def secrets() -> tuple[dict[str, str], dict[str, str]]:
    """(the host's environment secrets, the secrets of the --config file)."""
    token = uuid.uuid4().hex
    host = {
        "OPENAI_API_KEY": f"sk-test-{token}",
        "ANTHROPIC_API_KEY": f"sk-ant-{token[::-1]}",
        "GITHUB_TOKEN": f"ghp_{token[:20]}",
        "MY_SERVICE_PASSWORD": f"pw-{token[5:25]}",
        "AWS_SECRET_ACCESS_KEY": f"aws-{token[10:]}",
        "OPENAI_ORGANIZATION": f"org-{token[3:23]}",
        "HOST_DB_PASS": "hX9qLw",
        "BASIC_AUTH": f"user:{token[:12]}",
    }
    config = {
        "SERVICE_TOKEN": f"tk+{token[:16]}=&x",
        "DB_PASS": "Qx7pZ2",  # six characters, and no KEY/TOKEN in its name
        "DATABASE_URL": f"postgres://app:{token[8:20]}@db:5432/app",  # marked secret in the settings
        "X-Api-Key": f"hdr-{token[4:28]}",
    }
    return host, config


def forms(value: str) -> set[str]:
    """The value and the encodings an agent might print it in."""
    raw = value.encode()
    found = {value, value[::-1], quote(value, safe=""), quote_plus(value), raw.hex(), raw.hex().upper()}
    for offset in range(3):
        encoded = base64.b64encode(b"\0" * offset + raw).decode()
        found.add(encoded[(8 * offset + 5) // 6 : (8 * (offset + len(raw))) // 6])
    return found


def readable(data: bytes) -> bytes:
    """The bytes and whatever gzip or zlib streams they hold, decompressed (a compressed checkpoint value or calls
    log hides nothing from the scan)."""
    parts = [data]
    if data[:2] == b"\x1f\x8b":
        with contextlib.suppress(OSError, EOFError, zlib.error):
            parts.append(gzip.decompress(data))
    for header in (b"\x78\x9c", b"\x78\x01", b"\x78\xda", b"\x78\x5e"):
        start = data.find(header)
        while start >= 0:
            with contextlib.suppress(zlib.error):
                parts.append(zlib.decompressobj().decompress(data[start:]))
            start = data.find(header, start + 1)
    return b"".join(parts)


def leaks(directory: Path, values: list[str]) -> list[str]:
    """Every (file, secret) pair where a form of the secret occurs in a file under `directory` (checkpoint, WAL…);
    the agent's own working copy of a batch instance (`<id>/repo`, where it wrote a secret into a file) aside."""
    found = []
    for path in sorted(p for p in directory.rglob("*") if p.is_file() and "repo" not in p.relative_to(directory).parts):
        raw = gzip.decompress(path.read_bytes()) if path.suffix == ".gz" else path.read_bytes()
        data = readable(raw).replace(b"\n", b"")
        found += [f"{path.name}: {value}" for value in values if any(f.encode() in data for f in forms(value))]
    return found


def in_text(text: str, values: list[str]) -> list[str]:
    flat = text.replace("\n", "")
    return [value for value in values if any(form in flat for form in forms(value))]


def replies(echo: str) -> list[str]:
    result: list[str] = []
    for number, (name, command) in enumerate(PROBES):
        thought = f"Inspect the environment ({name})[1](app.py:1)."
        if number == 0:
            thought += f" The endpoint says my key is {echo}."  # a key echoed inside a completion
        result += [act(thought, "bash", command=command), reflect(False, f"Looked with {name}; saw {echo}.")]
    return single_call([*result, act("Nothing else to do.", "submit")])  # one call per step


def write_config(path: Path, config_secrets: dict[str, str]) -> Path:
    env = {key: config_secrets[key] for key in ("SERVICE_TOKEN", "DB_PASS", "DATABASE_URL")}
    data = {
        "environment": {"tools": [], "env": env},
        "model": {"kwargs": {"default_headers": {"X-Api-Key": config_secrets["X-Api-Key"], "X-Team": "visible"}}},
        "secrets": ["DATABASE_URL"],
        "agent": {"step_limit": 30},
    }
    path.write_text(yaml.safe_dump(data))
    return path


def process_env(host_secrets: dict[str, str]) -> dict[str, str]:
    env = {key: value for key, value in os.environ.items() if key != "OPENAI_BASE_URL"}
    return env | host_secrets | {"LLM_IDE_HARMLESS_MARKER": "visible-value-123"}


def check_server(server: OpenAIServer, host_secrets: dict[str, str], values: list[str]) -> None:
    assert {request.headers["authorization"] for request in server.requests} == {
        f"Bearer {host_secrets['OPENAI_API_KEY']}"
    }
    assert in_text("\n".join(json.dumps(request.body) for request in server.requests), values) == []


@pytest.mark.parametrize("environment", ["local", pytest.param("docker", marks=[pytest.mark.docker, pytest.mark.slow])])
def test_secrets_stay_out_of_every_output(tmp_path: Path, environment: str) -> None:
    extra: list[str] = []
    if environment == "docker":
        base_image_client()
        extra = ["--environment", "docker", "--image", BASE_IMAGE]
    from conftest import make_git_repo

    make_git_repo(tmp_path / "repo", {"app.py": "print('hello')\n"})
    host_secrets, config_secrets = secrets()
    config = write_config(tmp_path / "secrets.yaml", config_secrets)
    script = replies(host_secrets["OPENAI_API_KEY"])
    command = [sys.executable, "-c", CLI, "run", "--repo", str(tmp_path / "repo"), "--task", "Look, then submit."]
    command += ["--model", "test-org/secret-probe-model", "--thread-id", "S", "--output", str(tmp_path / "out")]
    command += ["--config", str(config), *extra]

    with OpenAIServer(replies=script) as server:
        command += ["--base-url", server.url]
        result = subprocess.run(
            command, env=process_env(host_secrets), cwd=tmp_path, capture_output=True, text=True, timeout=600
        )

    assert result.returncode == 0, result.stdout + result.stderr
    assert server.hits == len(script)
    values = [*host_secrets.values(), *config_secrets.values()]
    check_server(server, host_secrets, values)
    assert leaks(tmp_path / "out", values) == []
    assert in_text(result.stdout + result.stderr, values) == []

    traj = json.loads((tmp_path / "out" / "S.traj.json").read_text())
    assert traj["info"]["exit_status"] == "submitted"
    observations = {name: op["observation"] for (name, _), op in zip(PROBES, traj["operations"], strict=False)}
    assert all(f"{name}-done" in observations[name] for name in ("env", "parent", "file"))
    assert [name for name in host_secrets if f"{name}=" in observations["env"]] == []
    assert "printenv-rc=1" in observations["printenv"]
    assert observations["config"].count("***") >= 5 and "***" in observations["file"]
    assert "leaked.txt" in traj["info"]["submission"] and "+***" in traj["info"]["submission"]
    assert traj["info"]["config"]["model"]["kwargs"]["default_headers"] == {"X-Api-Key": "***", "X-Team": "visible"}
    assert traj["info"]["config"]["environment"]["env"]["DB_PASS"] == "***"
    if environment == "local":
        assert "LLM_IDE_HARMLESS_MARKER=visible-value-123" in observations["env"]
    else:
        assert "LLM_IDE_HARMLESS_MARKER" not in observations["env"]  # nothing of the host's environment
    written = {path.name for path in (tmp_path / "out").iterdir()}
    assert {"S.traj.json", "S.log", "S.calls.jsonl.gz", "S.checkpoint.sqlite"} <= written  # all were searched above


def test_secrets_stay_out_of_a_batch_and_its_preds(tmp_path: Path) -> None:
    dataset, rows = build_dataset(tmp_path / "data", 1)
    host_secrets, config_secrets = secrets()
    config = write_config(tmp_path / "secrets.yaml", config_secrets)
    script = replies(host_secrets["OPENAI_API_KEY"])
    command = [sys.executable, "-c", CLI, "swebench", "--subset", str(dataset), "--split", "test"]
    command += ["--model", "test-org/secret-probe-model", "-o", str(tmp_path / "out"), "--environment", "local"]
    command += ["--config", str(config)]
    with OpenAIServer(replies=script) as server:
        command += ["--base-url", server.url]
        result = subprocess.run(
            command, env=process_env(host_secrets), cwd=tmp_path, capture_output=True, text=True, timeout=600
        )
    assert result.returncode == 0, result.stdout + result.stderr
    values = [*host_secrets.values(), *config_secrets.values()]
    check_server(server, host_secrets, values)
    assert leaks(tmp_path / "out", values) == []
    assert in_text(result.stdout + result.stderr, values) == []
    preds = json.loads((tmp_path / "out" / "preds.json").read_text())
    assert "leaked.txt" in preds[rows[0]["instance_id"]]["model_patch"]


@pytest.mark.parametrize(
    ("name", "secret"),
    [
        ("OPENAI_API_KEY", True),
        ("DB_PASS", True),
        ("PGPASSWORD", True),
        ("X-Api-Key", True),
        ("Authorization", True),
        ("BASIC_AUTH", True),
        ("AWS_SECRET_ACCESS_KEY", True),
        ("GOOGLE_APPLICATION_CREDENTIALS", True),
        ("GIT_AUTHOR_NAME", False),
        ("PATH", False),
        ("KEYBOARD_LAYOUT", False),
        ("PASSAGE_COUNT", False),
        ("GIT_CONFIG_KEY_0", False),  # a git setting's name (GIT_CONFIG_COUNT), not a key
        ("GIT_CONFIG_KEY_12", False),
        ("MY_GIT_CONFIG_KEY_0", True),
        ("GIT_CONFIG_KEY_TOKEN", True),
    ],
)
def test_secret_names(name: str, secret: bool) -> None:
    assert is_secret_name(name) is secret


@pytest.mark.parametrize("sandbox", ["bwrap", "none"])
def test_git_settings_given_in_the_environment_reach_the_commands_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox: str
) -> None:
    """GIT_CONFIG_COUNT with GIT_CONFIG_KEY_<n> and _VALUE_<n> (CI sets them): the key's name was taken for a secret
    and kept from the commands, so every git command of the agent failed (`unable to parse command-line config`)."""
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    for name, value in {"COUNT": "1", "KEY_0": "alias.greeting", "VALUE_0": "!echo hello-from-git-config"}.items():
        monkeypatch.setenv(f"GIT_CONFIG_{name}", value)
    env = LocalEnvironment(repo, tools_dir=tmp_path / "tools", sandbox=sandbox)
    try:
        done = env.execute("git greeting; echo x >> a.py; git status --short; echo $GIT_CONFIG_KEY_0")
    finally:
        env.close()
    assert (done.returncode, done.output.splitlines()) == (0, ["hello-from-git-config", " M a.py", "alias.greeting"])
