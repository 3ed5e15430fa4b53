"""The session server: runs the target under pdb in this very process and serves pdb commands on a unix socket.

`debugger start` launches it detached. The program's output (fd 1 and 2, so subprocesses too) and pdb's own output
go through one pipe, in order; at every pdb prompt a sync mark goes down the same pipe, so a request knows where
the output of its command ends. A command that does not come back to the prompt within its timeout gets the
program interrupted (SIGINT → pdb stops where it is), so nothing hangs.
"""

import argparse
import bdb
import contextlib
import io
import json
import os
import pdb
import signal
import socket
import sys
import threading
import time
import traceback

from llm_ide_debugger import common
from llm_ide_debugger.pipe import Output
from llm_ide_debugger.session_pdb import Channel, SessionPdb

INTERRUPT_GRACE = 3.0
SYNC_WAIT = 2.0
INTERNAL_DIRS = ("_pytest", "pluggy", "llm_ide_debugger")
INTERNAL_FILES = ("bdb.py", "pdb.py", "runpy.py")
STDLIB_UNITTEST = os.path.join(os.path.dirname(os.__file__), "unittest") + os.sep
PREFIX = common.PREFIX

SESSION = None  # the running Session (the pytest plugin reaches it here)


class Session:
    def __init__(self, root: str, sync_fd: int, output: Output, condition: threading.Condition) -> None:
        self.root = root
        self.state = "starting"  # starting | prompt | sent | running | ended
        self.prompts = 0
        self.prompt_mark = 0
        self.end_mark = 0
        self.delivered_end = False
        self.last_request = time.time()
        self.pdb = None  # type: SessionPdb | None
        self.streams = []  # type: list[io.TextIOBase]
        self._sync_fd = sync_fd
        self._output = output
        self._condition = condition
        self._marks = 0
        self._commands = []  # type: list[str]
        self._client_lock = threading.Lock()
        self.cleanup = lambda: None  # removes the socket and session file (set by main)

    # -- paths and frames

    def display_path(self, filename: str) -> str:
        if filename.startswith("<"):
            return filename
        relative = os.path.relpath(filename, self.root)
        return filename if relative.startswith(os.pardir) else relative

    def is_internal(self, frame) -> bool:  # noqa: ANN001
        filename = frame.f_code.co_filename
        if filename.startswith("<"):
            return True
        parts = filename.split(os.sep)
        if any(part in INTERNAL_DIRS for part in parts) or filename.startswith(STDLIB_UNITTEST):
            return True
        return parts[-1] in INTERNAL_FILES or parts[-2:] == ["pytest", "__main__.py"]

    # -- the main thread (pdb) side

    def sync(self) -> int:
        for stream in self.streams:
            with contextlib.suppress(OSError, ValueError):
                stream.flush()
        with self._condition:
            self._marks += 1
            mark = self._marks
        os.write(self._sync_fd, b"\x1edbg-sync-%d\x1e" % mark)
        return mark

    def next_command(self) -> str:
        mark = self.sync()
        with self._condition:
            self.prompts += 1
            self.prompt_mark = mark
            self.state = "prompt"
            self._condition.notify_all()
            while not self._commands:
                self._condition.wait()
            command = self._commands.pop(0)
            self.state = "running"
        return command + "\n"

    def end(self, message: str) -> None:
        self.pdb.message(f"{PREFIX} {message}")
        mark = self.sync()
        with self._condition:
            self.state = "ended"
            self.end_mark = mark
            self._condition.notify_all()

    def wait_delivered(self, timeout: float) -> None:
        with self._condition:
            self._condition.wait_for(lambda: self.delivered_end, timeout)

    def on_sigint(self, signum, frame) -> None:  # noqa: ANN001
        if self.state in ("starting", "running"):
            self.pdb.sigint_handler(signum, frame)

    def post_mortem(self, title: str, traceback_object) -> None:  # noqa: ANN001
        self.pdb.message(
            f"{PREFIX} {title}: post-mortem debugging at the frame that raised"
            " (`where`, `up`, `down`, `p EXPR`); `c` lets the program go on."
        )
        self.pdb.reset()
        self.pdb.interaction(None, traceback_object)

    # -- the client side (request threads)

    def run(self, commands: "list[str]", timeout: float) -> "list[dict]":
        with self._client_lock:
            self.last_request = time.time()
            if not commands:
                return [{"command": None, "output": self._await_prompt(0, timeout, "the program")}]
            return [{"command": command, "output": self._execute(command, timeout)} for command in commands]

    def _execute(self, command: str, timeout: float) -> str:
        with self._condition:
            ready = self._condition.wait_for(lambda: self.state in ("prompt", "ended"), timeout)
            if self.state == "ended":
                return self._ended_output()
            if not ready:
                return self._output.take() + (
                    f"\n{PREFIX} not sent: the program is still running the previous command"
                    f" (no stop within {timeout:g}s more); `debugger stop` ends the session."
                )
            before = self._synced_take(self.prompt_mark)
            after = self.prompts
            self._commands.append(command)
            self.state = "sent"
            self._condition.notify_all()
        return before + self._await_prompt(after, timeout, f"`{command}`")

    def _await_prompt(self, after: int, timeout: float, what: str) -> str:
        def stopped() -> bool:
            return (self.state == "prompt" and self.prompts > after) or self.state == "ended"

        with self._condition:
            note = ""
            if not self._condition.wait_for(stopped, timeout):
                os.kill(os.getpid(), signal.SIGINT)
                if self._condition.wait_for(stopped, INTERRUPT_GRACE):
                    note = (
                        f"{PREFIX} {what} did not stop within {timeout:g}s:"
                        " the program was interrupted where it was (above)."
                    )
                else:
                    note = (
                        f"{PREFIX} {what} did not stop within {timeout:g}s and could not be interrupted"
                        " (blocked outside Python code?); it is still running: later commands wait for it,"
                        " `debugger stop` ends the session."
                    )
            if self.state == "ended":
                text = self._ended_output()
            elif self.state == "prompt":
                text = self._synced_take(self.prompt_mark)
            else:
                text = self._output.take()
        return text.rstrip("\n") + "\n" + note if note else text

    def _synced_take(self, mark: int) -> str:
        self._condition.wait_for(lambda: self._output.mark >= mark, SYNC_WAIT)
        return self._output.take()

    def _ended_output(self) -> str:
        text = self._synced_take(self.end_mark)
        if not text.strip():
            text = f"{PREFIX} The session has ended; `debugger start TARGET` starts a new one."
        return text

    def mark_delivered(self) -> None:
        with self._condition:
            if self.state == "ended":
                self.delivered_end = True
                self._condition.notify_all()

    def status(self) -> dict:
        location = ""
        if self.state == "prompt" and self.pdb is not None and self.pdb.stack:
            location = self.pdb.format_stack_entry(self.pdb.stack[self.pdb.curindex], "\n-> ")
        return {"state": self.state, "location": location}


