"""Shared test helpers and the isolation every test gets (tests/README.md: how tests run, in-process or as a child).

Each test runs with its own XDG_CONFIG_HOME (empty: no user config reaches it) and none of the caller's LLM_IDE_*,
provider key, endpoint or tracing variables, nor xdist's PYTEST_XDIST_*. A pytest that a test's run starts (the
agent testing a project) loads none of this venv's plugins (PYTEST_DISABLE_PLUGIN_AUTOLOAD: a project's own venv
would not hold them, and they cost 1-2 s of CPU per start). Caches that are content-keyed and locked (the tools'
builds, uv's, pip's: XDG_CACHE_HOME) are one folder for the whole session, shared by its xdist workers and never the
user's.
"""

from __future__ import annotations

import compileall
import contextlib
import fcntl
import hashlib
import os
import pty
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

TESTS = Path(__file__).resolve().parent
SHARED = TESTS.parent.parent / "shared"
PACKAGE = TESTS.parent / "llm_ide"
COPIED = re.compile(r"/demo/project/|/tools/packages/")  # copied whole (into the demo's repository, a run's tools)
BASE_IMAGE = "llm-ide-base:bookworm"

CALLERS_BYTECODE = sys.dont_write_bytecode  # PYTHONDONTWRITEBYTECODE: back as the caller set it after collection
sys.dont_write_bytecode = False  # the plugins' imports too: pytest rewrites langsmith's asserts (its pytest plugin's)
pytest_plugins = ("cpu_accounting", "shared_fixtures")  # --cpu-limit, --cpu-durations, …; browser, demo_run, token


def pytest_configure(config: pytest.Config) -> None:
    """A shell ignores SIGINT in the jobs it starts in the background, and programs inherit that: the Ctrl-C tests'
    children would never see theirs. A handler of our own becomes the default again in every child."""
    if signal.getsignal(signal.SIGINT) is signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session: pytest.Session) -> Iterator[None]:
    """Where PYTHONDONTWRITEBYTECODE is set (these machines set it), every pytest process would compile and
    assertion-rewrite anew the test modules, the package and what this conftest's plugins import (pytest rewrites
    langsmith's asserts: its pytest plugin is installed): ~3 s of CPU per xdist worker; and every `llm-ide` a test
    starts would compile the package's modules (~0.2 s of CPU each). Their bytecode is written (gitignored
    __pycache__, next to the sources) as they are imported, from this conftest's import to the end of collection,
    then the whole package's (what only a command imports too). What a test imports later, and every program it
    starts, follow the variable as before."""
    try:
        with compiled_once(session.config):
            yield
    finally:
        sys.dont_write_bytecode = CALLERS_BYTECODE


@contextlib.contextmanager
def compiled_once(config: pytest.Config) -> Iterator[None]:
    """xdist's workers collect side by side: on a fresh checkout each would compile the same modules. The first one
    compiles them while the others wait, then they read its bytecode; a marker naming the versions of the test files
    and of the package's says that it was done, and later sessions do not wait. xdist's controller collects nothing."""
    if not hasattr(config, "workerinput") and getattr(config.option, "numprocesses", None):
        yield
        return
    sources = sorted([*TESTS.glob("*.py"), *PACKAGE.rglob("*.py")])
    versions = [(str(path), path.stat().st_mtime_ns, path.stat().st_size) for path in sources]
    key = hashlib.sha256(repr((versions, sys.version, pytest.__version__)).encode()).hexdigest()[:16]
    cache = TESTS / "__pycache__"
    marker = cache / f"collected-{key}"
    if marker.exists():
        yield
        return
    try:
        cache.mkdir(exist_ok=True)
        lock = (cache / "collecting.lock").open("w")
    except OSError:  # a read-only checkout: no bytecode is written there either
        yield
        return
    with lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        compiled = marker.exists()
        if compiled:
            fcntl.flock(lock, fcntl.LOCK_UN)
        yield
        if not compiled:
            compileall.compile_dir(PACKAGE, quiet=1, rx=COPIED)
            for stale in cache.glob("collected-*"):
                stale.unlink(missing_ok=True)
            marker.touch()


