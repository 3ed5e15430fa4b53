"""What a run's variants need — a navigator's server, prompts, model and endpoint, a sampler's model, every attempt's
model — is checked before anything starts, and is the same one line from `run_task`, `run_attempts`, a batch, the
Studio graphs and `llm-ide run`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES
from conftest import closed_port, make_git_repo
from doors_support import NAVIGATOR, NO_TOOLS, SAMPLED, studio_graph_run
from in_process import invoke
from swebench_fixtures import build_dataset

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.errors import UsageError
from llm_ide.run.single import run_task
from llm_ide.swebench.batch import run_swebench
from llm_ide.swebench.choice import BatchOptions


@pytest.mark.parametrize(
    ("graph", "config", "line"),
    [
        (
            NAVIGATOR,
            {"navigator": {"mode": "model", "model": "openai:gpt-5-mini"}},
            "navigator.model: model openai:gpt",
        ),
        (NAVIGATOR, {"navigator": {"mode": "model", "model": "opneai:gpt"}}, "navigator.model: model opneai:gpt: unk"),
        (NAVIGATOR, {"navigator": {"mode": "model", "model": "scripted:"}}, "navigator.model: model scripted: names"),
        (NAVIGATOR, {"navigator": {"mode": "model", "prompts": "/no.yaml"}}, "navigator.prompts /no.yaml: cannot be"),
        (
            NAVIGATOR,
            {"navigator": {"mode": "model", "prompts": "PROMPTS"}},
            "navigator.prompts PROMPTS: system: not a template Jinja can parse: Unexpected end of template.",
        ),
        (NAVIGATOR, {"navigator": {"mode": "mcp", "url": "URL"}}, "navigator at URL is unreachable: ConnectError: "),
        (NAVIGATOR, {"navigator": {"mode": "mcp"}}, "navigator.url: missing setting (navigator.mode mcp needs the"),
        (SAMPLED, {"sampling": {"k": 2, "model": "opneai:gpt"}}, "sampling.model: model opneai:gpt: unknown provider"),
    ],  # the Python API and Studio told a navigator's or a sampler's model problems once the environment had started
)
def test_what_a_variant_needs_is_one_line_at_every_door(
    tmp_path: Path, graph: str, config: dict[str, Any], line: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    url = f"http://127.0.0.1:{closed_port()}/mcp"
    prompts = tmp_path / "prompts.yaml"
    prompts.write_text("system: '{% if memory %}'\n")  # a template of the navigator's own that Jinja cannot parse
    config = json.loads(json.dumps(config).replace("URL", url).replace("PROMPTS", str(prompts)))
    line = line.replace("URL", url).replace("PROMPTS", str(prompts))
    script = tmp_path / "driver.yaml"
    script.write_text("- never used\n")
    model = f"scripted:{script}"  # the driver's: never asked, nothing starts
    for api, values in [(run_task, config), (run_attempts, {**config, "attempts": {"max": 2}})]:
        with pytest.raises(UsageError) as raised:
            api("t", model=model, settings=load_config(**values), output_dir=tmp_path / "o", run_id="r", repo=repo)
        assert str(raised.value).startswith(line) and "\n" not in str(raised.value)
    dataset, _ = build_dataset(tmp_path / "data", 1)
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    options = BatchOptions(
        model=model, output=tmp_path / "o", environment="local", config_files=[tmp_path / "config.yaml"]
    )
    with pytest.raises(UsageError) as raised:
        run_swebench(str(dataset), "test", options)
    assert str(raised.value).startswith(line)
    final = studio_graph_run(graph, {"repo": str(repo), "model": model, "config": config}, "doors-variant")
    assert final["exit_status"] == "error" and final["error"].startswith(line)
    assert final.get("operations", []) == [] and final.get("usage", {}).get("api_calls", 0) == 0
    argv = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--config", str(tmp_path / "config.yaml")]
    done = invoke(*argv, "--output", str(tmp_path / "o"), env={**os.environ, "LLM_IDE_CONFIG": "off"})
    assert done.returncode == 2 and done.stderr.startswith(f"error: {line}") and done.stderr.count("\n") == 1
    assert not (tmp_path / "o").exists()


def test_a_navigators_own_endpoint_is_named_by_its_settings_at_every_door(tmp_path: Path) -> None:
    """The navigator's model at its own endpoint (navigator.base_url), unreachable: the line told to give the run's
    --base-url (or to use --model scripted:...), which would change the driver's model, not the navigator's."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    base = f"http://127.0.0.1:{closed_port()}/v1"
    config = {"navigator": {"mode": "model", "model": "qwen", "base_url": base}}
    (script := tmp_path / "driver.yaml").write_text("- never used\n")
    hint = "endpoint with navigator.base_url or OPENAI_BASE_URL (or use navigator.model scripted:FILE.yaml for a dry"
    given = {"model": f"scripted:{script}", "output_dir": tmp_path / "o", "run_id": "r", "repo": repo}
    with pytest.raises(UsageError) as raised:
        run_task("t", settings=load_config(**config), **given)
    said = str(raised.value)
    assert said.startswith(f"navigator.model: could not reach model qwen at {base}") and hint in said, said
    (tmp_path / "config.yaml").write_text(json.dumps(config))
    argv = ["run", "--repo", str(repo), "--task", "t", "--model", f"scripted:{script}"]
    argv += ["-c", str(tmp_path / "config.yaml")]
    done = invoke(*argv, "--output", str(tmp_path / "o"), env={**os.environ, "LLM_IDE_CONFIG": "off"})
    assert done.returncode == 2 and hint in " ".join(done.stderr.split()), done.stderr