def run_target(debugger: SessionPdb, kind: str, name: str) -> None:
    target_class = getattr(pdb, "_ModuleTarget" if kind == "module" else "_ScriptTarget", None)
    if target_class is not None and hasattr(debugger, "_run"):
        target = target_class(name)
        if hasattr(target, "check"):
            target.check()
        debugger._run(target)
    elif kind == "module":
        debugger._runmodule(name)
    else:
        debugger._runscript(name)


def format_exception(session: Session, error: BaseException) -> str:
    details = traceback.TracebackException(type(error), error, error.__traceback__)
    details.stack[:] = [entry for entry in details.stack if not _internal_file(entry.filename)]
    return "".join(details.format()).rstrip()


def _internal_file(filename: str) -> bool:
    parts = filename.split(os.sep)
    return filename.startswith("<") or parts[-1] in INTERNAL_FILES or "llm_ide_debugger" in parts


def run_program(session: Session, spec: dict) -> str:
    """Runs the target under pdb; returns how it ended (post-mortem happens inside)."""
    debugger = session.pdb
    sys.argv[:] = spec["argv"]
    script_dir = os.path.dirname(os.path.realpath(spec["name"])) if spec["kind"] == "script" else session.root
    sys.path.insert(0, script_dir)
    debugger.pending_breaks = [(filename, line) for filename, line in spec.get("breakpoints", [])]
    debugger.skip_first_stop = bool(debugger.pending_breaks)
    try:
        run_target(debugger, spec["kind"], spec["name"])
    except SystemExit as exit:
        code = exit.code
        if code is None or isinstance(code, int):
            return f"The program exited with status {code or 0}; the session has ended."
        return f"The program exited: {code} (status 1); the session has ended."
    except bdb.BdbQuit:
        return "Quit: the program was stopped and the session has ended."
    except BaseException as error:  # the program's own uncaught exception: show it and debug it post mortem
        debugger.message(format_exception(session, error))
        session.post_mortem(f"The program raised {type(error).__name__}", sys.exc_info()[2])
        return "Post-mortem debugging finished; the session has ended."
    if getattr(debugger, "_user_requested_quit", False):
        return "Quit: the program was stopped and the session has ended."
    return "The program finished (exit status 0); the session has ended."


