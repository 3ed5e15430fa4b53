"""Every door checks what the command line checks (issue 40 §1): the same bad input — a folder that is not a git
repository, a model without its key, an endpoint that does not answer (or answers plain HTTP to https://), an empty
model name — is the same one line from `llm-ide run` (exit 2), from `run_task` (a UsageError of the one hierarchy) and
from the graphs LangGraph Studio serves (the run ends at once, that line its `error`), and nothing is set up or written
first; a Studio run holds the repository it changes as the command line's does. The Python API's own arguments are in
test_doors_python_api, a thread given again in test_doors_threads, what variants and attempts need in
test_doors_variants, the environment, limits, task and output folder in test_doors_options."""

from __future__ import annotations

import os
import socket
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, write_script
from conftest import closed_port, make_git_repo
from doors_support import NO_TOOLS, studio_graph_run, studio_run
from in_process import invoke
from openai_server import OpenAIServer

from llm_ide.config import load_config
from llm_ide.errors import LlmIdeError, UsageError
from llm_ide.inputs import API, CLI, GRAPH
from llm_ide.priced import langchain_providers
from llm_ide.run.guard import repo_lock
from llm_ide.run.preflight import check_model
from llm_ide.run.single import run_task


def case(tmp_path: Path, name: str) -> tuple[dict[str, Any], dict[str, str], str]:
    """(inputs, environment, the line every door says, naming its inputs in its own words: {base_url}, {model},
    {repo}) of one bad input."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    script = tmp_path / "script.yaml"
    script.write_text("- never used\n")
    port = closed_port()
    plain = tmp_path / "plain"
    plain.mkdir(exist_ok=True)
    cases = {
        "not a repository": (
            {"repo": plain, "model": f"scripted:{script}"},
            {},
            f"{plain} is not a git repository: the run's patch is the change against a commit; make one first: "
            f"git -C {plain} init && git -C {plain} add -A && git -C {plain} commit -m base",
        ),
        "a file": (
            {"repo": script, "model": f"scripted:{script}"},
            {},
            f"{script} is a file, not a repository: give the folder of a git repository",
        ),
        "a subfolder": (
            {"repo": repo / "shop", "model": f"scripted:{script}"},
            {},
            f"{repo / 'shop'} is a folder inside the git repository {repo}: give the repository's own folder (the "
            "run's patch is the change of the whole repository against its commit)",
        ),
        "no key": (
            {"repo": repo, "model": "openai:gpt-5-mini"},
            {},
            "model openai:gpt-5-mini: OPENAI_API_KEY is not set",
        ),
        "unreachable": (
            {"repo": repo, "model": "local-model", "base_url": f"http://127.0.0.1:{port}/v1"},
            {},
            f"could not reach model local-model at http://127.0.0.1:{port}/v1 (Connection refused); give a reachable "
            "OpenAI-compatible endpoint with {base_url} or OPENAI_BASE_URL (or use {model} scripted:FILE.yaml for a "
            "dry run)",
        ),
        "unreachable, its password masked": (  # the Python API and Studio said the password
            {"repo": repo, "model": "local-model", "base_url": f"http://me:pass-{port}-word@127.0.0.1:{port}/v1"},
            {},
            f"could not reach model local-model at http://me:***@127.0.0.1:{port}/v1 (Connection refused); give a "
            "reachable OpenAI-compatible endpoint with {base_url} or OPENAI_BASE_URL (or use {model} "
            "scripted:FILE.yaml for a dry run)",
        ),
        "no scheme": (
            {"repo": repo, "model": "local-model", "base_url": f"127.0.0.1:{port}/v1"},
            {},
            f"model local-model: the endpoint 127.0.0.1:{port}/v1 is no http:// or https:// URL (e.g. "
            f"http://127.0.0.1:{port}/v1)",
        ),
        "a port out of range": (  # the rest were tracebacks: urlparse's ValueError
            {"repo": repo, "model": "local-model", "base_url": "http://127.0.0.1:99999/v1"},
            {},
            "model local-model: the endpoint http://127.0.0.1:99999/v1 is no valid URL (Port out of range 0-65535)",
        ),
        "a broken host": (
            {"repo": repo, "model": "local-model", "base_url": "http://[::1/v1"},
            {},
            "model local-model: the endpoint http://[::1/v1 is no valid URL (Invalid IPv6 URL)",
        ),
        "empty script": (
            {"repo": repo, "model": "scripted:"},
            {},
            "model scripted: names no script; give scripted:FILE.yaml (a YAML list of replies)",
        ),
        "no key, a bare name": (
            {"repo": repo, "model": "local-model"},
            {},
            "model local-model: OPENAI_API_KEY is not set (for a keyless local server give {base_url} or "
            "OPENAI_BASE_URL)",
        ),
        "no key at an endpoint": (
            {"repo": repo, "model": "openai:local", "base_url": f"http://127.0.0.1:{port}/v1"},
            {},
            "model openai:local: OPENAI_API_KEY is not set (a keyless server at {base_url}: give its name alone, "
            "local)",
        ),
        "an unknown provider": (
            {"repo": repo, "model": "opneai:gpt-5-mini"},
            {},
            "model opneai:gpt-5-mini: unknown provider 'opneai' (did you mean openai?); known providers: "
            f"{', '.join(sorted(langchain_providers()))} (or give {{base_url}} for a model name of an "
            "OpenAI-compatible endpoint)",
        ),
        "in the git directory": (
            {"repo": repo / ".git" / "refs", "model": f"scripted:{script}"},
            {},
            f"{repo / '.git' / 'refs'} is inside the git directory {repo / '.git'}, not a work tree: give {{repo}} "
            f"{repo}",
        ),
        "empty provider model": (
            {"repo": repo, "model": "openai:"},
            {"OPENAI_API_KEY": "sk-test"},
            "model openai: names no model after the provider; give openai:NAME",
        ),
    }
    return cases[name]


NAMES = [
    "not a repository",
    "a file",
    "a subfolder",
    "no key",
    "unreachable",
    "unreachable, its password masked",
    "no scheme",
    "a port out of range",
    "a broken host",
    "empty script",
    "no key, a bare name",
    "no key at an endpoint",
    "an unknown provider",
    "in the git directory",
    "empty provider model",
]


@pytest.fixture(autouse=True)
def keyless(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [key for key in os.environ if key.startswith(("OPENAI_", "ANTHROPIC_"))]:
        monkeypatch.delenv(name, raising=False)


def untouched(tmp_path: Path) -> None:
    assert not (tmp_path / "out").exists(), "nothing was written"
    assert list((tmp_path / "plain").iterdir()) == [], "nothing was run in the folder"


@pytest.mark.parametrize("name", NAMES)
def test_the_python_api_raises_the_line_the_command_line_prints(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, env, line = case(tmp_path, name)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    with pytest.raises(UsageError) as raised:
        run_task("Fix Cart.total.", settings=load_config(), output_dir=tmp_path / "out", run_id="r", **inputs)
    assert str(raised.value) == line.format_map(vars(API)) and isinstance(raised.value, LlmIdeError)
    untouched(tmp_path)


def test_https_to_a_plain_http_endpoint_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    """A local server given as https:// got through (its port answers): the run set up, then failed its first call
    after every retry, a minute later, saying nothing of TLS."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with OpenAIServer(replies=["never asked"]) as server:
        url = server.url.replace("http://", "https://")
        line = f"model tls-model: {url} does not answer TLS (wrong version number); for a plain HTTP server give "
        with pytest.raises(UsageError) as raised:
            run_task("t", model="tls-model", settings=load_config(), repo=repo, output_dir=tmp_path / "out",
                     run_id="r", base_url=url)  # fmt: skip
        assert str(raised.value) == line + server.url
        argv = ["run", "--repo", str(repo), "--task", "t", "--model", "tls-model", "--base-url", url]
        done = invoke(*argv, "--output", str(tmp_path / "out"), env={**os.environ, "LLM_IDE_CONFIG": "off"})
        assert (done.returncode, done.stderr) == (2, f"error: {line}{server.url}\n") and server.hits == 0
    assert not (tmp_path / "out").exists()


