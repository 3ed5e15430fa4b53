"""A tool taken from the local cache is checked (its `executable` and `check` steps) once per cache entry and kind
of environment: later runs skip the checks while the entry and their context are as they were, and run them again
(catching a broken tool at the run's start) when the entry changed, the marker is gone or unreadable, or the
environment differs."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from conftest import make_git_repo, require_bwrap
from test_tools_install import write_tool

from llm_ide.environments.limits import Limits
from llm_ide.environments.local import LocalEnvironment
from llm_ide.tools.cache import ToolCache
from llm_ide.tools.checked import MARKER
from llm_ide.tools.installer import InstallReport, ToolEvent, install_tools

NAME = "greeter"


class Runs:
    """Runs (each a new local environment) installing the same tool from one cache; its check counts itself."""

    def __init__(self, tmp_path: Path, build_backend: str, cache: Path | None = None) -> None:
        self.tmp_path, self.cache = tmp_path, ToolCache(cache or tmp_path / "cache")
        self.counts = tmp_path / "counts"
        self.counts.mkdir()
        check = f"{{{{ invocation }}}} checking > /dev/null && echo checked >> {self.counts}/checks"
        self.tool = write_tool(tmp_path / "configs", NAME, check_script=check)
        self.variables = {"PYTHONPATH": build_backend} if build_backend else {}

    def install(
        self, variables: dict[str, str] | None = None, sandbox: str = "bwrap", limits: Limits | None = None
    ) -> tuple[InstallReport, list[ToolEvent], str]:
        """A new run's install: its report, events, and the output of the tool run by the agent afterwards."""
        number = len(list(self.tmp_path.glob("repo-*")))
        repo = make_git_repo(self.tmp_path / f"repo-{number}", {"a.py": "x = 1\n"})
        tools, given = self.tmp_path / f"tools-{number}", {**self.variables, **(variables or {})}
        writable = [str(self.counts)]
        with LocalEnvironment(
            repo, env=given, tools_dir=tools, writable=writable, sandbox=sandbox, limits=limits
        ) as env:
            events: list[ToolEvent] = []
            report = install_tools(env, [str(self.tool)], {}, on_event=events.append, cache=self.cache)
            used = env.execute(f"{report.installed[0].invocation} used").output if report.installed else ""
        return report, events, used

    @property
    def checks(self) -> int:
        path = self.counts / "checks"
        return len(path.read_text().splitlines()) if path.exists() else 0

    @property
    def entry(self) -> Path:
        [entry] = (self.cache.root / "local").iterdir()
        return entry


@pytest.fixture(scope="session")
def built(tmp_path_factory: pytest.TempPathFactory, build_backend: str) -> tuple[Path, Path]:
    """The tool built, cached and checked by a first run, once per worker (a build is most of a test's CPU): its
    cache, and a copy of it without the check's marker. Its environment holds absolute paths, so the copy is put back
    in place before each test, not elsewhere. Its long folder name makes the scripts' interpreter path longer than a
    shebang takes (127): pip writes them as `exec PYTHON`, whose failure names the interpreter (remove_interpreter)."""
    done = Runs(tmp_path_factory.mktemp("the_tool_built_and_checked_once_per_worker"), build_backend)
    first, _, used = done.install()
    assert (first.installed[0].how, done.checks, used.startswith(f"{NAME} runs on Python")) == (
        "built and cached",
        1,
        True,
    )
    pristine = done.cache.root.with_name("pristine")
    shutil.copytree(done.cache.root, pristine, symlinks=True, ignore=shutil.ignore_patterns(f"{MARKER}*"))
    return done.cache.root, pristine


