"""What each test costs, and the order tests start in (tests/README.md: the guard), loaded by conftest.py as a plugin:
--cpu-limit fails a test outside `slow` over its CPU seconds (setup to teardown: every process it started, where this
process can have a cpuacct cgroup of its own, else its process and the children it waited for), --cpu-durations lists
the dearest, --durations-from starts the tests a JSON names first, longest first,
and --save-durations writes that JSON."""

from __future__ import annotations

import contextlib
import json
import os
import resource
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
CPU_START = pytest.StashKey[float]()
SPENT: list[tuple[float, str]] = []  # (CPU seconds, test id) of every test, gathered where the run reports
WALL: dict[str, float] = {}  # test id -> wall seconds, setup to teardown, gathered where the run reports
DURATIONS = TESTS / "durations.json"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")  # cgroup v1's CPU accounting (v2 has one tree, which runs' limits use)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("cost", "what each test costs in CPU: its process and the children it waited for")
    group.addoption(
        "--cpu-limit",
        type=float,
        metavar="SECONDS",
        help="fail a test outside `slow` that uses more CPU seconds than this (setup, call and teardown)",
    )
    group.addoption("--cpu-durations", type=int, default=0, metavar="N", help="list the N tests that used most CPU")
    group.addoption(
        "--durations-from",
        default=str(DURATIONS),
        metavar="PATH",
        help="start the tests this JSON (test id: seconds) names first, longest first (default: tests/durations.json)",
    )
    group.addoption("--save-durations", metavar="PATH", help="write the 200 longest tests' wall seconds there as JSON")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Longest first: xdist hands each idle worker the next test, so a long test started last would run alone at the
    end (CI: a 3-minute test started last ran alone for nearly 2). Tests the file does not name keep their order."""
    path = Path(config.getoption("durations_from"))
    known = json.loads(path.read_text()) if path.is_file() else {}
    items.sort(key=lambda item: -known.get(item.nodeid, 0.0))


def pytest_configure(config: pytest.Config) -> None:
    global COUNTER
    COUNTER = own_cpuacct()


def pytest_unconfigure(config: pytest.Config) -> None:
    if COUNTER is not None:  # back where it was; the folder goes once nothing is left in it
        with contextlib.suppress(OSError):
            (COUNTER.parent / "cgroup.procs").write_text(str(os.getpid()))
            COUNTER.rmdir()


def own_cpuacct() -> Path | None:
    """A cpuacct cgroup of this process's own (cgroup v1, as root), which every process it starts joins: its figure
    counts the commands a PID namespace reaps too (bubblewrap's), whose CPU rusage never sees. Those of a process
    gone are removed on the way."""
    with contextlib.suppress(OSError, ValueError):
        entries = [line.split(":", 2) for line in Path("/proc/self/cgroup").read_text().splitlines()]
        [place] = [path for _, controllers, path in entries if "cpuacct" in controllers.split(",")]
        parent = CPUACCT / place.lstrip("/")
        for left in parent.glob("llm-ide-tests-*"):
            if not Path(f"/proc/{left.name.rpartition('-')[2]}").exists():  # (its workers' inside it: those first)
                for folder in sorted([left, *left.rglob("llm-ide-tests-*")], key=lambda path: -len(path.parts)):
                    with contextlib.suppress(OSError):
                        folder.rmdir()
        counter = parent / f"llm-ide-tests-{os.getpid()}"
        counter.mkdir(exist_ok=True)
        (counter / "cgroup.procs").write_text(str(os.getpid()))
        return counter
    return None


COUNTER: Path | None = None


def cpu_seconds() -> float:
    if COUNTER is not None:
        return int((COUNTER / "cpuacct.usage").read_text()) / 1e9
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    item.stash[CPU_START] = cpu_seconds()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    """At teardown: the test's CPU on its report (xdist carries it to the controller); over --cpu-limit, outside
    `slow`, the teardown fails with the test's name and its figure."""
    outcome = yield
    if call.when != "teardown":
        return
    report, spent = outcome.get_result(), cpu_seconds() - item.stash[CPU_START]
    report.user_properties.append(("cpu_seconds", spent))
    limit = item.config.getoption("cpu_limit")
    if limit is not None and spent > limit and report.passed and item.get_closest_marker("slow") is None:
        report.outcome = "failed"
        report.longrepr = (
            f"{item.nodeid} used {spent:.1f} s of CPU, over --cpu-limit={limit:g} for a test outside `slow`: "
            "make it cheaper (tests/README.md) or mark it slow"
        )


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    SPENT.extend((value, report.nodeid) for key, value in report.user_properties if key == "cpu_seconds")
    WALL[report.nodeid] = WALL.get(report.nodeid, 0.0) + report.duration


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("save_durations")
    if path and not hasattr(session.config, "workerinput"):
        longest = sorted(WALL.items(), key=lambda pair: -pair[1])[:200]
        Path(path).write_text(json.dumps({nodeid: round(seconds, 1) for nodeid, seconds in longest}, indent=0) + "\n")


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    count = config.getoption("cpu_durations")
    if count and SPENT:
        terminalreporter.write_sep("=", f"{count} tests that used most CPU ({sum(s for s, _ in SPENT):.0f} s in all)")
        for spent, nodeid in sorted(SPENT, reverse=True)[:count]:
            terminalreporter.write_line(f"{spent:7.2f}s cpu  {nodeid}")
