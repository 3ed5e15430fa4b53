"""Tools installed by the installer into real containers from the base image, and used there."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import BASE_IMAGE, base_image_client, make_git_repo, remove_containers

from llm_ide.config import load_config
from llm_ide.environments import make_environment
from llm_ide.environments.base import Environment
from llm_ide.environments.docker import DockerEnvironment
from llm_ide.tools.cache import ToolCache
from llm_ide.tools.config import load_tools
from llm_ide.tools.installer import InstalledTool, ToolEvent, install_tools, plan

pytestmark = pytest.mark.docker

APP = """\
def scale(values, factor):
    scaled = []
    for value in values:
        scaled.append(value * factor)
    return scaled


print(scale([1, 2, 3], 10))
"""
LIB = "def area(width, height):\n    return width * height\n"
USE = "from shapes.lib import area\n\nprint(area(2, 3))\n"


@pytest.fixture
def container_env(tmp_path: Path) -> Iterator[Environment]:
    client = base_image_client()
    run_id = f"test-tools-{uuid.uuid4().hex[:10]}"
    repo = make_git_repo(
        tmp_path / "repo", {"app.py": APP, "shapes/__init__.py": "", "shapes/lib.py": LIB, "use.py": USE}
    )
    settings = load_config("default", environment={"type": "docker", "image": BASE_IMAGE, "workdir": "/work/repo"})
    settings = settings.environment
    env = make_environment(settings, repo, run_id, BASE_IMAGE, None)
    try:
        yield env
    finally:
        env.close()
        remove_containers(client, run_id)


def test_debugger_is_installed_into_the_container_and_drives_a_session(
    container_env: Environment, caplog: pytest.LogCaptureFixture
) -> None:
    env = container_env
    with caplog.at_level(logging.INFO, logger="llm_ide.tools"):
        report = install_tools(env, ["debugger"], {"workdir": env.workdir})
    assert report.failed == []
    [debugger] = report.installed
    assert (debugger.invocation, debugger.commands) == ("debugger", ("debugger", "debugger-commands"))
    ran = [record.args[2] for record in caplog.records if record.msg == "tool %s: %s: %s"]
    assert ran == plan(load_tools(["debugger"])[0], "docker"), "`llm-ide tools plan` must show what really runs"
    located = env.execute(
        "command -v debugger-commands;"
        " /tools/envs/debugger/bin/python -c 'import llm_ide_debugger as d; print(d.__file__)'"
    )
    assert located.output == "/usr/local/bin/debugger-commands\n/tools/debugger/src/llm_ide_debugger/__init__.py\n"
    assert env.execute("python3 -c 'import llm_ide_debugger'").returncode == 1, "the project's Python stays clean"

    start = env.execute("debugger start app.py")
    assert start.output.split("\n", 1)[1] == "> app.py:1 in <module>()\n-> def scale(values, factor):\n"
    calls = [
        (
            "debugger-commands 'b app.py:4' c",
            "(Pdb) b app.py:4\nBreakpoint 1 at /work/repo/app.py:4\n"
            "(Pdb) c\n> app.py:4 in scale()\n-> scaled.append(value * factor)\n",
        ),
        ("debugger-commands 'p value, factor, scaled'", "(Pdb) p value, factor, scaled\n(1, 10, [])\n"),
        (
            "debugger-commands c 'p scaled'",
            "(Pdb) c\n> app.py:4 in scale()\n-> scaled.append(value * factor)\n(Pdb) p scaled\n[10]\n",
        ),
        ("debugger-commands s", "(Pdb) s\n> app.py:3 in scale()\n-> for value in values:\n"),
        (
            "debugger-commands where",
            "(Pdb) where\n  [... 2 frame(s) of pdb/pytest/unittest internals ...]\n"
            "  app.py:8 in <module>()\n-> print(scale([1, 2, 3], 10))\n"
            "> app.py:3 in scale()\n-> for value in values:\n",
        ),
        (
            "debugger-commands cl c",
            "(Pdb) cl\nDeleted breakpoint 1 at /work/repo/app.py:4\n(Pdb) c\n[10, 20, 30]\n"
            "[debugger] The program finished (exit status 0); the session has ended.\n",
        ),
    ]
    for command, expected in calls:
        result = env.execute(command)
        assert (result.output, result.returncode) == (expected, 0), command
    assert env.execute("debugger-commands where").returncode == 1


@pytest.mark.slow
def test_navigator_gets_its_own_python_in_the_container(container_env: Environment) -> None:
    """py_standalone: a venv at /tools/envs/navigator with python3.11; jedi comes from PyPI into that venv only."""
    env = container_env
    report = install_tools(env, ["navigator"], {"workdir": env.workdir})
    assert report.failed == [], report.failed[0].reason if report.failed else ""
    [navigator] = report.installed
    assert navigator.invocation == "/tools/envs/navigator/bin/navigator"
    assert env.execute("python3 -c 'import jedi'").returncode == 1, "jedi must stay out of the project's Python"
    assert env.execute(f"{navigator.invocation} definition use.py 3 area").output == (
        "shapes/lib.py:1: def area(width, height):\n"
    )
    assert env.execute(f"{navigator.invocation} references shapes/lib.py area").output == (
        "shapes/lib.py:1: def area(width, height):\n"
        "use.py:1: from shapes.lib import area\n"
        "use.py:3: print(area(2, 3))\n"
    )


@pytest.mark.parametrize("mounted", [True, False])
def test_next_container_takes_the_tool_from_the_cache_without_network(
    tmp_path: Path, mounted: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """The first container builds the debugger and the host keeps it; the next one, with no network at all, gets it
    linked from the read-only mount of the cache (or, when the engine cannot see that folder, copied in), and checked
    there: each container is new (a local run's checks are remembered per entry: test_tools_checked.py)."""
    client = base_image_client()
    run_id = f"test-tools-cache-{uuid.uuid4().hex[:10]}"
    repo = make_git_repo(tmp_path / "repo", {"app.py": APP})
    cache = ToolCache(tmp_path / "cache")
    mount = cache.root / "docker" if mounted else None
    reports: list[tuple[InstalledTool, list[ToolEvent]]] = []
    try:
        for network in ("host", "none"):
            with DockerEnvironment(
                BASE_IMAGE, run_id=run_id, repo=repo, network=network, tools_cache=mount, workdir="/work/repo"
            ) as env:
                events: list[ToolEvent] = []
                caplog.clear()
                with caplog.at_level(logging.INFO, logger="llm_ide.tools"):
                    report = install_tools(
                        env, ["debugger"], {"workdir": env.workdir}, on_event=events.append, cache=cache
                    )
                assert report.failed == [], report.failed[0].reason if report.failed else ""
                reports.append((report.installed[0], events))
                session = env.execute("debugger start app.py && debugger-commands 'b app.py:4' c 'p value'")
                assert session.output.endswith("(Pdb) p value\n1\n"), session.output
                placed = env.execute("readlink /tools/envs/debugger /tools/debugger")
                assert env.execute("python3 -c 'import llm_ide_debugger'").returncode == 1
        (first, first_events), (second, second_events) = reports
        assert (first.how, second.how) == ("built and cached", "from cache")
        assert "step" in {event.kind for event in first_events}
        assert [event.kind for event in second_events] == ["installing", "installed"], "nothing was built"
        ran = [record.args[1] for record in caplog.records if record.msg == "tool %s: %s: %s"]
        assert ran == ["link", "executable", "check"], "checked in the new container"
        [entry] = (cache.root / "docker").iterdir()
        expected = (
            f"/opt/llm-ide-tools/{entry.name}/tools/envs/debugger\n/opt/llm-ide-tools/{entry.name}/tools/debugger\n"
        )
        assert placed.output == (expected if mounted else ""), "linked to the mount, else copied in"
    finally:
        remove_containers(client, run_id)