@pytest.fixture
def runs(tmp_path: Path, build_backend: str, built: tuple[Path, Path]) -> Runs:
    """Two runs done on the built entry put back in place (new files: unchecked in any environment): the first took
    it from the cache and checked it, the second took it unchecked."""
    cache, pristine = built
    shutil.rmtree(cache)
    shutil.copytree(pristine, cache, symlinks=True)
    done = Runs(tmp_path, build_backend, cache)
    first, _, used = done.install()
    assert (first.installed[0].how, done.checks, used.startswith(f"{NAME} runs on Python")) == ("from cache", 1, True)
    second, events, used = done.install()
    assert second.installed[0].how == "from cache" and used.startswith(f"{NAME} runs on Python")
    assert [event.kind for event in events] == ["installing", "installed"]
    assert done.checks == 1, "checked once for this entry and kind of environment"
    assert len(list(done.entry.glob(".checked-*"))) == 1
    return done


def remove_interpreter(entry: Path) -> None:
    (entry / "envs" / NAME / "bin" / "python").unlink()


def edit_entry_point(entry: Path) -> None:
    module = entry / NAME / "src" / NAME / "__init__.py"
    with module.open("a") as edited:  # in place: the same file, its folder untouched
        edited.write("\n\ndef main():\n    raise SystemExit('broken by hand')\n")


def remove_entry_script(entry: Path) -> None:
    (entry / "envs" / NAME / "bin" / NAME).unlink()


@pytest.mark.parametrize(
    ("breaking", "step", "said"),
    [
        (remove_interpreter, "check", f"envs/{NAME}/bin/python"),  # (its shebang, or the exec a long one gets)
        (edit_entry_point, "check", "broken by hand"),
        (remove_entry_script, "executable", "not found after installation"),
    ],
)
def test_a_broken_cached_tool_is_caught_at_the_next_start(
    runs: Runs, breaking: Callable[[Path], None], step: str, said: str
) -> None:
    breaking(runs.entry)
    report, events, _ = runs.install()
    assert report.installed == [] and [failure.step for failure in report.failed] == [step]
    assert said in report.failed[0].output, report.failed[0].output
    assert [event.kind for event in events] == ["installing", "failed"]
    assert runs.checks == 1, "the check ran and failed (it counts itself only once it passed)"
    again, _, _ = runs.install()
    assert [failure.step for failure in again.failed] == [step], "a failed check is never remembered"


def corrupt_marker(entry: Path) -> None:
    [marker] = entry.glob(".checked-*")
    marker.write_bytes(b"\xff\xfe not a fingerprint")


def remove_marker(entry: Path) -> None:
    [marker] = entry.glob(".checked-*")
    marker.unlink()


@pytest.mark.parametrize("forgetting", [corrupt_marker, remove_marker])
def test_a_lost_marker_checks_again_and_is_written_anew(runs: Runs, forgetting: Callable[[Path], None]) -> None:
    forgetting(runs.entry)
    report, _, used = runs.install()
    assert (report.failed, report.installed[0].how, runs.checks) == ([], "from cache", 2)
    assert used.startswith(f"{NAME} runs on Python")
    runs.install()
    assert runs.checks == 2, "remembered again"


@pytest.mark.parametrize(
    ("variables", "sandbox", "limits"),
    [
        ({"PYTHONSAFEPATH": "1"}, "bwrap", None),
        ({"PATH": f"/no/such/folder:{os.environ['PATH']}"}, "bwrap", None),
        ({}, "none", None),
        ({}, "bwrap", Limits(file_size=10**9)),
    ],
    ids=["a PYTHON variable", "PATH", "no sandbox", "limits"],
)
def test_another_kind_of_environment_checks_once_more(
    runs: Runs, variables: dict[str, str], sandbox: str, limits: Limits | None
) -> None:
    if sandbox == "none":
        require_bwrap()  # (else the runs before were not sandboxed either)
    report, _, _ = runs.install(variables, sandbox, limits)
    assert (report.failed, report.installed[0].how, runs.checks) == ([], "from cache", 2)
    runs.install(variables, sandbox, limits)
    runs.install()
    assert runs.checks == 2, "each kind remembered on its own"
    assert len(list(runs.entry.glob(".checked-*"))) == 2