def attempts_door(door: str, tmp_path: Path, model: str, config: dict[str, Any]) -> str:
    """The one line `door` (run, run_attempts, swebench, studio: the attempts graph) stops a run with attempts at."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    (path := tmp_path / "config.yaml").write_text(json.dumps(config))
    out, environ = tmp_path / "out", {**os.environ, "LLM_IDE_CONFIG": "off"}
    if door in ("run", "swebench"):
        dataset, _ = build_dataset(tmp_path / "data", 1)
        where = ["--repo", str(repo), "--task", "Fix Cart.total."] if door == "run" else ["--subset", str(dataset)]
        done = invoke(door, *where, "--model", model, "--environment", "local", "-c", str(path), "-o", str(out),
                      env=environ)  # fmt: skip
        assert (done.returncode, done.stderr.count("\n")) == (2, 1), done.stdout + done.stderr
        return done.stderr.removeprefix("error: ").rstrip("\n")
    if door == "studio":
        final = studio_graph_run("attempts", {"repo": str(repo), "model": model, "config": config, "output": str(out)},
                                 "doors-attempt-models")  # fmt: skip
        assert final["exit_status"] == "error" and final.get("attempts", []) == [] and final.get("chosen") is None
        return final["error"]
    with pytest.raises(UsageError) as raised:
        run_attempts("t", model=model, settings=load_config(**config), output_dir=out, run_id="r", repo=repo)
    return str(raised.value)


@pytest.mark.parametrize("door", ["run", "run_attempts", "swebench", "studio"])
@pytest.mark.parametrize("missing", [2, 3])
def test_every_attempts_model_is_checked_before_anything_starts(tmp_path: Path, door: str, missing: int) -> None:
    """Only the first attempt's model (and the reviewer's and chooser's) was checked: with attempt 3's script missing,
    attempts 1 and 2 ran (and were paid for), then the run ended model_error."""
    folder = tmp_path / "scripts"
    folder.mkdir()
    for name in {"a1", "a2", "a3", "areview", "achoose"} - {f"a{missing}"}:
        (folder / f"{name}.yaml").write_text("- never used\n")
    line = attempts_door(door, tmp_path, f"scripted:{folder}/a{{attempt}}.yaml", {**NO_TOOLS, "attempts": {"max": 3}})
    assert line == f"attempt {missing}'s model: scripted model: file not found: {folder}/a{missing}.yaml"
    assert not (tmp_path / "out").exists(), "nothing was written"
    status = subprocess.run(["git", "status", "--porcelain"], cwd=tmp_path / "repo", capture_output=True, text=True)
    assert status.stdout == "" and [p.name for p in folder.iterdir() if not p.name.endswith(".yaml")] == []
