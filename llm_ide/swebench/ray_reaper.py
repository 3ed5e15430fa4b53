"""The Ray cluster a batch starts for itself (no `--address`) ends with its driver, however the driver ends (SIGKILL,
a dead terminal). Ray's own fate-sharing takes the raylet and the GCS, not the agents (dashboard, runtime env: they
hang for a minute on their way out, 100 MB each), nor anything on disk: Ray's session folder, the nodes' scratch
folder, the temp folders of a run killed in its worker. Every process of the cluster carries OWNER=<token> in its
environment (the driver's at ray.init) or has its log open in Ray's session folder; a reaper started by the driver
in a session of its own waits for the end of its standard input (the driver's exit or `close`), then kills them and
removes those folders.

    python -m llm_ide.swebench.ray_reaper TOKEN   # stdin: a folder to remove per line"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from llm_ide.environments.processes import start_time
from llm_ide.environments.scratch import carries, pid_namespace

OWNER = "LLM_IDE_RAY_OWNER"
ROUNDS = 100  # rounds of killing (a process the raylet started while we killed is found in the next)
ROUND_PAUSE = 0.05  # seconds for the killed ones to leave /proc before the next look


class Reaper:
    """The driver's end of the reaper: the folders to remove go down its standard input, whose end starts it."""

    def __init__(self) -> None:
        self.token = os.urandom(8).hex()
        self.process = subprocess.Popen(
            [sys.executable, "-m", "llm_ide.swebench.ray_reaper", self.token],
            stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,  # a terminal's signals to the driver's group do not reach it
        )

    def hold(self, folder: str | Path) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(f"{folder}\n")
        self.process.stdin.flush()

    def close(self, timeout: float = 60) -> None:
        """The cluster's processes killed and its folders removed, now (after ray.shutdown: whatever it left)."""
        with contextlib.suppress(OSError):
            assert self.process.stdin is not None
            self.process.stdin.close()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout)


def reap(token: str, folders: list[Path], driver: int) -> None:
    """Kills the cluster's processes, then removes `folders` and the temp folders of the killed processes
    (`llm-ide-<kind>-<namespace>.<pid>.<start>-…`: a run's, in a worker)."""
    killed: dict[int, int | None] = {}
    for _ in range(ROUNDS):
        found = [pid for pid in members(token, folders, driver) if pid not in killed or start_time(pid) != killed[pid]]
        if not found:
            break
        for pid in found:
            killed[pid] = start_time(pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(ROUND_PAUSE)
    temp, namespace = Path(tempfile.gettempdir()), pid_namespace()
    for pid, start in killed.items():
        folders += temp.glob(f"llm-ide-*-{namespace}.{pid}.{start}-*")
    for folder in folders:
        latest = folder.parent / "session_latest"  # Ray's link to its newest session
        if latest.is_symlink() and Path(os.readlink(latest)) == folder:
            latest.unlink(missing_ok=True)
        shutil.rmtree(folder, ignore_errors=True)


def members(token: str, folders: list[Path], driver: int) -> list[int]:
    """The cluster's processes: those that carry the token, and those with a file open in its folders (Ray's agents
    and workers write over their environment with their process title; every one has its log open there). Never the
    driver, which has its own log open there too, and waits for the reaper when it ends normally."""
    inside, spared = tuple(f"{folder}/" for folder in folders), {os.getpid(), driver}
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and int(entry.name) not in spared:
            pid = int(entry.name)
            if carries(pid, token, OWNER) or holds_open(pid, inside):
                found.append(pid)
    return found


def holds_open(pid: int, inside: tuple[str, ...]) -> bool:
    with contextlib.suppress(OSError):
        for fd in os.scandir(f"/proc/{pid}/fd"):
            with contextlib.suppress(OSError):
                if os.readlink(fd.path).startswith(inside):
                    return True
    return False


def main() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGHUP, signal.SIG_IGN)
    token, driver = sys.argv[1], os.getppid()  # (the driver is gone when the input ends: asked first)
    folders = [Path(line.rstrip("\n")) for line in sys.stdin if line.strip()]
    reap(token, folders, driver)


if __name__ == "__main__":
    main()
