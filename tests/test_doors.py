"""Every door checks what the command line checks (issue 40 §1): the same bad input — a folder that is not a git
repository, a model without its key, an endpoint that does not answer, an empty model name, a limit that is no number
— is the same one line from `llm-ide run` (exit 2), from `run_task` (a UsageError of the one hierarchy) and from the
graph LangGraph Studio serves (the run ends at once, that line its `error`), and nothing is set up or written first.
What a run's variants need (a navigator's server, prompts and model, a sampler's model) is checked the same way at
those doors, by attempts and by a batch."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import threading
from pathlib import Path
from typing import Any

import pytest
from agent_script import BUGGY_FILES, FIX_SCRIPT, act, write_script
from conftest import make_git_repo
from in_process import invoke
from openai_server import OpenAIServer
from swebench_fixtures import FIX_COMMAND, build_dataset
from swebench_fixtures import write_script as batch_script

from llm_ide.attempts.run import run_attempts
from llm_ide.config import load_config
from llm_ide.errors import LlmIdeError, UsageError
from llm_ide.inputs import API, CLI, GRAPH
from llm_ide.priced import langchain_providers
from llm_ide.run.guard import repo_lock
from llm_ide.run.preflight import check_model
from llm_ide.run.single import run_task
from llm_ide.swebench.batch import run_swebench
from llm_ide.swebench.choice import BatchOptions


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


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


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"task": None}, "the run's `task` must be text, not NoneType None"),
        ({"task": 5, "model": ["m"]}, "the run's `task` must be text, not int 5; `model` must be text, not list ['m']"),
        ({"base_url": 8080}, "the run's `base_url` must be text, not int 8080"),
        ({"repo": 5}, "the run's `repo` must be a path, not int 5"),
        (
            {"output_dir": 5, "checkpoint": 1},
            "the run's `checkpoint` must be text, not int 1; `output_dir` must be a path, not int 5",
        ),
        ({"task_vars": ["x"]}, "the run's `task_vars` must be a mapping of names to values, not list ['x']"),
        ({"cost_budget": 1.5}, "the run's `cost_budget` must be a shared budget (CostBudget), not float 1.5"),
        (
            {"variants": "navigator"},
            "the run's `variants` must be a list of variants (Variant classes or instances), not str 'navigator'",
        ),
        ({"variants": [print]}, "the run's `variants` holds <built-in function print>, which is no Variant"),
        ({"carried_lessons": 3}, "the run's `carried_lessons` must be a list of texts, not int 3"),
        ({"on_event": 3}, "the run's `on_event` must be a function (a callable), not int 3"),
        (
            {"on_model_call": "print", "ask": [input]},
            "the run's `on_model_call` must be a function (a callable), not str 'print'; "
            "`ask` must be a function (a callable), not list [<built-in function input>]",
        ),
    ],
)
@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_the_python_api_says_which_argument_has_the_wrong_type(
    tmp_path: Path, door: Any, given: dict[str, Any], line: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    values = {"task": "Fix Cart.total.", "model": write_script(tmp_path / "s.yaml", FIX_SCRIPT), "repo": repo}
    values |= {"output_dir": tmp_path / "out"} | given
    with pytest.raises(UsageError) as raised:
        door(values.pop("task"), settings=load_config(), run_id="r", **values)
    assert str(raised.value) == line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("given", "line"),
    [
        ({"run_id": None}, "the run needs run_id"),
        ({"run_id": None, "output_dir": None}, "the run needs output_dir, run_id"),
        (
            {"settings": None, "run_id": None},
            "the run needs settings (settings=load_config(): `from llm_ide import load_config`, the default config), "
            "run_id",
        ),
        ({"step_limit": 3}, "the run takes no argument step_limit (step_limit is a setting: load_config(agent="),
        ({"settings": "default"}, "the run's `settings` must be settings (load_config(...)), not str 'default'"),
    ],
)
def test_the_python_api_says_which_argument_is_missing_or_unknown(
    tmp_path: Path, given: dict[str, Any], line: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    values = {"model": "scripted:none.yaml", "settings": load_config(), "repo": repo, "output_dir": tmp_path / "out"}
    values = {key: value for key, value in (values | {"run_id": "r"} | given).items() if value is not None}
    for door in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            door("Fix Cart.total.", **values)
        assert str(raised.value).startswith(line)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("output", ["last.traj.json", Path("out/run.json")])
@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_the_python_api_refuses_minis_trajectory_file_as_its_output_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, door: Any, output: str | Path
) -> None:
    """As `llm-ide run -o x.json` (tests/test_cli.py): was taken, a folder `last.traj.json/` of the run's files made.
    Now the same one line, nothing made; a folder that is there, whatever its name, is taken."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    monkeypatch.chdir(tmp_path)
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    run = {"model": model, "settings": load_config(environment={"tools": []}), "repo": repo, "run_id": "r"}
    with pytest.raises(UsageError) as raised:
        door("Fix Cart.total.", output_dir=output, **run)
    assert str(raised.value) == (
        f"`output_dir` {output}: `output_dir` is the run's output folder (mini-swe-agent's -o is the trajectory "
        "file); give a folder: the trajectory is <folder>/r.traj.json"
    )
    assert not Path(output).exists() and not Path("out").exists()
    Path(output).mkdir(parents=True)
    result = door("Fix Cart.total.", output_dir=output, **run)
    assert result.exit_status == "submitted" and (Path(output) / "r.traj.json").is_file()