def serve(listener: socket.socket, session: Session) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=handle, args=(connection, session), daemon=True).start()


def handle(connection: socket.socket, session: Session) -> None:
    with connection:
        connection.settimeout(30)
        try:
            request = json.loads(common.receive_all(connection).decode("utf-8"))
        except (OSError, ValueError):
            return
        connection.settimeout(None)
        if request.get("op") == "status":
            response = session.status()
            ended = False
        else:
            results = session.run(list(request.get("commands") or []), float(request.get("timeout") or 10))
            response = {"results": results, "state": session.state}
            ended = session.state == "ended"
        if ended:
            session.cleanup()  # from now on clients find no session, even while this process winds down
        try:
            connection.sendall(json.dumps(response).encode("utf-8"))
        except OSError:
            return
    if ended:
        session.mark_delivered()


def watchdog(session: Session, idle_timeout: float, cleanup) -> None:  # noqa: ANN001
    while True:
        time.sleep(min(5.0, idle_timeout))
        if time.time() - session.last_request > idle_timeout:
            cleanup()
            if os.getpgid(0) == os.getpid():
                os.killpg(os.getpid(), signal.SIGKILL)
            os._exit(3)


def text_stream(fd: int) -> io.TextIOWrapper:
    return open(fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1, closefd=False)  # noqa: SIM115


def main(argv: "list[str] | None" = None) -> None:
    parser = argparse.ArgumentParser(prog="llm_ide_debugger.server")
    parser.add_argument("--state-dir", required=True)
    parser.add_argument("--spec", required=True, help="JSON: kind, name, argv, root, breakpoints, target")
    parser.add_argument("--idle-timeout", type=float, default=3600.0)
    args = parser.parse_args(argv)
    spec = json.loads(args.spec)
    directory = args.state_dir

    read_fd, write_fd = os.pipe()
    sync_fd = os.dup(write_fd)
    os.dup2(write_fd, 1)
    os.dup2(write_fd, 2)
    os.close(write_fd)
    # Process-lifetime streams (no context manager): the program's stdio, and pdb's own output down the same pipe.
    sys.stdin = open(os.devnull)  # noqa: SIM115
    sys.stdout = text_stream(1)
    sys.stderr = text_stream(2)
    pdb_output = text_stream(sync_fd)

    condition = threading.Condition()
    session = Session(spec["root"], sync_fd, Output(read_fd, condition), condition)
    session.streams = [pdb_output, sys.stdout, sys.stderr]
    session.pdb = SessionPdb(session, Channel(session), pdb_output)
    global SESSION
    SESSION = session
    signal.signal(signal.SIGINT, session.on_sigint)

    path = common.socket_path(directory)
    if os.path.exists(path):
        os.unlink(path)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    os.chmod(path, 0o600)
    listener.listen(8)

    def cleanup() -> None:
        for leftover in (path, common.session_file(directory)):
            with contextlib.suppress(OSError):
                os.unlink(leftover)

    session.cleanup = cleanup
    common.write_session(
        directory,
        {
            "pid": os.getpid(),
            "socket": path,
            "target": spec["target"],
            "root": spec["root"],
            "python": sys.executable,
            "started": time.time(),
        },
    )
    threading.Thread(target=serve, args=(listener, session), name="debugger-serve", daemon=True).start()
    threading.Thread(
        target=watchdog, args=(session, args.idle_timeout, cleanup), name="debugger-watchdog", daemon=True
    ).start()
    try:
        outcome = run_program(session, spec)
    except BaseException as error:  # the debugger itself failed: say so to the client instead of vanishing
        outcome = f"The debugger failed: {format_exception(session, error)}"
    session.end(outcome)
    session.wait_delivered(args.idle_timeout)
    time.sleep(0.2)
    cleanup()
    os._exit(0)
