"""`llm-ide run` checks the model name, its API key and its endpoint before the environment starts and the tools
install: a bad model is one line and exit status 2, and nothing was set up."""

from __future__ import annotations

import os
import re
import subprocess
import uuid
from pathlib import Path

import pytest
from conftest import closed_port, make_git_repo
from in_process import invoke
from openai_server import OpenAIServer


def run_cli(tmp_path: Path, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    environ = {key: value for key, value in os.environ.items() if not key.startswith(("OPENAI_", "ANTHROPIC_"))}
    environ |= {"LLM_IDE_TOOLS_CACHE": str(tmp_path / "tools-cache"), **env}
    return invoke("run", "--repo", str(repo), "--task", "t", "--output", str(tmp_path / "out"), *args, env=environ)


@pytest.mark.parametrize(
    ("args", "env", "message"),
    [
        (["--model", "openai:x"], {}, "error: model openai:x: OPENAI_API_KEY is not set"),
        (
            ["--model", "gpt-x"],
            {},
            "error: model gpt-x: OPENAI_API_KEY is not set (for a keyless local server give --base-url or "
            "OPENAI_BASE_URL)",
        ),
        (["--model", "nosuchprovider-x:y"], {"OPENAI_API_KEY": "k"}, "error: could not reach model"),
        (["--model", "openai:x", "--base-url", "http://127.0.0.1:{port}/v1"], {"OPENAI_API_KEY": "k"}, None),
        (
            ["--model", "openai:x", "--base-url", "http://127.0.0.1:{port}/v1"],
            {},
            "error: model openai:x: OPENAI_API_KEY is not set (a keyless server at --base-url: give its name alone, x)",
        ),
        (
            ["--model", "openai:x", "--environment", "docker", "--image", "i"],
            {},
            "error: model openai:x: OPENAI_API_KEY is not set",
        ),
        (
            ["--model", "opneai:gpt-5-mini"],
            {"OPENAI_API_KEY": "k"},
            "error: model opneai:gpt-5-mini: unknown provider 'opneai' (did you mean openai?); known providers: "
            "anthropic, anthropic_bedrock, ",
        ),
        (["--model", "foo:bar"], {}, "error: model foo:bar: unknown provider 'foo'; known providers: anthropic, "),
        (
            ["--model", "anthropic:claude-haiku-4-5"],
            {"OPENAI_API_KEY": "k"},
            "error: model anthropic:claude-haiku-4-5: ANTHROPIC_API_KEY is not set",
        ),
        (
            ["--model", "anthropic:claude-haiku-4-5"],
            {"ANTHROPIC_API_KEY": "k", "ANTHROPIC_BASE_URL": "http://127.0.0.1:{port}"},
            "error: could not reach model anthropic:claude-haiku-4-5 at http://127.0.0.1:{port} (Connection refused)",
        ),
        (["--model", "groq:llama-3"], {}, "error: model groq:llama-3: GROQ_API_KEY is not set"),
    ],
)
def test_bad_model_fails_in_one_line_before_the_environment_starts(
    tmp_path: Path, args: list[str], env: dict[str, str], message: str | None
) -> None:
    port = closed_port()
    args = [arg.format(port=port) for arg in args]
    env = {key: value.format(port=port) for key, value in env.items()}
    message = message and message.format(port=port)
    if "nosuchprovider-x:y" in args:  # an OpenAI-compatible name (unknown provider prefix) at an endpoint that is down
        env = {**env, "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1"}
    done = run_cli(tmp_path, *args, env=env)
    expected = message or f"error: could not reach model openai:x at http://127.0.0.1:{port}/v1 (Connection refused)"
    assert done.returncode == 2, done.stdout + done.stderr
    assert len(done.stderr.splitlines()) == 1 and done.stderr.startswith(expected), done.stderr
    assert done.stdout == "", "nothing started: no phase was printed"
    assert not (tmp_path / "out").exists(), "the run never started: no output directory"
    assert not (tmp_path / "tools-cache").exists(), "no tool was installed"


@pytest.mark.parametrize(
    ("task", "message"),
    [
        (["--task", ""], "error: the task is empty (--task): say what the agent should do"),
        (["--task", "  \n\t"], "error: the task is empty (--task): say what the agent should do"),
        (["--task-file", "{blank}"], "error: the task is empty (task file {blank}): say what the agent should do"),
        (["--task-file", "{binary}"], "error: task file {binary}: not UTF-8 text"),
        (["--task-file", "{folder}"], "error: task file {folder} is a folder: give the file that holds the task"),
        (["--task-file", "{missing}"], "error: task file not found: {missing}"),
        (["--task-file", "{pipe}"], "error: the task is empty (task file {pipe}): say what the agent should do"),
    ],
)
def test_an_empty_task_is_refused_before_anything_runs(tmp_path: Path, task: list[str], message: str) -> None:
    """A pipe (`<(…)`) is read as a file is (it was "not found")."""
    files: dict[str, Path | str] = {"blank": tmp_path / "blank.md", "binary": tmp_path / "binary.md"}
    files["folder"], files["missing"] = tmp_path, tmp_path / "missing.md"
    read, write = os.pipe()
    os.write(write, b"  \n")
    os.close(write)
    files["pipe"] = f"/dev/fd/{read}"
    files["blank"].write_text("\n   \n")
    files["binary"].write_bytes(b"\xff\xfe\x00")
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    script = tmp_path / "script.yaml"
    script.write_text("- never used\n")
    args = ["run", "--repo", str(repo), *[a.format(**files) for a in task], "--model", f"scripted:{script}"]
    done = invoke(*args, "--output", str(tmp_path / "out"))
    os.close(read)
    assert (done.returncode, done.stderr) == (2, message.format(**files) + "\n")
    assert done.stdout == "" and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("folder", "error: reproduction script {path} is a folder: give one script (Python, or .sh)"),
        ("empty", "error: reproduction script {path} is empty: it would show nothing of the issue"),
        ("missing", "error: reproduction script not found: {path}"),
    ],
)
def test_a_reproduction_that_is_no_script_is_refused_before_anything_runs(
    tmp_path: Path, given: str, message: str
) -> None:
    path = tmp_path / given
    if given == "folder":
        path.mkdir()
    elif given == "empty":
        path.write_text("\n  \n")
    script = tmp_path / "script.yaml"
    script.write_text("- never used\n")
    done = run_cli(tmp_path, "--model", f"scripted:{script}", "--reproduction", str(path), env={})
    assert (done.returncode, done.stderr, done.stdout) == (2, message.format(path=path) + "\n", "")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(("supports", "refused"), [(False, True), (True, False), (None, False)])