@pytest.mark.parametrize("listener", ["on_event", "on_model_call", "on_command"])
def test_a_listener_that_raises_ends_the_run_error_saved_and_one_at_the_end_reaches_the_caller(
    tmp_path: Path, listener: str
) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    run = {"model": model, "settings": load_config(environment={"tools": []}), "repo": repo}

    def raising(kinds: tuple[str, ...]) -> Any:
        def listen(told: Any) -> None:
            if told.kind in kinds:
                raise ValueError(f"a bug in {listener}")

        return listen

    told = {listener: raising(("start", "step"))}
    result = run_task("Fix Cart.total.", output_dir=tmp_path / "a", run_id="r", **run, **told)
    info = json.loads((tmp_path / "a" / "r.traj.json").read_text())["info"]
    assert (result.exit_status, result.error) == ("error", f"ValueError: a bug in {listener}")
    assert (info["exit_status"], info["error"]) == ("error", f"ValueError: a bug in {listener}")
    if listener == "on_event":
        with pytest.raises(ValueError, match="a bug in on_event"):
            run_task("Fix Cart.total.", output_dir=tmp_path / "b", run_id="r", on_event=raising(("end",)), **run)
        assert json.loads((tmp_path / "b" / "r.traj.json").read_text())["info"]["exit_status"] == "submitted"


def test_the_python_api_takes_its_paths_as_text(tmp_path: Path) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "fix.yaml", FIX_SCRIPT)
    out = str(tmp_path / "out")
    settings = load_config(environment={"tools": []})
    result = run_task("Fix Cart.total.", model=model, settings=settings, repo=str(repo), output_dir=out, run_id="r")
    assert result.exit_status == "submitted" and result.trajectory_path == tmp_path / "out" / "r.traj.json"


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
        check_model("slow-tls", settings, f"https://127.0.0.1:{port}/v1", timeout=0.5, quiet=True)


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


def studio_run(inputs: dict[str, Any], thread: str) -> dict[str, Any]:
    """The agent graph as `langgraph dev` serves it (llm_ide.studio.graph), run in process on a thread of its own."""
    from langgraph.checkpoint.memory import InMemorySaver

    from llm_ide.studio import graph

    async def run() -> dict[str, Any]:
        async with graph({"configurable": {}}) as compiled:
            served = compiled.copy(update={"checkpointer": InMemorySaver()})
            config = {"configurable": {"thread_id": thread}}
            return await served.ainvoke({"task": "Fix Cart.total.", **inputs}, config)

    return asyncio.run(run())


