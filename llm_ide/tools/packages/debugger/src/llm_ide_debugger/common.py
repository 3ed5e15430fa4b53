"""Where a session lives (state dir, socket) and the one-request-one-response JSON exchange over it."""

import hashlib
import json
import os
import socket
import tempfile

PREFIX = "[debugger]"
MAX_SOCKET_PATH = 100


def work_tree(directory: str) -> str:
    """The nearest enclosing folder with a `.git` (the repository being worked on), else `directory` itself."""
    current = directory
    while True:
        if os.path.exists(os.path.join(current, ".git")):
            return current
        parent = os.path.dirname(current)
        if parent == current:
            return directory
        current = parent


def state_dir(explicit: "str | None" = None) -> str:
    """--state-dir, else $DEBUGGER_STATE_DIR, else a temp dir unique to this installation of the package and the
    repository it is used in (runs on one host share a cached installation, each on its own repository)."""
    chosen = explicit or os.environ.get("DEBUGGER_STATE_DIR")
    if not chosen:
        place = os.path.dirname(os.path.abspath(__file__)) + "\0" + work_tree(os.path.abspath(os.getcwd()))
        install = hashlib.sha256(place.encode()).hexdigest()[:10]
        chosen = os.path.join(tempfile.gettempdir(), f"llm-ide-debugger-{os.getuid()}-{install}")
    return os.path.abspath(chosen)


def socket_path(directory: str) -> str:
    path = os.path.join(directory, "session.sock")
    if len(path) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(directory.encode()).hexdigest()[:16]
    return os.path.join(tempfile.gettempdir(), f"llm-ide-debugger-{digest}.sock")


def session_file(directory: str) -> str:
    return os.path.join(directory, "session.json")


def read_session(directory: str) -> "dict | None":
    try:
        with open(session_file(directory)) as handle:
            return json.load(handle)
    except (OSError, ValueError):
        return None


def write_session(directory: str, data: dict) -> None:
    temp = session_file(directory) + ".tmp"
    with open(temp, "w") as handle:
        json.dump(data, handle)
    os.replace(temp, session_file(directory))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def send_request(path: str, request: dict, timeout: float) -> dict:
    """One JSON request, one JSON response; raises OSError when no server answers."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as connection:
        connection.settimeout(timeout)
        connection.connect(path)
        connection.sendall(json.dumps(request).encode() + b"\n")
        connection.shutdown(socket.SHUT_WR)
        return json.loads(receive_all(connection).decode("utf-8"))


def receive_all(connection: socket.socket) -> bytes:
    chunks = []
    while True:
        data = connection.recv(65536)
        if not data:
            return b"".join(chunks)
        chunks.append(data)