@pytest.hookimpl(optionalhook=True)  # a pytest without xdist (test_cpu_guard's) loads this conftest too
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto`: a worker per core this process may run on (xdist's own counts the machine's). A worker more would
    use a core while tests wait, but the workers then contend: on 2 cores, 3 workers took 3-9% less wall time and 12%
    more CPU (r96, two pairs). PYTEST_XDIST_AUTO_NUM_WORKERS, when set, decides (xdist's own hook reads it)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    return len(os.sched_getaffinity(0))


# the caller's shell must not steer a test, nor xdist's worker variables the programs a run starts (a pytest there
# would take itself for a worker)
LEAKY = ("LLM_IDE_", "OPENAI_", "ANTHROPIC_", "LANGSMITH_", "LANGCHAIN_", "PYTEST_XDIST_")


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest) -> Path:
    """XDG_CACHE_HOME for the session: under the run's base temp folder, which xdist's workers share."""
    base = tmp_path_factory.getbasetemp()
    root = (base.parent if hasattr(request.config, "workerinput") else base) / "session-cache"
    root.mkdir(exist_ok=True)
    return root


def isolated_environ(tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> dict[str, str]:
    """A test's environment: none of the LEAKY variables, a config folder of its own, the session's cache, no
    plugins autoloaded by a pytest a run starts (not this venv's), and this interpreter's folder first on PATH, as
    the venv's activation puts it (`.venv/bin/python -m pytest` unactivated: the commands' `python3` would be
    another one, e.g. a version manager's shim or the system's without pytest)."""
    kept = {name: value for name, value in os.environ.items() if not name.startswith(LEAKY)}
    folders = {"XDG_CONFIG_HOME": config_home(tmp_path_factory), "XDG_CACHE_HOME": str(session_cache)}
    return kept | folders | {"PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1", "PATH": venv_first(kept.get("PATH", ""))}


def config_home(tmp_path_factory: pytest.TempPathFactory) -> str:
    """An empty folder of its own, in one folder for the session: `mktemp` lists the base temp folder to number each
    folder it makes, and a folder per test there made each test's `mktemp` (its `tmp_path`'s too) list one more."""
    homes = tmp_path_factory.getbasetemp() / "config-homes"
    homes.mkdir(exist_ok=True)
    return tempfile.mkdtemp(prefix="config-", dir=homes)


def venv_first(path: str) -> str:
    folder = str(Path(sys.executable).parent)
    return os.pathsep.join([folder, *(entry for entry in path.split(os.pathsep) if entry and entry != folder)])


@pytest.fixture(autouse=True)
def isolated(monkeypatch: pytest.MonkeyPatch, tmp_path_factory: pytest.TempPathFactory, session_cache: Path) -> None:
    environ = isolated_environ(tmp_path_factory, session_cache)
    for name in os.environ.keys() - environ.keys():
        monkeypatch.delenv(name)
    for name, value in environ.items():
        if os.environ.get(name) != value:
            monkeypatch.setenv(name, value)


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str) -> NoReturn:
    """What a test needs from the machine (a system package, a service, the shared data) is missing: a skip that says
    why, except under CI=true, where .ci/run installs everything and a skip would hide a test that never runs."""
    if in_ci():
        pytest.fail(f"CI is set but {reason}")
    pytest.skip(reason)


def docker_available() -> bool:
    if shutil.which("docker") is None:
        return False
    return subprocess.run(["docker", "info"], capture_output=True, timeout=30).returncode == 0


def require_docker() -> None:
    if not docker_available():
        unavailable("no Docker engine is reachable (apt-get install docker.io; scripts/start_docker.sh starts it)")


def require_bwrap() -> str:
    """bubblewrap, installed and able to create its namespaces here (a container may forbid them)."""
    from llm_ide.environments.bwrap import bwrap_path

    found = bwrap_path()
    if found is None:
        unavailable("bubblewrap (bwrap) is missing or cannot create namespaces here (apt-get install bubblewrap)")
    return found


def base_image_client():
    """A Docker client, with the base image built (scripts/build_base_image.sh)."""
    require_docker()
    import docker

    client = docker.from_env()
    try:
        client.images.get(BASE_IMAGE)
    except docker.errors.ImageNotFound:
        unavailable(f"{BASE_IMAGE} is missing (scripts/build_base_image.sh builds it)")
    return client


def containers_of(client: Any, run_id: str) -> list[Any]:
    """The containers of run `run_id`, stopped ones too (one removed while they are listed is left out)."""
    return client.containers.list(all=True, ignore_removed=True, filters={"label": f"llm-ide.run-id={run_id}"})


def remove_containers(client: Any, run_id: str) -> None:
    """Whatever a test left under `run_id` (NotFound / 409: its auto-removal already under way)."""
    import docker

    for container in containers_of(client, run_id):
        with contextlib.suppress(docker.errors.APIError):
            container.remove(force=True)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


def make_git_repo(path: Path, files: dict[str, str]) -> Path:
    """A real git repository holding `files`, committed once."""
    path.mkdir(parents=True, exist_ok=True)
    for name, content in files.items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(content)
    git(path, "init", "-q", "-b", "main", "--template=")  # no hook samples to copy, no maintenance after the commit
    git(path, "add", "-A")
    git(path, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "maintenance.auto=false", "commit", "-q", "-m", "base")
    return path


def wait_for(predicate: Callable[[], object], timeout: float = 120, what: str = "the condition") -> None:
    """Until `predicate()` holds, looked at every 50 ms (a file, a port, a process: what a test synchronises on)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"timed out after {timeout:g} s waiting for {what}"
        time.sleep(0.05)


HELD_PORTS: list[socket.socket] = []


def closed_port() -> int:
    """A loopback port nothing answers on until the test ends: bound, never listening (a connection is refused), and
    held, so that no other worker's server binding port 0 is given it meanwhile (a port freed at once was, by then)."""
    probe = socket.socket()
    HELD_PORTS.append(probe)
    probe.bind(("127.0.0.1", 0))
    return probe.getsockname()[1]


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown() -> None:
    while HELD_PORTS:
        HELD_PORTS.pop().close()


def running(marker: str, where: str = "cmdline") -> list[int]:
    """Host pids of the processes whose command line (or environment: `where`) holds `marker` (pids inside a sandbox
    differ from the host's)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and entry.name != str(os.getpid()):
            try:
                cmdline = (entry / where).read_bytes()
                state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            except (OSError, IndexError):
                continue
            if marker.encode() in cmdline and state not in {"Z", "X"}:
                found.append(int(entry.name))
    return found


def all_gone(marker: str, wait: float = 30.0, where: str = "cmdline") -> bool:
    """Whether every process holding `marker` ends within `wait` seconds (a killed run's commands die a moment after
    it: each by a signal sent as its parent dies — sandbox, namespace init, shell in turn — while the test may see the
    run's own exit first)."""
    end = time.monotonic() + wait
    while running(marker, where):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def marked(mark: str) -> list[int]:
    """Host pids of the live processes whose environment holds a run's mark (LLM_IDE_TEST_MARK in its
    `environment.env`): its commands, what they left, and its PID namespace's init and holder."""
    return running(f"LLM_IDE_TEST_MARK={mark}", "environ")


def none_marked(mark: str, wait: float = 10.0) -> bool:
    return all_gone(f"LLM_IDE_TEST_MARK={mark}", wait, "environ")


def killed_in_command(run: subprocess.Popen, mark: str) -> None:
    """`run` (its process group) SIGKILLed while its command, which carries `mark`, runs; back once that command is
    gone too, so that what the test does next (e.g. the file the command waits for) cannot reach it."""
    assert marked(mark), "the run's command is under way, carrying its mark"
    os.killpg(run.pid, signal.SIGKILL)
    run.wait()
    assert none_marked(mark, 60)


def ended(process: subprocess.Popen[bytes], seconds: float = 120) -> tuple[int, str]:
    """`process`'s exit status and stderr once it ends, its pipes drained meanwhile (a child blocked on a full pipe
    never ends). One still running after `seconds` is aborted: with PYTHONFAULTHANDLER in its environment, the
    failure shows where each of its threads was."""
    try:
        _, err = process.communicate(timeout=seconds)
    except subprocess.TimeoutExpired:
        process.send_signal(signal.SIGABRT)
        _, err = process.communicate()
        pytest.fail(f"still running after {seconds:g} s; its stacks:\n{err.decode(errors='replace')}")
    return process.returncode, err.decode(errors="replace")


def interrupt_when(path: Path, process: subprocess.Popen[str], seconds: float = 300) -> tuple[str, str]:
    """Ctrl-C to `process` once it has made `path` (it is where the test wants it): its stdout and stderr."""
    deadline = time.monotonic() + seconds
    while not path.exists():
        assert process.poll() is None and time.monotonic() < deadline, process.communicate()
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    return process.communicate(timeout=120)


def in_terminal(
    argv: list[str], env: dict[str, str], seconds: float = 300, watch: Callable[[bytes], object] | None = None
) -> tuple[int, bytes]:
    """`argv` run with a pseudo-terminal as its stdout and stderr: its exit status and every byte it wrote there
    (`watch` sees them all after each read, e.g. to open a gate the command waits for)."""
    primary, secondary = pty.openpty()
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=secondary, stderr=secondary, env=env)
    os.close(secondary)
    output = bytearray()
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            chunk = os.read(primary, 4096)
        except OSError:  # EIO: the process closed the terminal
            break
        if not chunk:
            break
        output.extend(chunk)
        if watch is not None:
            watch(bytes(output))
    os.close(primary)
    return process.wait(timeout=60), bytes(output)


@pytest.fixture
def shared_dir() -> Path:
    """../shared beside the repository: skipped on a clone without it, a failure under CI where it must exist."""
    if not (SHARED / "data").is_dir():
        unavailable(f"{SHARED / 'data'} is absent (the shared data lives beside the repository)")
    return SHARED


@pytest.fixture
def small_disk(tmp_path: Path):
    """An 8 MB tmpfs (a disk that fills up for real); skipped where mounting is not allowed (needs root)."""
    mount = tmp_path / "small-disk"
    mount.mkdir()
    result = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mount)], capture_output=True)
    if result.returncode != 0:
        reason = f"cannot mount a tmpfs (needs root): {result.stderr.decode().strip()}"
        unavailable(reason) if os.geteuid() == 0 else pytest.skip(reason)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], capture_output=True)
