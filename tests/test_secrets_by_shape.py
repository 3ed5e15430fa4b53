"""Issue 37 §7: credentials found by their shape, whatever their variable is called (a URL or DSN with a password,
GitHub, GitLab, Slack and AWS tokens, JWTs), are kept from the agent's commands (never in their environment, never
readable in the sandbox) and masked wherever they show (a file the agent reads, as is, reversed, rot13'd, base64,
hex), in the patch, the trajectory and the logs; `config show` masks keys; the environment's secrets are found again
when it changes."""

from __future__ import annotations

import base64
import codecs
import json
import os
import uuid
from pathlib import Path

import pytest
from agent_script import act, reflect, write_script
from conftest import make_git_repo
from in_process import invoke

from llm_ide.credentials import credentials_in, scrubbed_environ
from llm_ide.secrets import known_secrets, redact


def shaped() -> dict[str, str]:
    """Variables whose names say nothing, holding credentials."""
    token = uuid.uuid4().hex
    return {
        "DATABASE_URL": f"postgres://app:pw{token[:10]}@db.internal:5432/app",
        "SENTRY_DSN": f"https://{token}@o12345.ingest.sentry.io/678",
        "GH_PAT": f"ghp_{token}{token[:4]}",
        "CI_GITLAB": f"glpat-{token[:20]}",
        "SLACK_HOOK_ID": f"xoxb-1234-{token[:16]}",
        "AWS_ID": f"AKIA{token[:16].upper()}",
        "SESSION": f"eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ{token[:12]}.{token[12:32]}",
        "PGCONN": f"host=db port=5432 password=s3{token[:8]} dbname=app",
    }


@pytest.mark.parametrize(
    ("value", "found"),
    [
        ("postgres://app:hunter2xyz@db/app", ["hunter2xyz"]),
        ("https://0123456789abcdef0123456789abcdef@o1.ingest.sentry.io/2", ["0123456789abcdef0123456789abcdef"]),
        ("ghp_" + "a1" * 18, ["ghp_" + "a1" * 18]),
        ("token github_pat_11ABCDEFG0123456789_abcdefghij", ["github_pat_11ABCDEFG0123456789_abcdefghij"]),
        ("AKIAABCDEFGHIJKLMNOP", ["AKIAABCDEFGHIJKLMNOP"]),
        ("host=db password=secret123 user=x", ["secret123"]),
        ("http://127.0.0.1:8000/v1?api-key=hunter2xyz", ["hunter2xyz"]),
        ("https://h/v1?api-version=2024-06-01&access_token=tok123&x=1", ["tok123"]),
        ("https://fn.azurewebsites.net/api/v1?code=hunter2xyz", ["hunter2xyz"]),  # Azure Functions' key
        ("https://h/v1?accessToken=tok123&subscriptionKey=k456&clientSecret=s789", ["tok123", "k456", "s789"]),
        ("https://h/search?q=monkey&passage=2&keyword=x", []),
        ("https://h/v1?encode=utf-8&zipcode=12345&codes=abcdef", []),
        ("https://github.com/org/repo.git", []),
        ("ssh://git@github.com/org/repo", []),
        ("/usr/local/bin:/usr/bin", []),
        ("a password is needed", []),
    ],
)
def test_credentials_by_shape(value: str, found: list[str]) -> None:
    assert credentials_in(value) == found


def test_the_environments_secrets_are_found_again_when_it_changes(monkeypatch: pytest.MonkeyPatch) -> None:
    value = f"ghp_{uuid.uuid4().hex}{uuid.uuid4().hex[:8]}"
    assert value not in known_secrets()
    monkeypatch.setenv("SOME_PLAIN_NAME", value)
    assert value in known_secrets() and redact(f"x {value[::-1]} y") == "x *** y"
    assert "SOME_PLAIN_NAME" not in scrubbed_environ()
    monkeypatch.delenv("SOME_PLAIN_NAME")
    assert value not in known_secrets() and redact(value) == value