def test_tools_asked_of_a_llama_cpp_template_without_them_is_one_line(
    tmp_path: Path, supports: bool | None, refused: bool
) -> None:
    """llama.cpp's server drops the tools from the prompt when its chat template has none: the model, told its actions
    are tools, saw none and every reply was rejected. Its /props says so (a server without /props: not asked)."""
    from llm_ide.config import load_config
    from llm_ide.run.preflight import PreflightError, check_model

    props = None if supports is None else {"chat_template_caps": {"supports_tools": supports}}
    settings = load_config(model={"action_format": "tools"})
    with OpenAIServer(replies=["never asked"], props=props, models=None) as server:
        root = server.url.removesuffix("/v1")
        line = (
            f"model small: the server's chat template renders no tools ({root}/props: supports_tools false); start "
            "llama-server with one that does (--jinja, --chat-template-file), or set model.action_format: text"
        )
        if refused:
            with pytest.raises(PreflightError, match=f"^{re.escape(line)}$"):
                check_model("small", settings, server.url)
        else:
            check_model("small", settings, server.url)
        check_model("small", load_config(model={"action_format": "text"}), server.url)  # text: not asked
        assert server.hits == 0


def test_run_task_refuses_an_empty_task_before_writing_anything(tmp_path: Path) -> None:
    from llm_ide.config import load_config
    from llm_ide.errors import UsageError
    from llm_ide.run.single import run_task

    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    with pytest.raises(UsageError, match=r"^the task is empty: say what the agent should do$"):
        run_task(
            " \n", model="scripted:none.yaml", settings=load_config(), output_dir=tmp_path / "o", run_id="r", repo=repo
        )
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("form", ["--base-url {url}", "--base-url={url}"])
def test_a_password_in_the_base_url_is_masked_in_the_line_that_refuses_it(tmp_path: Path, form: str) -> None:
    """A URL's password given on the command line was printed whole by the line saying the endpoint does not answer
    (one in OPENAI_BASE_URL was masked)."""
    password = f"pw{uuid.uuid4().hex[:12]}"
    url = f"http://user:{password}@127.0.0.1:{closed_port()}/v1"
    done = run_cli(tmp_path, "--model", "local-x", *form.format(url=url).split(" "), env={"OPENAI_API_KEY": "k"})
    assert done.returncode == 2 and "error: could not reach model local-x at http://user:***@127.0.0.1:" in done.stderr
    assert password not in done.stdout + done.stderr, done.stderr
