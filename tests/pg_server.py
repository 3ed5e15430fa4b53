"""A throwaway PostgreSQL server for tests: initdb in a temp dir, started on a free loopback port, removed after.

    with postgres_server() as url:   # postgresql://postgres@127.0.0.1:PORT/postgres
        ...

PostgreSQL refuses to run as root, so under root the data directory belongs to the `postgres` user and the server
tools run through `runuser -u postgres`. `require_postgres()` skips a test when the server binaries are missing,
except in CI (where .ci/run installs them), where it fails.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from conftest import unavailable

SERVER_USER = "postgres"


def find_bin_dir() -> Path | None:
    """The directory holding initdb and pg_ctl: on PATH, else the newest /usr/lib/postgresql/*/bin."""
    on_path = shutil.which("pg_ctl")
    if on_path and shutil.which("initdb"):
        return Path(on_path).parent
    candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(p.split("/")[-3]))
    return Path(candidates[-1]).parent if candidates else None


def require_postgres() -> Path:
    bin_dir = find_bin_dir()
    reason = ""
    if bin_dir is None:
        reason = "PostgreSQL server binaries (initdb, pg_ctl) not found (apt-get install postgresql)"
    elif os.geteuid() == 0 and not _has_user(SERVER_USER):
        reason = f"running as root and there is no {SERVER_USER!r} user to run the server as"
    else:
        try:
            import langgraph.checkpoint.postgres  # noqa: F401
            import psycopg  # noqa: F401
        except ImportError:
            reason = "langgraph-checkpoint-postgres / psycopg not installed (pip install 'llm-ide[postgres]')"
    if reason:
        unavailable(reason)
    assert bin_dir is not None
    return bin_dir


def _has_user(name: str) -> bool:
    try:
        pwd.getpwnam(name)
    except KeyError:
        return False
    return True


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _run(bin_dir: Path, tool: str, *args: str) -> None:
    command = [str(bin_dir / tool), *args]
    if os.geteuid() == 0:
        command = ["runuser", "-u", SERVER_USER, "--", *command]
    result = subprocess.run(command, capture_output=True, text=True, timeout=120, cwd="/")
    if result.returncode != 0:
        raise RuntimeError(f"{tool} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")


@dataclass
class PostgresServer:
    """A running test server that a test may stop and start again (its data kept): a store that dies mid-run."""

    bin_dir: Path
    data: Path
    log: Path
    options: str
    url: str

    def start(self) -> None:
        _run(self.bin_dir, "pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", self.options, "-w", "start")

    def stop(self) -> None:
        _run(self.bin_dir, "pg_ctl", "-D", str(self.data), "-m", "fast", "-w", "stop")

    def running(self) -> bool:
        return (self.data / "postmaster.pid").exists()


@contextmanager
def postgres_server(bin_dir: Path | None = None) -> Iterator[str]:
    """Start a fresh server (trust auth, loopback only); yield its URL; stop it and delete its files."""
    with stoppable_postgres(bin_dir) as server:
        yield server.url


@contextmanager
def stoppable_postgres(bin_dir: Path | None = None) -> Iterator[PostgresServer]:
    """postgres_server's, as a PostgresServer (stopped at the end if it runs)."""
    bin_dir = bin_dir or require_postgres()
    base = Path(tempfile.mkdtemp(prefix="llm-ide-pg-"))
    data, sockets, log = base / "data", base / "sockets", base / "server.log"
    sockets.mkdir()
    if os.geteuid() == 0:
        user = pwd.getpwnam(SERVER_USER)
        for path in (base, sockets):
            os.chown(path, user.pw_uid, user.pw_gid)
    server = None
    try:
        _run(bin_dir, "initdb", "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync")
        server = started(bin_dir, data, log, sockets)
        yield server
    finally:
        if server is not None and server.running():
            server.stop()
        shutil.rmtree(base, ignore_errors=True)


def started(bin_dir: Path, data: Path, log: Path, sockets: Path, tries: int = 5) -> PostgresServer:
    """The server started on a free port: a port found free can be another process's before the server binds it, and
    the server then tries another."""
    port = free_port()
    options = f"-p {port} -k {sockets} -c listen_addresses=127.0.0.1 -c fsync=off"
    server = PostgresServer(bin_dir, data, log, options, f"postgresql://postgres@127.0.0.1:{port}/postgres")
    try:
        server.start()
    except RuntimeError:
        if tries > 1 and "Address already in use" in log.read_text(errors="replace"):
            log.unlink()
            return started(bin_dir, data, log, sockets, tries - 1)
        raise
    return server