def quiet_to_tls(listener: socket.socket) -> None:
    """An HTTP server as llama.cpp's is: it answers a request once its head has ended (a blank line), so a TLS hello,
    which never ends one, is met with silence until the client leaves."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        with connection:
            head = b""
            while b"\r\n\r\n" not in head and (data := connection.recv(4096)):
                head += data
            if b"\r\n\r\n" in head:
                connection.sendall(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")


def test_https_to_a_plain_http_server_silent_to_tls_is_one_line_before_anything_starts(tmp_path: Path) -> None:
    """llama.cpp's server says nothing to a TLS hello: the handshake's timeout let the run start, whose every call then
    waited model.timeout (600 s) before its retries."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with socket.create_server(("127.0.0.1", 0)) as listener:
        threading.Thread(target=quiet_to_tls, args=(listener,), daemon=True).start()
        url = f"https://127.0.0.1:{listener.getsockname()[1]}/v1"
        with pytest.raises(UsageError) as raised:
            run_task(
                "t",
                model="local",
                settings=load_config(),
                repo=repo,
                output_dir=tmp_path / "o",
                run_id="r",
                base_url=url,
            )
    plain = url.replace("https://", "http://")
    assert str(raised.value) == (
        f"model local: {url} does not answer TLS (it answers plain HTTP); for a plain HTTP server give {plain}"
    )
    assert not (tmp_path / "o").exists()


