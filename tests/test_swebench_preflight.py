"""What a batch checks before it starts, each refusal in one line with exit 2: the model's endpoint, a
dataset or model out of reach offline, a missing API key, a bad --slice or --environment, a local batch's
sandbox paths that are not there."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from conftest import closed_port
from in_process import invoke
from swebench_fixtures import (
    FIX_COMMAND,
    build_dataset,
    cli,
    write_script,
)

from llm_ide.swebench.preflight import model_endpoint


@pytest.mark.parametrize(
    ("model", "base_url", "env_url", "expected"),
    [
        ("scripted:x.yaml", None, None, None),
        ("tensorblock/gpt-5-mini", None, None, "https://api.openai.com/v1"),
        ("tensorblock/gpt-5-mini", None, "http://proxy:4000/v1", "http://proxy:4000/v1"),
        ("tensorblock/gpt-5-mini", "http://127.0.0.1:1/v1", "http://proxy:4000/v1", "http://127.0.0.1:1/v1"),
        ("openai:gpt-5-mini", None, None, "https://api.openai.com/v1"),
        ("anthropic:claude-sonnet-4-5", None, None, "https://api.anthropic.com"),
        ("anthropic:claude-sonnet-4-5", "http://127.0.0.1:1", None, "http://127.0.0.1:1"),
        ("groq:llama-3", None, None, None),
    ],
)
def test_model_endpoint(model: str, base_url: str | None, env_url: str | None, expected: str | None) -> None:
    previous = os.environ.pop("OPENAI_BASE_URL", None)
    try:
        if env_url:
            os.environ["OPENAI_BASE_URL"] = env_url
        assert model_endpoint(model, base_url) == expected
    finally:
        os.environ.pop("OPENAI_BASE_URL", None)
        if previous is not None:
            os.environ["OPENAI_BASE_URL"] = previous


def offline_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "HF_", "LLM_IDE_"))}
    return {**env, "HF_ENDPOINT": f"http://127.0.0.1:{closed_port()}", "HF_HOME": str(tmp_path / "hf")}


@pytest.mark.parametrize("command", ["swebench", "swebench-single"])
def test_request_command_lines_offline_fail_with_one_clear_line(tmp_path: Path, command: str) -> None:
    env = offline_env(tmp_path)
    args = ["mini-extra", command, "--subset", "verified", "--split", "test", "--model", "tensorblock/gpt-5-mini"]
    result = cli(*args, "-o", str(tmp_path / "out"), env=env)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert result.stderr.startswith("error: could not reach dataset princeton-nlp/SWE-bench_Verified (split test)")
    assert "--subset path/to/SWE-bench_Verified-test.jsonl" in result.stderr
    assert not (tmp_path / "out").exists()


def test_unreachable_model_and_missing_key_fail_before_the_batch(tmp_path: Path) -> None:
    dataset, _ = build_dataset(tmp_path / "data", 3)
    env = offline_env(tmp_path)
    base = ["mini-extra", "swebench", "--subset", str(dataset), "--split", "test", "--model", "tensorblock/gpt-5-mini"]
    base += ["--environment", "local"]  # the model is checked whether a Docker engine runs here or not
    port = closed_port()
    unreachable = cli(*base, "--base-url", f"http://127.0.0.1:{port}/v1", "-o", str(tmp_path / "o1"), env=env)
    assert unreachable.returncode == 2 and unreachable.stderr.count("\n") == 1, unreachable.stderr
    assert unreachable.stderr.startswith(
        f"error: could not reach model tensorblock/gpt-5-mini at http://127.0.0.1:{port}/v1"
    )
    no_key = cli(*base, "-o", str(tmp_path / "o2"), env=env)
    assert no_key.returncode == 2 and no_key.stderr.count("\n") == 1, no_key.stderr
    assert "OPENAI_API_KEY is not set" in no_key.stderr
    bad_args = cli(
        "llm-ide", "swebench", "--subset", str(dataset), "--slice", "x:y", "--model", "scripted:s.yaml", env=env
    )
    assert (bad_args.returncode, bad_args.stderr.strip()) == (
        2,
        "error: invalid slice 'x:y': expected integers, e.g. 0:10",
    )
    bad_env = cli("llm-ide", "swebench", "--subset", str(dataset), "--environment", "podman", "--model", "m", env=env)
    assert (bad_env.returncode, bad_env.stderr.strip()) == (
        2,
        "error: Invalid value for '--environment': 'podman' is not one of 'local', 'docker'. "
        "(see: llm-ide swebench --help)",
    )


@pytest.mark.parametrize(
    ("environment", "said"),
    [
        ({"readable": ["/no-such-data"]}, "error: environment.readable: /no-such-data: no such file or folder"),
        ({"writable": ["/no-such-cache"]}, "error: environment.writable: /no-such-cache: no such file or folder"),
    ],
)
def test_a_local_batch_refuses_paths_of_its_sandbox_that_are_not_there(
    tmp_path: Path, environment: dict, said: str
) -> None:
    """`run` refuses them before it starts; a batch in the local environment ran every instance without them (its
    commands found the one read-only, the other not there), without a word."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    (config := tmp_path / "c.yaml").write_text(yaml.safe_dump({"environment": {"tools": [], **environment}}))
    model = write_script(tmp_path / "fix.yaml", [FIX_COMMAND])
    args = ["swebench", "--subset", str(dataset), "--model", model, "--environment", "local", "-c", str(config)]
    refused = invoke(*args, "-o", str(tmp_path / "out"))
    assert (refused.returncode, refused.stderr.count("\n")) == (2, 1), refused.stdout + refused.stderr
    assert refused.stderr.startswith(said) and not (tmp_path / "out" / "preds.json").exists()
