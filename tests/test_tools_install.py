"""The installer against the real local environment: tools from source, isolated venvs, failing steps."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from conftest import make_git_repo

from llm_ide.environments.local import LocalEnvironment
from llm_ide.tools.config import TOOLS_DIR, load_tool_config
from llm_ide.tools.installer import FailedTool, InstalledTool, ToolEvent, install_tools, tool_usage_text

HOST_PYTHON = f"{sys.version_info.major}.{sys.version_info.minor}"


BUILD_SYSTEMS = {
    "tool_backend": 'requires = []\nbuild-backend = "tool_backend"\nbackend-path = ["."]\n',
    "setuptools": 'requires = ["setuptools>=61", "wheel"]\nbuild-backend = "setuptools.build_meta"\n',
}


def write_package(folder: Path, name: str, backend: str = "tool_backend") -> Path:
    """A stdlib-only package with a console script `<name>` that prints its interpreter's version. Built by
    tests/tool_backend.py (copied in) unless the test is about building with `setuptools`."""
    module = name.replace("-", "_")
    (folder / "src" / module).mkdir(parents=True)
    (folder / "src" / module / "__init__.py").write_text(
        textwrap.dedent(
            f"""\
            import sys


            def main():
                print("{name} runs on Python %d.%d" % sys.version_info[:2], " ".join(sys.argv[1:]))
            """
        )
    )
    finder = '\n[tool.setuptools.packages.find]\nwhere = ["src"]\n' if backend == "setuptools" else ""
    project = f'[project]\nname = "{name}"\nversion = "0.1.0"\n\n[project.scripts]\n{name} = "{module}:main"\n'
    (folder / "pyproject.toml").write_text(f"[build-system]\n{BUILD_SYSTEMS[backend]}\n{project}{finder}")
    if backend == "tool_backend":
        shutil.copyfile(Path(__file__).with_name("tool_backend.py"), folder / "tool_backend.py")
    return folder


def write_tool(folder: Path, name: str, backend: str = "tool_backend", **values: object) -> Path:
    data = {
        "tool_name": name,
        "version": "0.1.0",
        "source": f"packages/{name}",
        "py_standalone": None,
        "installation": "pip",
        "setup_script": None,
        "executable": name,
        "usage": f"`{{{{ invocation }}}} ARGS` prints its Python version ({name}).",
        **values,
    }
    write_package(folder / "packages" / name, name, backend)
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return path


@pytest.fixture
def project_python(tmp_path: Path) -> Path:
    """The project's interpreter: `python3` on the environment's PATH is a venv of its own."""
    venv = tmp_path / "project-python"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    return venv


def local_environment(tmp_path: Path, project_python: Path, build_backend: str) -> Iterator[LocalEnvironment]:
    repo = make_git_repo(
        tmp_path / "repo",
        {"app.py": "import sys\n\n\ndef f(x):\n    y = x * 2\n    return y\n\n\nprint(f(21), sys.prefix)\n"},
    )
    variables = {"PATH": f"{project_python}/bin:{os.environ['PATH']}"}
    variables |= {"PYTHONPATH": build_backend} if build_backend else {}
    environment = LocalEnvironment(repo, env=variables, tools_dir=tmp_path / "tools", command_timeout=600)
    yield environment
    environment.execute(f"{environment.tools_root}/envs/debugger/bin/debugger stop")
    environment.close()


@pytest.fixture
def env(tmp_path: Path, project_python: Path) -> Iterator[LocalEnvironment]:
    """Where python3 has no build backend of its own (setuptools < 70.1 without `wheel`), pip builds a tool in an
    isolated environment with setuptools from the package index: the product's fallback."""
    yield from local_environment(tmp_path, project_python, "")


