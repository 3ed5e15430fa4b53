"""The per-user tool cache on the local host: a second install takes the built environment from the cache without
pip or an index, a changed source builds again, and concurrent runs build a tool once."""

from __future__ import annotations

import base64
import hashlib
import os
import shutil
import socket
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest
import yaml
from agent_script import act, reflect, write_script
from conftest import make_git_repo, require_bwrap, wait_for
from in_process import invoke
from test_tools_install import write_package, write_tool

from llm_ide.cli.console import warnings_on_console
from llm_ide.environments.local import LocalEnvironment
from llm_ide.tools.cache import ToolCache
from llm_ide.tools.config import load_tool_config
from llm_ide.tools.installer import InstalledTool, ToolEvent, install_tools
from llm_ide.tools.plan import Target, interpreter_probe

DEPENDENCY = "tinydep"


def write_wheel(folder: Path) -> Path:
    """A pure-Python wheel of `tinydep` (only reachable through PIP_FIND_LINKS, never from an index)."""
    files = {
        f"{DEPENDENCY}/__init__.py": "GREETING = 'hello from tinydep'\n",
        f"{DEPENDENCY}-1.0.dist-info/METADATA": f"Metadata-Version: 2.1\nName: {DEPENDENCY}\nVersion: 1.0\n",
        f"{DEPENDENCY}-1.0.dist-info/WHEEL": (
            "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
        ),
    }
    records = []
    for name, text in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        records.append(f"{name},sha256={digest},{len(text.encode())}")
    records.append(f"{DEPENDENCY}-1.0.dist-info/RECORD,,")
    folder.mkdir(parents=True, exist_ok=True)
    wheel = folder / f"{DEPENDENCY}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name, text in {**files, f"{DEPENDENCY}-1.0.dist-info/RECORD": "\n".join(records) + "\n"}.items():
            archive.writestr(name, text)
    return wheel


def write_dependent_tool(folder: Path, name: str = "greeter") -> Path:
    """A tool whose package needs `tinydep`: its first install needs the wheel, a cached one must not."""
    package = write_package(folder / "packages" / name, name)
    pyproject = package / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace('version = "0.1.0"', f'version = "0.1.0"\ndependencies = ["{DEPENDENCY}"]')
    )
    module = package / "src" / name / "__init__.py"
    module.write_text(module.read_text() + f"\n\nfrom {DEPENDENCY} import GREETING\n")
    data = {
        "tool_name": name,
        "version": "0.1.0",
        "source": f"packages/{name}",
        "py_standalone": None,
        "installation": "pip",
        "setup_script": "{{ invocation }} set up",
        "executable": name,
        "usage": "`{{ invocation }} ARGS` greets.",
    }
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def offline_pip(tmp_path: Path, build_backend: str) -> dict[str, str]:
    """pip without an index: `tinydep` from find-links only (and `wheel` on PYTHONPATH, when python3 lacks one)."""
    wheels = write_wheel(tmp_path / "wheels").parent
    backend = {"PYTHONPATH": build_backend} if build_backend else {}
    return {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": str(wheels), **backend}


def unreachable_index() -> str:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}/simple"


def environment(tmp_path: Path, name: str, pip: dict[str, str]) -> LocalEnvironment:
    repo = make_git_repo(tmp_path / f"repo-{name}", {"a.py": "x = 1\n"})
    return LocalEnvironment(repo, env=pip, tools_dir=tmp_path / f"run-tools-{name}", command_timeout=600)


def install(env: LocalEnvironment, tool: Path, cache: ToolCache) -> tuple[InstalledTool, list[ToolEvent]]:
    events: list[ToolEvent] = []
    report = install_tools(env, [str(tool)], {"workdir": env.workdir}, on_event=events.append, cache=cache)
    assert report.failed == [], report.failed[0].reason if report.failed else ""
    return report.installed[0], events