def test_an_environment_without_its_image_is_one_line_at_every_door(tmp_path: Path) -> None:
    """A docker run without an image started (its folder, its log, its trajectory) and ended `environment_error`."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    line = "the docker environment needs an image: give "
    with pytest.raises(UsageError) as raised:
        run_task("t", model=model, settings=load_config(), repo=repo, output_dir=tmp_path / "out", run_id="r",
                 environment="docker")  # fmt: skip
    assert str(raised.value) == f"{line}`image` (or environment.image)"
    argv = ["run", "--repo", str(repo), "--task", "t", "--model", model, "--environment", "docker"]
    done = invoke(*argv, "--output", str(tmp_path / "out"), env={**os.environ, "LLM_IDE_CONFIG": "off"})
    assert (done.returncode, done.stderr) == (2, f"error: {line}--image IMAGE (or environment.image)\n")
    final = studio_run({"repo": str(repo), "model": model, "config": {"environment": {"type": "docker"}}}, "no-image")
    assert (final["exit_status"], final["error"]) == ("error", f"{line}environment.image in the graph input's `config`")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_an_image_given_to_the_python_api_runs_in_its_container_as_the_command_lines_does(
    tmp_path: Path, door: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`image=` was ignored by the Python API: the run went on the host, in the repository itself, where `--image`
    runs in docker (and with `--environment local` is refused). Here the Docker engine is a closed port."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "fix.yaml", FIX_SCRIPT)
    run = {"model": model, "settings": load_config(environment={"tools": []}), "repo": repo, "image": "absent:1"}
    line = "`image` runs the task in a docker container: it cannot go with `environment` local"
    with pytest.raises(UsageError, match=f"^{line}$"):
        door("Fix Cart.total.", output_dir=tmp_path / "local", run_id="r", environment="local", **run)
    assert not (tmp_path / "local").exists()
    monkeypatch.setenv("DOCKER_HOST", f"tcp://127.0.0.1:{closed_port()}")
    result = door("Fix Cart.total.", output_dir=tmp_path / "out", run_id="r", **run)
    assert result.exit_status == "environment_error" and "the Docker engine is not reachable" in result.error
    changed = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert changed.stdout == "", "the repository on the host was left alone"


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


@pytest.mark.parametrize(
    ("values", "line"),
    [
        ({"cost_limit": float("nan")}, "settings: agent.cost_limit: input should be a finite number (got nan)"),
        ({"step_limit": -1}, "settings: agent.step_limit: input should be greater than or equal to 0 (got -1)"),
    ],
)
def test_a_limit_that_is_no_number_is_one_line_at_every_door(tmp_path: Path, values: dict[str, Any], line: str) -> None:
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    with pytest.raises(UsageError, match=f"^{line.replace('(', '[(]').replace(')', '[)]')}$"):
        run_task(
            "t", model="scripted:x.yaml", settings=load_config(agent=values), output_dir=tmp_path / "o", run_id="r"
        )
    settings = load_config()
    settings.agent.__dict__.update(values)  # around the validation: the preflight validates again
    with pytest.raises(UsageError, match="^settings: agent"):
        run_task("t", model="scripted:x.yaml", settings=settings, output_dir=tmp_path / "o", run_id="r", repo=repo)
    final = studio_run({"repo": str(repo), "model": "scripted:x.yaml", "config": {"agent": values}}, "doors-limit")
    assert (final["exit_status"], final["error"]) == ("error", line)
    option = "--cost-limit" if "cost_limit" in values else "--step-limit"
    argv = ["run", "--repo", str(repo), "--task", "t", "--model", "scripted:x.yaml"]
    done = invoke(*argv, option, str(next(iter(values.values()))), env={**os.environ, "LLM_IDE_CONFIG": "off"})
    assert (done.returncode, done.stderr) == (2, "error: " + line.replace("settings:", "command line:") + "\n")
    assert not (tmp_path / "o").exists()


def studio_graph_run(name: str, inputs: dict[str, Any], thread: str) -> dict[str, Any]:
    """A graph of llm_ide.studio as `langgraph dev` serves it (`name`: navigator_graph, sampled_graph; attempts:
    llm_ide.attempts.studio.graph), in process."""
    from langgraph.checkpoint.memory import InMemorySaver

    from llm_ide import studio
    from llm_ide.attempts import studio as attempts_studio

    made = attempts_studio.graph if name == "attempts" else getattr(studio, name)

    async def run() -> dict[str, Any]:
        async with made({"configurable": {}}) as compiled:
            served = compiled.copy(update={"checkpointer": InMemorySaver()})
            return await served.ainvoke({"task": "Fix Cart.total.", **inputs}, {"configurable": {"thread_id": thread}})

    return asyncio.run(run())


NAVIGATOR, SAMPLED = "navigator_graph", "sampled_graph"


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


NO_TOOLS = {"environment": {"tools": []}}


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


@pytest.mark.parametrize("task", ["", " \n\t"])
def test_an_empty_task_is_the_same_line_at_every_door(tmp_path: Path, task: str) -> None:
    """The command line and the Python API said "the task is empty", the Studio graphs "the graph input needs `task`
    (the task text)" for a task given blank: one check (run/usage.check_task), one line."""
    line = "the task is empty: say what the agent should do"
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api(task, model=model, settings=load_config(), repo=repo, output_dir=tmp_path / "out", run_id="r")
        assert str(raised.value) == line
    done = invoke("run", "--repo", str(repo), "--task", task, "--model", model, "-o", str(tmp_path / "out"),
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert (done.returncode, done.stderr) == (2, "error: the task is empty (--task): say what the agent should do\n")
    for graph in ("graph", SAMPLED, NAVIGATOR, "attempts"):
        inputs = {"task": task, "repo": str(repo), "model": model}
        inputs |= {"output": str(tmp_path / "out")} if graph == "attempts" else {}
        final = studio_graph_run(graph, inputs, f"empty-{graph}")
        assert (final["exit_status"], final["error"]) == ("error", line), graph
    assert not (tmp_path / "out").exists()


def test_an_output_folder_that_is_the_repository_is_named_as_each_door_names_it(tmp_path: Path) -> None:
    """The Python API's `output_dir=` and the attempts graph's `output` were told to "give --output a folder"."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    line = (
        f"the output folder is the repository itself ({repo}): the agent's commands would see and change the run's "
        "own files; give {} a folder inside or outside it"
    )
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api("Fix Cart.total.", model=model, settings=load_config(), repo=repo, output_dir=repo, run_id="r")
        assert str(raised.value) == line.format("`output_dir`")
    done = invoke("run", "--repo", str(repo), "--task", "t", "--model", model, "-o", str(repo),
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert (done.returncode, done.stderr) == (2, f"error: {line.format('--output')}\n")
    final = studio_graph_run("attempts", {"repo": str(repo), "model": model, "output": str(repo)}, "output-is-repo")
    assert (final["exit_status"], final["error"]) == ("error", line.format("the graph input's `output`"))
    status = subprocess.run(["git", "status", "--porcelain"], cwd=repo, capture_output=True, text=True, check=True)
    assert status.stdout == "", "nothing was written in the repository"


RUN_LIMITS = [
    (("--step-limit", "-1"), "agent.step_limit: input should be greater than or equal to 0 (got -1)"),
    (("--cost-limit", "nan"), "agent.cost_limit: input should be a finite number (got nan)"),
    (("--cost-limit", "-1"), "agent.cost_limit: input should be greater than or equal to 0 (got -1.0)"),
]


@pytest.mark.parametrize(
    ("command", "option", "line"),
    [
        *((command, *limit) for command in [("run", "--task", "t"), ("swebench-single",)] for limit in RUN_LIMITS),
        (("swebench",), *RUN_LIMITS[0]),  # (its --cost-limit is the batch's, a limit of its own)
    ],
)
def test_a_run_limit_is_checked_alike_by_every_command_that_sets_it(
    tmp_path: Path, command: tuple[str, ...], option: tuple[str, str], line: str
) -> None:
    """`swebench`'s and `swebench-single`'s --step-limit was click's "-1 is not in the range x>=0", swebench-single's
    --cost-limit "settings: agent.cost_limit: …", where `run` says "command line: agent.…"."""
    done = invoke(*command, "--model", "scripted:x.yaml", *option, cwd=tmp_path,
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert (done.returncode, done.stderr) == (2, f"error: command line: {line}\n")


@pytest.mark.parametrize(
    "command", [("run", "--task", "t"), ("swebench",), ("swebench-single",), ("coop", "run", ".", "--pair", "1,2")]
)
def test_an_unknown_environment_is_the_same_line_from_every_command(tmp_path: Path, command: tuple[str, ...]) -> None:
    """`run` said click's "'kube' is not one of 'local', 'docker'", the SWE-bench commands "unknown environment
    'kube': use docker or local", `coop run` "… use local or docker"."""
    done = invoke(*command, "--model", "scripted:x.yaml", "--environment", "kube", cwd=tmp_path,
                  env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    name = " ".join(command[:2] if command[0] == "coop" else command[:1])
    said = "error: Invalid value for '--environment': 'kube' is not one of 'local', 'docker'."
    assert (done.returncode, done.stderr) == (2, f"{said} (see: llm-ide {name} --help)\n")


def test_a_thread_resumed_in_another_repository_names_the_python_apis_arguments(tmp_path: Path) -> None:
    """run_task's and run_attempts' callers, who pass repo= and run_id=, were told of "--repo" and "a new
    --thread-id", the command line's options (which `llm-ide run` still says: tests/test_resume.py)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    other = make_git_repo(tmp_path / "other", {"b.py": "y = 1\n"})
    values = {"model": write_script(tmp_path / "s.yaml", FIX_SCRIPT), "output_dir": tmp_path / "out", "run_id": "T"}
    settings = load_config(agent={"step_limit": 1}, environment={"tools": []})
    first = run_task("Fix Cart.total.", settings=settings, repo=repo, **values)
    assert first.exit_status == "step_limit"
    base = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True).stdout[:12]
    for api in (run_task, run_attempts):
        with pytest.raises(UsageError) as raised:
            api("Fix Cart.total.", settings=settings, repo=other, **values)
        assert str(raised.value) == (
            f"thread T started in {repo}; `repo` {other} is another repository (no commit {base}, the thread's base): "
            "give the thread's repository (or a clone of it), or a new `run_id`"
        )


@pytest.mark.parametrize("door", [run_task, run_attempts])
def test_a_run_without_a_repository_names_the_python_apis_argument_before_it_starts(tmp_path: Path, door: Any) -> None:
    """run_attempts' callers were told "--repo PATH" (the command line always has one: the current folder); run_task's
    run started (its folder, log and trajectory) and ended environment_error, "(--repo PATH)" its error."""
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    settings = load_config(attempts={"max": 2 if door is run_attempts else 1}, environment={"tools": []})
    with pytest.raises(UsageError) as raised:
        door("Fix Cart.total.", model=model, settings=settings, output_dir=tmp_path / "out", run_id="r")
    assert str(raised.value) == "a run in the local environment needs a repository (`repo`)"
    assert not (tmp_path / "out").exists()


ENVIRONMENT_HELP = "<local|docker> local (on this host, in the repository) or docker (in a container, on a copy)."


@pytest.mark.parametrize("command", [("run",), ("swebench",), ("swebench-single",), ("coop", "run")])
def test_every_command_takes_environment_as_one_type_with_one_help(tmp_path: Path, command: tuple[str, ...]) -> None:
    """`run` took a choice (`DockerEnvironment`, which the SWE-bench commands take as mini-swe-agent does, refused),
    the others text; each said the kinds its own way ("docker (one container per instance) or local.", "local or
    docker.")."""
    shown = invoke(*command, "--help", env={**os.environ, "COLUMNS": "400"})
    row = next(line for line in shown.stdout.splitlines() if "--environment " in line or "--environment," in line)
    assert ENVIRONMENT_HELP in " ".join(row.split()), row
    given = {"run": ("--task", "t"), "coop": (".", "--pair", "1,2")}.get(command[0], ())
    done = invoke(*command, *given, "--model", "scripted:none.yaml", "--environment", "LocalEnvironment",
                  cwd=tmp_path, env={**os.environ, "LLM_IDE_CONFIG": "off"})  # fmt: skip
    assert done.returncode != 0 and "--environment" not in done.stderr, done.stderr


@pytest.mark.parametrize("door", ["run", "run_task"])
def test_a_thread_resumed_with_another_model_goes_on_with_it_and_says_so(tmp_path: Path, door: str) -> None:
    """`llm-ide run --thread-id T -m OTHER` and run_task(model=OTHER) went on with OTHER unsaid (Studio dropped it:
    tests/test_studio_threads.py); each door now says it, in the same line."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    first = write_script(tmp_path / "first.yaml", FIX_SCRIPT)
    other = write_script(tmp_path / "other.yaml", [FIX_SCRIPT[1], act("Submit as it is.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    said = f"run T started with model {first}: it goes on with model {other}, the one given now"
    args = ["run", "--repo", str(repo), "-t", "Fix Cart.total.", "-c", "c.yaml", "-o", "out", "--thread-id", "T"]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    stopped = invoke(*args, "-m", first, "--step-limit", "1", cwd=tmp_path, env=env)
    assert stopped.returncode == 1 and "step_limit" in stopped.stdout, stopped.stdout + stopped.stderr
    if door == "run":
        again = invoke(*args, "-m", other, "--step-limit", "4", cwd=tmp_path, env=env)
        assert again.returncode == 0 and said in again.stdout, again.stdout + again.stderr
        return
    phases: list[str] = []
    settings = load_config(agent={"step_limit": 4}, environment={"tools": []})
    result = run_task("Fix Cart.total.", model=other, settings=settings, repo=repo, output_dir=tmp_path / "out",
                      run_id="T", on_event=lambda event: phases.append(event.phase or ""))  # fmt: skip
    assert result.exit_status == "submitted" and said in phases, phases


@pytest.mark.parametrize("door", ["run", "run_task", "run_attempts"])
def test_a_finished_thread_given_again_names_the_doors_way_to_run_it_anew(tmp_path: Path, door: str) -> None:
    """run_task's and run_attempts' callers, who pass run_id= and output_dir=, were told "a new --thread-id or output
    folder runs the task anew", the command line's words (which `llm-ide run` still says)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", FIX_SCRIPT)
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = ["run", "--repo", str(repo), "-t", "Fix Cart.total.", "-c", "c.yaml", "-o", "out", "--thread-id", "T"]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    first = invoke(*args, "-m", model, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout + first.stderr
    said = "run T had already finished (submitted): its result again; "
    if door == "run":
        again = invoke(*args, "-m", model, cwd=tmp_path, env=env)
        assert f"{said}a new --thread-id or output folder runs the task anew" in again.stdout, again.stdout
        return
    phases: list[str] = []
    api = run_task if door == "run_task" else run_attempts
    settings = load_config(environment={"tools": []})
    result = api("Fix Cart.total.", model=model, settings=settings, repo=repo, output_dir=tmp_path / "out",
                 run_id="T", on_event=lambda event: event.kind == "phase" and phases.append(event.phase))  # fmt: skip
    assert result.exit_status == "submitted" and phases == [f"{said}a new `run_id` or `output_dir` runs the task anew"]


@pytest.mark.parametrize("given", ["another task", "attempts"])
def test_a_thread_the_api_cannot_go_on_with_names_a_new_run_id(tmp_path: Path, given: str) -> None:
    """A thread id of another task (run_task) or of a run without attempts (run_attempts with attempts.max 2) told
    the Python API's callers to "give a new --thread-id", the command line's option (which `llm-ide run` still says:
    tests/test_cli.py, tests/test_attempts_resume.py)."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    values = {"model": write_script(tmp_path / "s.yaml", FIX_SCRIPT), "output_dir": tmp_path / "out", "run_id": "T"}
    settings = load_config(environment={"tools": []})
    assert run_task("Fix Cart.total.", settings=settings, repo=repo, **values).exit_status == "submitted"
    with pytest.raises(UsageError) as raised:
        if given == "another task":
            run_task("Another task.", settings=settings, repo=repo, **values)
        else:
            run_attempts("Fix Cart.total.", settings=settings.merged({"attempts": {"max": 2}}), repo=repo, **values)
    said = {
        "another task": "thread id 'T' is a run of another task; give a new `run_id` (or the same task to resume)",
        "attempts": f"thread T is a run without attempts ({tmp_path / 'out' / 'T.traj.json'}): resume it as it ran "
        "(attempts.max: 1), or give a new `run_id`",
    }
    assert str(raised.value) == said[given]


def test_swebench_single_given_a_finished_instance_again_names_its_own_way_to_run_it_anew(tmp_path: Path) -> None:
    """swebench-single, which has no --thread-id, said "a new --thread-id or output folder" (then the Python API's
    words) of an instance it had finished: its own option now, --output."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    model = write_script(tmp_path / "s.yaml", [act("Submit as it is.", "submit")])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\n")
    args = ["swebench-single", "--subset", str(dataset), "-i", "0", "--environment", "local", "-m", model]
    args += ["-c", "c.yaml"]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    assert invoke(*args, "-o", "out", cwd=tmp_path, env=env).returncode == 0
    again = invoke(*args, "-o", "out", cwd=tmp_path, env=env)
    said = "… run demo__calc-1 had already finished (submitted): its result again; another --output runs the task anew"
    assert again.returncode == 0 and said in again.stdout.splitlines(), again.stdout + again.stderr


@pytest.mark.parametrize("checkpoint", [False, True])
def test_a_batchs_instance_whose_thread_ran_another_task_names_the_batchs_options(
    tmp_path: Path, checkpoint: bool
) -> None:
    """`swebench` resuming an instance whose thread (in its folder, or a --checkpoint store) ran another problem
    statement said "AnotherTask: … give a new `run_id`", the Python API's words, with a traceback in swebench.log."""
    dataset, _ = build_dataset(tmp_path / "data", 1)
    model = batch_script(tmp_path / "fix.yaml", ["ls", FIX_COMMAND])
    (tmp_path / "c.yaml").write_text("environment: {tools: []}\nagent: {step_limit: 1}\n")
    args = ["swebench", "--subset", str(dataset), "--split", "test", "--model", model, "--environment", "local"]
    args += ["-c", "c.yaml", *(["--checkpoint", f"sqlite:{tmp_path / 'threads.db'}"] if checkpoint else [])]
    env = {**os.environ, "LLM_IDE_CONFIG": "off"}
    assert invoke(*args, "-o", "first", cwd=tmp_path, env=env).returncode == 0
    dataset.write_text(dataset.read_text().replace('"problem_statement": "', '"problem_statement": "Now: '))
    if not checkpoint:  # an instance interrupted in its folder: its thread resumes there, its task changed meanwhile
        (tmp_path / "first" / "preds.json").unlink()
    again = invoke(*args, "-o", "second" if checkpoint else "first", cwd=tmp_path, env=env)
    new = "another --output and --checkpoint" if checkpoint else "another --output"
    said = f"thread id 'demo__calc-1' is a run of another task; give {new} (or the same task to resume)"
    assert f"demo__calc-1: error (0 steps, $0.0000): {said}" in " ".join(again.stdout.split()), again.stdout
    log = (tmp_path / ("second" if checkpoint else "first") / "swebench.log").read_text()
    assert f"demo__calc-1: error (0 steps): {said}" in log and "Traceback" not in log


@pytest.mark.parametrize("api", [run_task, run_attempts])
def test_an_unknown_kind_of_checkpoint_store_names_the_apis_argument(tmp_path: Path, api: Any) -> None:
    """run_task's and run_attempts' callers, who pass checkpoint=, were told "--checkpoint bogus: …" (the command
    line's option, which checks its own value), once the run had made its folder."""
    repo = make_git_repo(tmp_path / "repo", BUGGY_FILES)
    model = write_script(tmp_path / "s.yaml", ["never used"])
    with pytest.raises(UsageError) as raised:
        api("t", model=model, settings=load_config(), repo=repo, output_dir=tmp_path / "out", run_id="r",
            checkpoint="bogus")  # fmt: skip
    assert str(raised.value) == "`checkpoint` bogus: unknown kind of store; use sqlite:PATH, postgres://… or memory"
    assert not (tmp_path / "out").exists()