@pytest.fixture
def wheel_env(tmp_path: Path, project_python: Path, build_backend: str) -> Iterator[LocalEnvironment]:
    """The same with `wheel` importable (shared_fixtures.build_backend): builds without isolation, as where python3
    has a build backend, and ~2 s of CPU less a tool (no setuptools from the index into a throwaway environment)."""
    yield from local_environment(tmp_path, project_python, build_backend)


def test_debugger_installs_from_source_into_the_local_environment_and_runs(
    env: LocalEnvironment, project_python: Path
) -> None:
    """Locally a tool without py_standalone goes into an overlay venv of the tools dir, never into the user's
    Python; the debugger still runs the program with the project's `python3`."""
    report = install_tools(env, ["debugger"], {"workdir": env.workdir})
    assert report.failed == []
    [debugger] = report.installed
    bin_dir = f"{env.tools_root}/envs/debugger/bin"
    assert (debugger.name, debugger.invocation, debugger.commands) == (
        "debugger",
        f"{bin_dir}/debugger",
        (f"{bin_dir}/debugger", f"{bin_dir}/debugger-commands"),
    )
    usage = load_tool_config(TOOLS_DIR / "debugger.yaml").usage
    assert debugger.usage == usage.replace("{{ invocation }}", f"{bin_dir}/debugger").strip()
    located = env.execute(f"{bin_dir}/python -c 'import llm_ide_debugger as d; print(d.__file__)'")
    assert located.output == f"{env.tools_root}/debugger/src/llm_ide_debugger/__init__.py\n"
    assert env.execute("python3 -c 'import llm_ide_debugger'").returncode == 1, "the project's Python stays clean"

    session = env.execute(
        f"{bin_dir}/debugger start app.py && {bin_dir}/debugger-commands 'b app.py:6' c 'p x, y' where c"
    )
    assert session.returncode == 0, session.output
    assert session.output.split("\n", 1)[1] == (
        "> app.py:1 in <module>()\n-> import sys\n"
        f"(Pdb) b app.py:6\nBreakpoint 1 at {env.workdir}/app.py:6\n"
        "(Pdb) c\n> app.py:6 in f()\n-> return y\n(Pdb) p x, y\n(21, 42)\n"
        "(Pdb) where\n  [... 2 frame(s) of pdb/pytest/unittest internals ...]\n  app.py:9 in <module>()\n"
        "-> print(f(21), sys.prefix)\n> app.py:6 in f()\n-> return y\n"
        f"(Pdb) c\n42 {project_python}\n[debugger] The program finished (exit status 0); the session has ended.\n"
    )


@pytest.mark.slow
def test_standalone_tool_gets_its_own_venv_with_the_requested_python(
    wheel_env: LocalEnvironment, tmp_path: Path
) -> None:
    env = wheel_env
    tools = tmp_path / "tool-configs"
    config = write_tool(
        tools,
        "hello",
        backend="setuptools",
        py_standalone=HOST_PYTHON,
        setup_script="{{ invocation }} set up in {{ workdir }}",
    )
    report = install_tools(env, [str(config)], {"workdir": env.workdir}, tools_dir=tools)
    assert report.failed == []
    venv = f"{env.tools_root}/envs/hello"
    [hello] = report.installed
    assert (hello.name, hello.invocation, hello.commands) == ("hello", f"{venv}/bin/hello", (f"{venv}/bin/hello",))
    assert hello.usage == f"`{venv}/bin/hello ARGS` prints its Python version (hello)."
    assert env.execute(f"{hello.invocation} now").output == f"hello runs on Python {HOST_PYTHON} now\n"
    assert env.execute(f"{venv}/bin/python -c 'import sys, hello; print(sys.prefix, hello.__file__)'").output == (
        f"{venv} {env.tools_root}/hello/src/hello/__init__.py\n"
    )
    assert env.execute("python3 -c 'import hello'").returncode == 1, "the tool must stay out of the project's Python"