def slow_to_handshake(listener: socket.socket) -> None:
    """An HTTPS port as nginx's is when its handshakes are slow: a plain HTTP request is answered at once ("400 The
    plain HTTP request was sent to HTTPS port"), a TLS hello not before the client leaves."""
    while True:
        try:
            connection, _ = listener.accept()
        except OSError:
            return
        threading.Thread(target=answer_as_https_port, args=(connection,), daemon=True).start()


def answer_as_https_port(connection: socket.socket) -> None:
    with connection:
        head = connection.recv(4096)
        if head[:1] == b"\x16":  # a TLS record: the hello's answer is not ready before the client gives up
            while connection.recv(4096):
                pass
            return
        while b"\r\n\r\n" not in head and (data := connection.recv(4096)):
            head += data
        said = b"The plain HTTP request was sent to HTTPS port"
        connection.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: %d\r\n\r\n%s" % (len(said), said))


def test_an_https_endpoint_slow_to_handshake_is_not_taken_for_one_that_speaks_plain_http() -> None:
    """The handshake's timeout sent a plain HTTP request to the port, which an HTTPS port of nginx answers (with a 400):
    a working endpoint was refused as "does not answer TLS (it answers plain HTTP)"."""
    settings = load_config(model={"check_name": False})
    with socket.create_server(("127.0.0.1", 0)) as listener:
        threading.Thread(target=slow_to_handshake, args=(listener,), daemon=True).start()
        port = listener.getsockname()[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as plain:  # it does answer plain HTTP
            plain.sendall(b"HEAD / HTTP/1.0\r\n\r\n")
            assert plain.recv(12) == b"HTTP/1.1 400"
        check_model("slow-tls", settings, f"https://127.0.0.1:{port}/v1", timeout=0.2, quiet=True)


@pytest.mark.parametrize("name", NAMES)
def test_the_command_line_prints_it_and_exits_2(tmp_path: Path, name: str) -> None:
    inputs, env, line = case(tmp_path, name)
    argv = ["run", "--repo", str(inputs["repo"]), "--task", "Fix Cart.total."]
    argv += ["--model", inputs["model"], "--output", str(tmp_path / "out")]
    argv += ["--base-url", inputs["base_url"]] if "base_url" in inputs else []
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "ANTHROPIC_"))}
    done = invoke(*argv, env={**environ, **env, "LLM_IDE_CONFIG": "off"})
    assert (done.returncode, done.stderr, done.stdout) == (2, f"error: {line.format_map(vars(CLI))}\n", "")
    untouched(tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_studio_ends_the_run_at_once_with_the_line_as_its_error(
    tmp_path: Path, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    inputs, env, line = case(tmp_path, name)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    final = studio_run({key: str(value) for key, value in inputs.items()}, f"doors-{name}")
    assert (final["exit_status"], final["error"]) == ("error", line.format_map(vars(GRAPH)))
    assert final.get("operations", []) == [] and final["submission"] == ""
    assert final.get("usage", {}).get("api_calls", 0) == 0
    untouched(tmp_path)


@pytest.mark.parametrize("name", ["not a repository", "unreachable", "in the git directory"])
def test_the_attempts_graph_in_studio_ends_at_once_with_the_line_as_its_error(tmp_path: Path, name: str) -> None:
    """The attempts graph as `langgraph dev` serves it (llm_ide.attempts.studio.graph): a bad input was an error of
    the server's run (a traceback in its log); now the run ends, the line its `error`, nothing run or written."""
    inputs, _, line = case(tmp_path, name)
    final = studio_graph_run("attempts", {"output": str(tmp_path / "out"), **{k: str(v) for k, v in inputs.items()}},
                             f"doors-attempts-{name}")  # fmt: skip
    assert (final["exit_status"], final["error"]) == ("error", line.format_map(vars(GRAPH)))
    assert final.get("attempts", []) == [] and final.get("chosen") is None and final.get("submission", "") == ""
    untouched(tmp_path)


def test_a_studio_run_holds_the_repository_it_changes_in_place(tmp_path: Path) -> None:
    """As the command line: another run changing the repository refuses the Studio run in one line; the lock is let
    go when the server's run ends, whatever its end."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    inputs = {"repo": str(repo), "model": write_script(tmp_path / "fix.yaml", FIX_SCRIPT), "config": NO_TOOLS}
    with repo_lock(repo, in_place=True):
        final = studio_run(inputs, "doors-locked")
    assert final["exit_status"] == "error" and final.get("operations", []) == []
    assert final["error"] == (
        f"repository {repo} is being changed by another run (process {os.getpid()}); wait for it to end, or give this "
        "run a clone or a git worktree of its own"
    )
    assert studio_run(inputs, "doors-free")["exit_status"] == "submitted"
    with repo_lock(repo, in_place=True):  # let go by the run that ended
        pass
