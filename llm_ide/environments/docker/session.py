"""The container's shell session: one long-lived bash attached over the exec API, the protocol it speaks."""

from __future__ import annotations

import contextlib
import re
import socket
import time
import uuid
from typing import Protocol

import docker

from llm_ide.environments.base import EnvironmentFailure

START_TIMEOUT = 120.0
STATUS = re.compile(rb"ready|-?\d+")
WAKE = 0.1  # seconds a read waits at most before it looks again (a KeyboardInterrupt raised in its thread lands)

# The shell session: one long-lived bash inside the container. It reads this script, then its settings (the token
# travels on stdin, never in argv where `ps` would show it), then NUL-separated (timeout, cwd, command, after)
# quadruples from stdin and runs each command in its own process group under `timeout -s KILL`, so a timeout kills the
# whole group inside the container. After each command it evaluates `after` (ours, silent: what the command must not
# leave; in the same round trip, builtins until there is something to do) and prints the token and the command's exit
# status.
SESSION = r"""
IFS= read -r -d '' token && IFS= read -r -d '' pidfile && IFS= read -r -d '' conda_env || exit 1
if [ -n "$conda_env" ]; then
  for base in "${CONDA_EXE%/bin/conda}" /opt/miniconda3 /opt/conda "$HOME"/miniconda3 "$HOME"/miniforge3; do
    if [ -n "$base" ] && [ -d "$base/envs/$conda_env" ] && [ -f "$base/etc/profile.d/conda.sh" ]; then
      . "$base/etc/profile.d/conda.sh" && conda activate "$conda_env"
      break
    fi
  done
fi
echo $$ > "$pidfile.session"
printf '%sready\n' "$token"
exec 2>/dev/null
while IFS= read -r -d '' limit && IFS= read -r -d '' dir && IFS= read -r -d '' cmd && IFS= read -r -d '' after; do
  (cd -- "$dir" && exec timeout -s KILL "$limit" bash -c "$cmd") </dev/null 2>&1 &
  echo $! > "$pidfile"
  wait $!
  status=$?
  [ -z "$after" ] || eval "$after" </dev/null >/dev/null 2>&1
  printf '%s%d\n' "$token" "$status"
done
"""


class Sink(Protocol):
    def feed(self, data: bytes) -> None: ...


class Collector:
    def __init__(self) -> None:
        self.data = bytearray()

    def feed(self, data: bytes) -> None:
        self.data += data


class Session:
    """The container's shell session: a bash read loop attached over the exec API (stdin in, multiplexed output out)."""

    def __init__(
        self, api: docker.APIClient, container_id: str, conda_env: str | None, workdir: str, user: str = ""
    ) -> None:
        self.token = f"\x1e__llm_ide_{uuid.uuid4().hex}__".encode()
        self.pidfile = f"/tmp/.llm-ide-{uuid.uuid4().hex}.pid"
        exec_id = api.exec_create(
            container_id,
            ["bash", "-c", 'IFS= read -r -d "" script && eval "$script"', "llm-ide-session"],
            stdin=True,
            workdir=workdir,
            user=user or "0:0",
        )["Id"]
        raw = api.exec_start(exec_id, socket=True)
        self._raw = raw
        self.sock: socket.socket = getattr(raw, "_sock", raw)
        self._frames = bytearray()
        self._left = 0  # bytes of the current frame's payload not received yet
        self.alive = True
        self.stale = False  # interrupted mid-command: its output would leak into the next one, so it is replaced
        self.send(SESSION, self.token.decode(), self.pidfile, conda_env or "")
        startup = Collector()
        if self.wait_token(startup, time.monotonic() + START_TIMEOUT) is None:
            raise EnvironmentFailure(f"the container's shell did not start: {startup.data.decode(errors='replace')}")
        self.startup_output = startup.data.decode(errors="replace")

    def send(self, *fields: str) -> None:
        self.sock.sendall(b"".join(field.encode() + b"\0" for field in fields))

    def read(self, deadline: float) -> bytes | None:
        """The next payload bytes; b"" at end of stream; None when the deadline passes."""
        while True:
            if self._left and self._frames:
                take = bytes(self._frames[: self._left])
                del self._frames[: len(take)]
                self._left -= len(take)
                return take
            if not self._left and len(self._frames) >= 8:
                self._left = int.from_bytes(self._frames[4:8], "big")
                del self._frames[:8]
                continue
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.sock.settimeout(min(remaining, WAKE))
            try:
                data = self.sock.recv(1 << 16)
            except TimeoutError:
                continue
            if not data:
                self.alive = False
                return b""
            self._frames += data

    def wait_token(self, sink: Sink, deadline: float) -> str | None:
        """Feeds the output before the token to `sink`; returns what follows the token up to the newline."""
        pending = bytearray()
        keep = len(self.token) + 16
        while True:
            at = pending.find(self.token)
            if at >= 0:
                end = pending.find(b"\n", at)
                status = pending[at + len(self.token) : end if end >= 0 else len(pending)]
                if end >= 0 and STATUS.fullmatch(status):
                    sink.feed(bytes(pending[:at]))
                    return status.decode()
                if end >= 0 or len(status) > 16:  # not our status line: ordinary output
                    sink.feed(bytes(pending[: at + 1]))
                    del pending[: at + 1]
                    continue
            elif len(pending) > keep:
                sink.feed(bytes(pending[:-keep]))
                del pending[:-keep]
            data = self.read(deadline)
            if not data:
                sink.feed(bytes(pending))
                return None
            pending += data

    def close(self) -> None:
        self.alive = False
        with contextlib.suppress(OSError):
            self.sock.close()
        with contextlib.suppress(Exception):
            self._raw.close()