def forms(value: str) -> list[str]:
    raw = value.encode()
    return [value, value[::-1], codecs.encode(value, "rot13"), raw.hex(), base64.b64encode(raw).decode()[:-4]]


def test_credentials_by_shape_stay_out_of_commands_and_every_output(tmp_path: Path) -> None:
    """A run whose host environment holds them under names that say nothing: the commands' environment has none of
    them; the repository's .env (which holds them) read as is, reversed, rot13'd, hex and base64 is masked in every
    observation, the trajectory, the log and the patch (the agent copies it into a file)."""
    values = shaped()
    repo = make_git_repo(tmp_path / "repo", {"app.py": "x = 1\n"})
    (repo / ".env").write_text("".join(f"{name}={value}\n" for name, value in values.items()))
    probes = {
        "env": "env; echo env-done",
        "encoded": "cat .env; rev .env; tr A-Za-z N-ZA-Mn-za-m < .env; od -An -tx1 -v .env | tr -d ' \\n'; echo; "
        "base64 -w0 .env; echo",  # od, not xxd: a bare Debian has no xxd
        "copied": "cp .env leaked.txt; echo copied",
    }
    steps = []
    for name, command in probes.items():
        steps += [act(f"Look ({name}).", "bash", command=command), reflect(False, f"Looked ({name}).")]
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = [
        "run",
        "--repo",
        str(repo),
        "--task",
        "t",
        "--model",
        write_script(tmp_path / "s.yaml", [*steps, act("Done.", "submit")]),
    ]
    args += ["--config", str(tmp_path / "c.yaml"), "--output", str(tmp_path / "out"), "--thread-id", "S"]
    done = invoke(*args, env={**os.environ, **values}, cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    trajectory = json.loads((tmp_path / "out" / "S.traj.json").read_text())
    observations = dict(zip(probes, (op["observation"] for op in trajectory["operations"]), strict=False))
    assert "env-done" in observations["env"] and [name for name in values if f"{name}=" in observations["env"]] == []
    assert observations["encoded"].count("***") >= 5 * len(values) - 1
    outputs = {path.name: path.read_text(errors="replace") for path in (tmp_path / "out").glob("S.*") if path.suffix
               in (".json", ".log", ".patch")}  # fmt: skip
    outputs["console"] = done.stdout + done.stderr
    flat = {name: text.replace("\n", "").replace("\\n", "") for name, text in outputs.items()}
    leaked = [(name, key) for name, text in flat.items() for key, value in values.items()
              if any(form in text for form in forms(credentials_in(value)[0]))]  # fmt: skip
    assert leaked == []
    assert "leaked.txt" in outputs["S.patch"] and "+DATABASE_URL=***" in outputs["S.patch"]


def test_config_show_masks_keys_by_name_and_by_shape(tmp_path: Path) -> None:
    config = tmp_path / "c.yaml"
    config.write_text(
        "secrets: [SERVICE_ID]\n"
        "environment:\n  env:\n    DATABASE_URL: postgres://u:pw12345678@h/db\n    API_TOKEN: abcdefgh1234\n"
        "    SERVICE_ID: plainvalue99\n    HARMLESS: visible-value\n"
        "model:\n  kwargs:\n    default_headers: {Authorization: 'Bearer sk-abcdefghijklmnopqrstuvwxyz'}\n"
    )
    shown = ["config", "show", "environment.env", "model.kwargs", "secrets", "--config", str(config)]
    done = invoke(*shown)
    assert done.returncode == 0, done.stderr
    for hidden in ("pw12345678", "abcdefgh1234", "plainvalue99", "sk-abcdefghijklmnopqrstuvwxyz"):
        assert hidden not in done.stdout
    assert 'environment.env.HARMLESS: "visible-value"' in done.stdout and 'secrets: ["SERVICE_ID"]' in done.stdout
    assert done.stdout.count('"***"') == 4