def test_second_install_comes_from_the_cache_offline(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    wheels = tmp_path / "wheels"
    tool = write_dependent_tool(tmp_path / "tool-configs")
    cache = ToolCache(tmp_path / "cache")
    with environment(tmp_path, "first", offline_pip) as env:
        first, events = install(env, tool, cache)
        assert first.how == "built and cached"
        assert [event.detail for event in events if event.kind == "step"] == [
            "prepare",
            "copy",
            "environment",
            "verify",
            "pip",
        ]
        assert env.execute(f"{first.invocation} one").output.startswith("greeter runs on Python")

    shutil.rmtree(wheels)  # the dependency is gone, and the index cannot be reached: pip would fail now
    offline = {"PIP_INDEX_URL": unreachable_index(), "PIP_FIND_LINKS": str(wheels), "PIP_RETRIES": "0"}
    with environment(tmp_path, "second", offline) as env:
        broken = env.execute(f"python3 -m pip download --no-deps -d {tmp_path / 'dl'} {DEPENDENCY}")
        assert broken.returncode != 0, "the second environment really has no index"
        second, events = install(env, tool, cache)
        assert second.how == "from cache"
        assert [event.kind for event in events] == ["installing", "installed"], "nothing was built"
        assert second.invocation == first.invocation
        assert second.invocation.startswith(f"{cache.root}/local/greeter-")
        assert env.execute(f"{second.invocation} two").output.startswith("greeter runs on Python")
    assert sorted(path.name for path in (cache.root / "local").iterdir()) == [Path(first.invocation).parents[3].name]


def test_a_changed_source_is_built_again(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    tool = write_dependent_tool(tmp_path / "tool-configs")
    cache = ToolCache(tmp_path / "cache")
    with environment(tmp_path, "first", offline_pip) as env:
        first, _ = install(env, tool, cache)
    module = load_tool_config(tool).source / "src" / "greeter" / "__init__.py"
    module.write_text(module.read_text().replace("runs on", "now runs on"))
    with environment(tmp_path, "second", offline_pip) as env:
        second, _ = install(env, tool, cache)
        assert second.how == "built and cached"
        assert second.invocation != first.invocation
        assert env.execute(f"{second.invocation} x").output.startswith("greeter now runs on Python")
    (pycache := module.parent / "__pycache__").mkdir(exist_ok=True)
    (pycache / "greeter.cpython-311.pyc").write_bytes(b"not part of the source")
    with environment(tmp_path, "third", offline_pip) as env:
        assert install(env, tool, cache)[0].how == "from cache", "byte code is not part of the source hash"


def test_concurrent_runs_build_a_tool_once(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    tool = write_dependent_tool(tmp_path / "tool-configs")
    cache = ToolCache(tmp_path / "cache")
    environments = [environment(tmp_path, str(number), offline_pip) for number in range(3)]
    results: list[InstalledTool] = []
    threads = [
        threading.Thread(target=lambda env=env: results.append(install(env, tool, cache)[0])) for env in environments
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(result.how for result in results) == ["built and cached", "from cache", "from cache"]
    assert len({result.invocation for result in results}) == 1
    for env in environments:
        assert env.execute(f"{results[0].invocation} ok").returncode == 0
        env.close()
    assert not any(name.endswith(".partial") for name in os.listdir(cache.root / "local"))


def test_another_interpreter_gets_its_own_entry(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    """The key holds the interpreter the environment is built from: `python3` from two venvs made with `--copies`
    (two interpreter files) builds twice; the same one again is taken from the cache."""
    tool = write_dependent_tool(tmp_path / "tool-configs")
    cache = ToolCache(tmp_path / "cache")
    results = []
    for name in ("one", "two", "one"):
        python = tmp_path / f"python-{name}"
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", "--copies", "--without-pip", str(python)], check=True)
        pip = {**offline_pip, "PATH": f"{python}/bin:{os.environ['PATH']}"}
        with environment(tmp_path, f"{name}-{len(results)}", pip) as env:
            results.append(install(env, tool, cache)[0])
    assert [result.how for result in results] == ["built and cached", "built and cached", "from cache"]
    assert results[0].invocation != results[1].invocation and results[0].invocation == results[2].invocation


def test_an_unusable_cache_folder_installs_without_the_cache(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    (blocker := tmp_path / "a-file").write_text("not a folder")
    tool = write_dependent_tool(tmp_path / "tool-configs")
    said: list[Any] = []
    with environment(tmp_path, "uncached", offline_pip) as env, warnings_on_console(said.append):
        installed, _ = install(env, tool, ToolCache(blocker / "cache"))
        assert installed.how == "built"
        assert [str(line) for line in said] == [
            f"tool greeter: the tool cache cannot be used ({blocker}/cache/locks: Not a directory); installing without "
            "it"
        ], "said on the console, not only in the run's log"
        assert installed.invocation.startswith(f"{env.tools_root}/envs/greeter/"), "the run's own tools folder"
        assert env.execute(f"{installed.invocation} x").returncode == 0


def test_runs_sharing_the_cached_debugger_keep_their_own_sessions(tmp_path: Path) -> None:
    """Local runs use one cached installation of the debugger: each repository has its own session."""
    cache = ToolCache(tmp_path / "cache")
    program = "print('start')\nx = 1\nprint(x)\n"
    environments = []
    for name in ("one", "two"):
        repo = make_git_repo(tmp_path / f"repo-{name}", {"app.py": program})
        # without the sandbox: under bwrap each command has its own PID namespace and no session outlives it
        environments.append(
            LocalEnvironment(repo, tools_dir=tmp_path / f"tools-{name}", command_timeout=600, sandbox="none")
        )
    one, two = environments
    try:
        [first] = install_tools(one, ["debugger"], {"workdir": one.workdir}, cache=cache).installed
        [second] = install_tools(two, ["debugger"], {"workdir": two.workdir}, cache=cache).installed
        assert (first.how, second.how, first.invocation) == ("built and cached", "from cache", second.invocation)
        debugger = first.invocation
        assert one.execute(f"{debugger} start app.py").returncode == 0
        assert two.execute(f"{debugger} status").returncode == 1, "no session in the other repository"
        assert two.execute(f"{debugger} start app.py").returncode == 0
        assert two.execute(f"{debugger} stop").returncode == 0
        still = one.execute(f"{debugger}-commands n n 'p x'")
        assert still.output.endswith("(Pdb) p x\n1\n"), still.output
    finally:
        for env in environments:
            env.execute(f"{cache.root}/local/*/envs/debugger/bin/debugger stop")
            env.close()


def test_tools_cache_command_lists_and_clears_the_entries(tmp_path: Path, offline_pip: dict[str, str]) -> None:
    tool = write_dependent_tool(tmp_path / "tool-configs")
    cache = ToolCache(tmp_path / "cache")
    with environment(tmp_path, "one", offline_pip) as env:
        install(env, tool, cache)
    [entry] = (cache.root / "local").iterdir()

    def tools_cache(*args: str) -> list[str]:
        done = invoke("tools", "cache", *args, env={**os.environ, "LLM_IDE_TOOLS_CACHE": str(cache.root)})
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    listed = tools_cache()
    assert listed[0] == f"{cache.root} (LLM_IDE_TOOLS_CACHE=DIR or =off to change)"
    assert len(listed) == 2 and listed[1].split()[:2] == ["local", entry.name] and listed[1].endswith(" MB")
    assert tools_cache("--clear") == [f"removed 1 entries from {cache.root}"]
    assert tools_cache()[1:] == ["(empty)"] and not (cache.root / "local").exists()
    for args in ([], ["--clear"]):
        done = invoke("tools", "cache", *args, env={**os.environ, "LLM_IDE_TOOLS_CACHE": str(tool)})
        assert (done.returncode, done.stdout) == (2, "") and tool.is_file()
        said = f"error: LLM_IDE_TOOLS_CACHE={tool}: not a folder, so no run can use the cache (give a folder, or =off)"
        assert done.stderr == said + "\n"


def test_the_run_that_built_an_entry_cannot_write_it_and_a_later_run_gets_what_was_built(
    tmp_path: Path, offline_pip: dict[str, str]
) -> None:
    """Issue 37 §5: an entry built during a run stayed writable to that run's commands (a poisoned cache, reused by
    every later run). Once built it is read-only to them; a later run takes it as it was built."""
    require_bwrap()
    tool = write_dependent_tool(tmp_path / "tool-configs")
    cache = ToolCache(tmp_path / "cache")
    with environment(tmp_path, "first", offline_pip) as env:
        first, _ = install(env, tool, cache)
        entry = Path(first.invocation).parents[3]
        built = {path: path.read_bytes() for path in entry.rglob("*") if path.is_file() and not path.is_symlink()}
        script = next(path for path in built if path.suffix == ".py" and "site-packages" in str(path))
        poison = env.execute(
            f"echo 'raise SystemExit(66)' >> {script}; echo appended=$?; touch {entry}/planted; echo touched=$?;"
            f" rm -rf {entry}/.complete; echo removed=$?"
        )
        assert [line for line in poison.output.splitlines() if "=" in line] == ["appended=1", "touched=1", "removed=1"]
    with environment(tmp_path, "second", offline_pip) as env:
        second, _ = install(env, tool, cache)
        assert second.how == "from cache" and second.invocation == first.invocation
        assert env.execute(f"{second.invocation} two").output.startswith("greeter runs on Python")
    assert {path: path.read_bytes() for path in built} == built and not (entry / "planted").exists()


def test_clearing_the_cache_while_a_run_uses_it_is_refused(tmp_path: Path) -> None:
    """`tools cache --clear` removed the tools a run going on was using (its debugger gone under it): it is refused
    in one line while a run holds the cache, and clears it once the run has ended. (The run's tool is a test tool:
    tool_backend builds it in half the debugger's CPU.)"""
    cache = tmp_path / "cache"
    repo = make_git_repo(tmp_path / "repo", {"a.py": "x = 1\n"})
    tool = f"{cache}/local/*/envs/greeter/bin/greeter"  # the run's, from its cache entry
    wait = f"touch started && while [ ! -e go ]; do sleep 0.05; done && {tool} > /dev/null && echo tool-there"
    steps = [act("Wait.", "bash", command=wait), reflect(False, "Ok."), act("Done.", "submit")]
    model = write_script(tmp_path / "s.yaml", steps)
    config = {"environment": {"tools": [str(write_tool(tmp_path / "tool-configs", "greeter"))]}}
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    environ = {**os.environ, "LLM_IDE_TOOLS_CACHE": str(cache)}
    args = ["run", "--repo", str(repo), "--task", "t", "--model", model, "-c", str(tmp_path / "c.yaml"), "-o", "out"]
    command = [sys.executable, "-c", "from llm_ide.cli import app; app()", *args]
    run = subprocess.Popen(
        command, cwd=tmp_path, env=environ, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        wait_for(lambda: (repo / "started").exists() or run.poll() is not None, what="the run's command")
        refused = invoke("tools", "cache", "--clear", env=environ)
        (repo / "go").touch()
        stdout, stderr = run.communicate(timeout=300)
    finally:
        run.kill()
    said = f"error: the tool cache {cache} is in use by a run going on (its tools are there): clear it once none is\n"
    assert (refused.returncode, refused.stdout, refused.stderr) == (2, "", said)
    assert run.returncode == 0 and "tool-there" in stdout and "submitted" in stdout, stdout + stderr
    [entry] = (cache / "local").iterdir()
    cleared = invoke("tools", "cache", "--clear", env=environ)
    assert (cleared.returncode, cleared.stdout) == (0, f"removed 1 entries from {cache}\n") and not entry.exists()


ANOTHER_BUILD_AT_THE_LOCK = """
import fcntl, pathlib, sys
entry = pathlib.Path(sys.argv.pop()) / "local" / "another-tool-2"
def another_build(event, args):  # an entry another run completes as --clear takes the cache's lock
    if event == "fcntl.flock" and args[1] & fcntl.LOCK_EX:
        entry.mkdir(parents=True, exist_ok=True)
        (entry / ".complete").touch()
sys.addaudithook(another_build)
from llm_ide.cli import app
app()
"""


def test_clearing_the_cache_counts_the_entries_it_removes(tmp_path: Path) -> None:
    """`tools cache --clear` counted the entries before it took the cache's lock: an entry another run completed
    meanwhile was removed and not counted. A child process: its audit hook adds that entry as the lock is taken."""
    cache = tmp_path / "cache"
    (cache / "local" / "a-tool-1").mkdir(parents=True)
    (cache / "local" / "a-tool-1" / ".complete").touch()
    command = [sys.executable, "-c", ANOTHER_BUILD_AT_THE_LOCK, "tools", "cache", "--clear", str(cache)]
    environ = {**os.environ, "LLM_IDE_TOOLS_CACHE": str(cache)}
    cleared = subprocess.run(command, env=environ, capture_output=True, text=True, timeout=120)
    assert (cleared.returncode, cleared.stdout) == (0, f"removed 2 entries from {cache}\n"), cleared.stderr
    assert not (cache / "local").exists()


@pytest.mark.parametrize("py_standalone", [None, f"{sys.version_info.major}.{sys.version_info.minor}"])
def test_the_interpreter_probe_tells_what_a_full_start_tells(tmp_path: Path, py_standalone: str | None) -> None:
    """The probe starts the interpreter without `site` (at every run's start): the line it prints, the cache key's
    interpreter, is the one a start with `site` prints (entries built before stay found)."""
    tool = load_tool_config(write_dependent_tool(tmp_path / "tool-configs"))
    tool = tool.model_copy(update={"py_standalone": py_standalone})
    with environment(tmp_path, "probe", {}) as env:
        target = Target(env.tools_root, local=True)
        probed = env.execute(interpreter_probe(tool, target))
        full = env.execute(interpreter_probe(tool, target).replace(" -S -c ", " -c "))
    assert " -S -c " in interpreter_probe(tool, target)
    assert (probed.returncode, probed.output) == (0, full.output) and probed.output.startswith("/")