def test_failing_steps_are_reported_and_the_other_tools_install(
    wheel_env: LocalEnvironment, tmp_path: Path, project_python: Path
) -> None:
    env = wheel_env
    tools = tmp_path / "tool-configs"
    missing_python = write_tool(tools, "ancient", py_standalone="3.99")
    broken_setup = write_tool(tools, "broken", setup_script="echo preparing {{ tool_dir }}; ls /no/such/dir")
    undefined = write_tool(tools, "strict", setup_script="echo {{ instance_id }}")
    events: list[ToolEvent] = []
    report = install_tools(
        env,
        [str(missing_python), str(broken_setup), "debugger", str(undefined), "no-such-tool"],
        {"workdir": env.workdir},
        on_event=events.append,
    )
    assert [tool.name for tool in report.installed] == ["debugger"]
    failed = {failure.name: failure for failure in report.failed}
    assert sorted(failed) == ["ancient", "broken", "no-such-tool", "strict"]
    assert (failed["ancient"].step, failed["ancient"].returncode) == ("environment", 1)
    assert failed["ancient"].output == "no working Python 3.99 interpreter found (tried python3.99, python3)\n"
    assert failed["ancient"].command.endswith(f'"$PY" -m venv --clear {env.tools_root}/envs/ancient')
    assert failed["broken"] == FailedTool(
        "broken",
        "setup",
        f"echo preparing {env.tools_root}/broken; ls /no/such/dir",
        f"preparing {env.tools_root}/broken\nls: cannot access '/no/such/dir': No such file or directory\n",
        2,
    )
    assert failed["broken"].reason == (
        f"step `setup` failed (exit status 2): echo preparing {env.tools_root}/broken; ls /no/such/dir\n"
        f"preparing {env.tools_root}/broken\nls: cannot access '/no/such/dir': No such file or directory"
    )
    assert (failed["strict"].step, failed["strict"].output) == ("setup", "'instance_id' is undefined")
    assert failed["no-such-tool"].step == "config" and "unknown tool 'no-such-tool'" in failed["no-such-tool"].output
    outcomes = [(event.tool, event.kind, event.detail) for event in events if event.kind != "step"]
    assert outcomes[0][:2] == ("no-such-tool", "failed")
    assert outcomes[0][2].startswith("step `config` failed: unknown tool 'no-such-tool'")
    assert outcomes[1:] == [
        ("ancient", "installing", ""),
        (
            "ancient",
            "failed",
            "step `environment` failed, exit status 1: no working Python 3.99 interpreter found (tried python3.99,"
            " python3)",
        ),
        ("broken", "installing", ""),
        (
            "broken",
            "failed",
            "step `setup` failed, exit status 2: ls: cannot access '/no/such/dir': No such file or directory",
        ),
        ("debugger", "installing", ""),
        ("debugger", "installed", "built"),
        ("strict", "installing", ""),
        ("strict", "failed", "step `setup` failed: 'instance_id' is undefined"),
    ]
    built = [event.detail for event in events if event.tool == "debugger" and event.kind == "step"]
    assert built == ["prepare", "copy", "environment", "verify", "pip"], "build steps are told as they start"
    assert tool_usage_text(report.installed).startswith("### `debugger`\nA live pdb session you drive command by")
    debugger = report.installed[0].invocation
    assert env.execute(f"{debugger} start app.py && {debugger}-commands c").output.endswith(
        f"(Pdb) c\n42 {project_python}\n[debugger] The program finished (exit status 0); the session has ended.\n"
    )


def test_tool_usage_text_lists_each_installed_tool(tmp_path: Path) -> None:
    tools = [load_tool_config(write_tool(tmp_path, name)) for name in ("one", "two")]
    installed = [
        InstalledTool(tool.tool_name, tool.version, f"/opt/{tool.tool_name}", f"Run /opt/{tool.tool_name}.", (), tool)
        for tool in tools
    ]
    assert tool_usage_text(installed) == "### `one`\nRun /opt/one.\n\n### `two`\nRun /opt/two."
    assert tool_usage_text([]) == ""
