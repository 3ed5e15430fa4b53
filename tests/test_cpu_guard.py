"""What keeps the suite fast (tests/README.md): a test outside `slow` over --cpu-limit fails with its name and figure,
a `slow` one does not, and --cpu-durations lists the dearest; the tests durations.json names start first, longest first,
and --save-durations writes that file; collection leaves the package in bytecode. A pytest of its own, with the plugin
(tests/cpu_accounting.py) or, as the suite loads it, through this conftest (with the fixtures the tests share, which
import what they need as they are made)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import uuid
from collections.abc import Callable
from pathlib import Path

import cpu_accounting
import pytest
from conftest import COPIED, PACKAGE, require_bwrap

TESTS = Path(__file__).resolve().parent
BURN = """
import time

import pytest


def burn(seconds):
    start = time.process_time()
    while time.process_time() - start < seconds:
        pass


def test_dear():
    burn(0.25)


@pytest.mark.slow
def test_dear_but_slow():
    burn(0.25)


def test_cheap():
    pass
"""


def pytest_of_its_own(folder: Path) -> tuple[Callable[..., list[str]], dict[str, str]]:
    """BURN in `folder`, and the command line (given its options; `plugin=` the module loaded with -p) and environment
    of a pytest there. Each one's temporary folders are its own: under the default one it would prune the older
    sessions' there (seconds of CPU each)."""
    (folder / "test_burn.py").write_text(BURN)
    (folder / "pytest.ini").write_text("[pytest]\nmarkers =\n    slow: slow\n")

    def command(*options: str, plugin: str = "cpu_accounting", tests: str = "test_burn.py") -> list[str]:
        argv = [sys.executable, "-m", "pytest", "-p", plugin, "-p", "no:cacheprovider", "-q", tests]
        return [*argv, "--basetemp", str(folder / f"base-{uuid.uuid4().hex[:8]}"), *options]

    return command, {**os.environ, "PYTHONPATH": str(TESTS), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def test_a_test_over_the_cpu_limit_fails_with_its_name_unless_slow(tmp_path: Path) -> None:
    pytest_with, env = pytest_of_its_own(tmp_path)
    runs = [  # side by side: each burns its own CPU
        subprocess.Popen(command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for command in (pytest_with("--cpu-limit=0.1", "--cpu-durations=3", plugin="conftest"), pytest_with())
    ]
    (stdout, stderr), (unguarded_out, unguarded_err) = (run.communicate(timeout=300) for run in runs)
    assert runs[0].returncode == 1, stdout + stderr
    lines = stdout.splitlines()
    [failed] = [line for line in lines if line.startswith("ERROR ") or line.startswith("FAILED ")]
    assert failed.startswith("ERROR test_burn.py::test_dear - ") or failed.startswith("FAILED test_burn.py::test_dear")
    assert "test_burn.py::test_dear used " in stdout and "over --cpu-limit=0.1" in stdout
    assert "test_dear_but_slow used" not in stdout
    listed = lines[lines.index(next(line for line in lines if "3 tests that used most CPU" in line)) + 1 :][:3]
    names = [line.split()[-1] for line in listed]
    assert sorted(names[:2]) == ["test_burn.py::test_dear", "test_burn.py::test_dear_but_slow"], stdout
    assert names[2] == "test_burn.py::test_cheap", stdout  # under the limit: it passed
    assert runs[1].returncode == 0 and "3 passed" in unguarded_out, unguarded_out + unguarded_err


SANDBOXED = """
import subprocess, sys

BUSY = "import time\\nstart = time.process_time()\\nwhile time.process_time() - start < 0.4:\\n    pass"


def test_sandboxed():  # bubblewrap's monitor never waits for its PID namespace: rusage never sees this CPU
    sandbox = ["bwrap", "--dev-bind", "/", "/", "--unshare-pid", "--die-with-parent"]
    subprocess.run([*sandbox, sys.executable, "-c", BUSY], check=True)
"""


def test_a_sandboxed_commands_cpu_counts_where_a_cgroup_counts_it(tmp_path: Path) -> None:
    require_bwrap()
    own = cpu_accounting.COUNTER  # this pytest's, which the pytest below makes its own in
    if own is None:
        pytest.skip("no writable cgroup v1 cpuacct hierarchy here (root on a v1 or hybrid machine)")
    pytest_with, env = pytest_of_its_own(tmp_path)
    (tmp_path / "test_sandboxed.py").write_text(SANDBOXED)
    command = pytest_with("--cpu-limit=0.3", tests="test_sandboxed.py")
    done = subprocess.run(command, cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1 and "test_sandboxed.py::test_sandboxed used 0." in done.stdout, done.stdout
    assert list(own.glob("llm-ide-tests-*")) == [], "each pytest's cgroup goes with it"


def test_the_tests_named_in_the_durations_file_start_first_longest_first(tmp_path: Path) -> None:
    known = {"test_burn.py::test_cheap": 7.5, "test_burn.py::test_dear_but_slow": 2.0, "test_burn.py::gone": 9.0}
    (tmp_path / "known.json").write_text(json.dumps(known))
    pytest_with, env = pytest_of_its_own(tmp_path)

    def ids(*options: str) -> list[str]:
        done = subprocess.run(
            pytest_with("--collect-only", *options), cwd=tmp_path, env=env, capture_output=True, text=True
        )
        return [line for line in done.stdout.splitlines() if line.startswith("test_burn.py::")]

    names = ["test_burn.py::test_dear", "test_burn.py::test_dear_but_slow", "test_burn.py::test_cheap"]
    assert ids("--durations-from", "missing.json") == names
    assert ids("--durations-from", "known.json") == [names[2], names[1], names[0]]
    done = subprocess.run(pytest_with("--save-durations", "saved.json"), cwd=tmp_path, env=env, capture_output=True)
    assert done.returncode == 0, done.stdout
    saved = json.loads((tmp_path / "saved.json").read_text())
    assert sorted(saved) == sorted(names) and list(saved.values()) == sorted(saved.values(), reverse=True)
    assert [saved[name] for name in ids("--durations-from", "saved.json")] == sorted(saved.values(), reverse=True)


def compiled(source: Path) -> bool:
    """Whether `source`'s bytecode is there and of this version of it (a timestamp-based .pyc's header; one checked by
    hash is taken as is)."""
    cached = Path(importlib.util.cache_from_source(str(source)))
    header = cached.read_bytes()[:16] if cached.exists() else b""
    if len(header) < 16 or int.from_bytes(header[4:8], "little"):
        return len(header) == 16
    stat = source.stat()
    version = (int(stat.st_mtime) & 0xFFFFFFFF, stat.st_size & 0xFFFFFFFF)
    return (int.from_bytes(header[8:12], "little"), int.from_bytes(header[12:16], "little")) == version


def test_collection_leaves_every_module_of_the_package_compiled_but_what_it_copies_whole() -> None:
    """Where PYTHONDONTWRITEBYTECODE is set, an `llm-ide` a test starts would otherwise compile each module it imports
    that no pytest wrote (~0.2 s of CPU a run): those this conftest's plugins import before collection, and those
    only a command imports. The demo's project is copied whole into a repository, the tools' sources into a run's
    environment: the compile passes over them (a __pycache__ there would go with them)."""
    demo, tools = PACKAGE / "demo" / "project", PACKAGE / "tools" / "packages"
    every = list(PACKAGE.rglob("*.py"))
    sources = [path for path in every if not any(path.is_relative_to(kept) for kept in (demo, tools))]
    assert len(sources) > 200 and [str(path) for path in sources if not compiled(path)] == []
    assert [path for path in every if bool(COPIED.search(str(path))) == (path in sources)] == []
